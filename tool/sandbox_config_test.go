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
	// On a host of 1 TiB, half of it shared among at most 256 workers is
	// at least 2 GiB: the default's cap.
	c, err := SandboxConfig{}.withDefaultsFor(1 << 40)
	require.NoError(t, err)
	assert.Equal(t, SandboxConfig{
		Workers: runtime.NumCPU(), Timeout: 10 * time.Second, CPUTime: 10 * time.Second,
		MemoryBytes: 1 << 30, MaxProcesses: 64, MaxFileBytes: 16 << 20, MaxOpenFiles: 256,
		ScratchBytes: 64 << 20, MaxOutputBytes: 1 << 20, Isolation: IsolationAuto,
		Preload: defaultPreload, MaxCallsPerWorker: 10000,
		CallMemoryBytes: 2 << 30, CallProcesses: 64, CallCPUTime: 10 * time.Second, BudgetMechanism: BudgetAuto,
	}, c)

	// CPUTime follows a set Timeout; an empty non-nil Preload stays empty.
	c, err = SandboxConfig{Timeout: 3 * time.Second, MemoryBytes: -1, Preload: []string{}}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, c.CPUTime)
	assert.Equal(t, int64(-1), c.MemoryBytes, "negative: no limit")
	assert.Equal(t, []string{}, c.Preload)
}

// TestDefaultCallMemory: half of the host's memory shared among the
// workers, clamped to [128 MiB, 2 GiB]; an unknown host counts as 4 GiB.
func TestDefaultCallMemory(t *testing.T) {
	cases := []struct {
		host    int64
		workers int
		want    int64
	}{
		{24 << 30, 2, 2 << 30},     // 24 GiB / 4 = 6 GiB, capped
		{4 << 30, 4, 512 << 20},    // 4 GiB / 8
		{3 << 30, 2, 768 << 20},    // 3 GiB / 4
		{1 << 30, 8, 128 << 20},    // 64 MiB, raised to the floor
		{0, 1, 2 << 30},            // unknown: 4 GiB / 2
		{0, 4, 512 << 20},          // unknown: 4 GiB / 8
		{-1, 16, 128 << 20},        // unknown: 4 GiB / 32 = 128 MiB
		{64 << 30, 16, 2 << 30},    // 64 GiB / 32 = 2 GiB
		{48 << 30, 16, 1536 << 20}, // 48 GiB / 32
	}
	for _, c := range cases {
		assert.Equal(t, c.want, defaultCallMemory(c.host, c.workers), "host %d, %d workers", c.host, c.workers)
		cfg, err := SandboxConfig{Workers: c.workers}.withDefaultsFor(c.host)
		require.NoError(t, err)
		assert.Equal(t, c.want, cfg.CallMemoryBytes)
	}
	// The call budgets follow the rlimits they default to.
	cfg, err := SandboxConfig{Workers: 1, MaxProcesses: 10, CPUTime: 2 * time.Second}.withDefaultsFor(0)
	require.NoError(t, err)
	assert.Equal(t, 10, cfg.CallProcesses)
	assert.Equal(t, 2*time.Second, cfg.CallCPUTime)
	// Negative memory: no memory budget, kept as such.
	cfg, err = SandboxConfig{Workers: 1, CallMemoryBytes: -1}.withDefaultsFor(0)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), cfg.CallMemoryBytes)
}

// TestSandboxConfigBudgetErrors: bad budget values are refused, naming
// the field.
func TestSandboxConfigBudgetErrors(t *testing.T) {
	cases := []struct {
		cfg   SandboxConfig
		field string
	}{
		{SandboxConfig{CallMemoryBytes: 256}, "CallMemoryBytes"}, // MiB given as bytes
		{SandboxConfig{CallMemoryBytes: 16<<20 - 1}, "CallMemoryBytes"},
		{SandboxConfig{CallProcesses: -1}, "CallProcesses"},
		{SandboxConfig{CallCPUTime: -time.Second}, "CallCPUTime"},
		{SandboxConfig{BudgetMechanism: BudgetWatchdog + 1}, "BudgetMechanism"},
		{SandboxConfig{BudgetMechanism: -1}, "BudgetMechanism"},
		{SandboxConfig{CgroupParent: "agentrl.slice"}, "CgroupParent"},
		{SandboxConfig{CgroupParent: "/a/../b"}, "CgroupParent"},
		{SandboxConfig{CgroupParent: "/a/"}, "CgroupParent"},
	}
	for _, c := range cases {
		_, err := c.cfg.withDefaultsFor(8 << 30)
		require.Error(t, err, "%+v", c.cfg)
		assert.Contains(t, err.Error(), c.field)
	}
	for _, ok := range []SandboxConfig{
		{CallMemoryBytes: 16 << 20}, {CallMemoryBytes: -5}, {CgroupParent: "/"}, {CgroupParent: "/agentrl.slice/x"},
		{BudgetMechanism: BudgetCgroup1},
	} {
		_, err := ok.withDefaultsFor(8 << 30)
		assert.NoError(t, err, "%+v", ok)
	}
}

// TestBudgetMechanismString: the names Isolation.Budget reports.
func TestBudgetMechanismString(t *testing.T) {
	assert.Equal(t, "auto", BudgetAuto.String())
	assert.Equal(t, "cgroup2", BudgetCgroup2.String())
	assert.Equal(t, "cgroup1", BudgetCgroup1.String())
	assert.Equal(t, "watchdog", BudgetWatchdog.String())
	assert.Equal(t, "BudgetMechanism(9)", BudgetMechanism(9).String())
}
