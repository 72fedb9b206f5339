package tool

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSandboxConfigZero: the zero SandboxConfig takes the defaults its
// fields name, and set fields are kept.
func TestSandboxConfigZero(t *testing.T) {
	c, err := SandboxConfig{}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, SandboxConfig{
		Workers: runtime.NumCPU(), Timeout: 10 * time.Second, CPUTime: 10 * time.Second,
		MemoryBytes: 1 << 30, MaxProcesses: 64, MaxFileBytes: 16 << 20, MaxOpenFiles: 256,
		ScratchBytes: 64 << 20, MaxOutputBytes: 1 << 20, Isolation: IsolationAuto,
		Preload: defaultPreload, MaxCallsPerWorker: 10000,
	}, c)

	// CPUTime follows a set Timeout; an empty non-nil Preload stays empty.
	c, err = SandboxConfig{Timeout: 3 * time.Second, MemoryBytes: -1, Preload: []string{}}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, c.CPUTime)
	assert.Equal(t, int64(-1), c.MemoryBytes, "negative: no limit")
	assert.Equal(t, []string{}, c.Preload)
}
