package cputime

import (
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSelfCountsWork: spinning for 50 ms of CPU adds about that much.
// The spin reads the clock it is checked against, so the test cannot
// pass by a constant.
func TestSelfCountsWork(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no getrusage")
	}
	t0 := Self()
	for Self()-t0 < 50*time.Millisecond {
	}
	d := Self() - t0
	assert.GreaterOrEqual(t, d, 50*time.Millisecond)
	assert.Less(t, d, 5*time.Second)
}

// TestWithChildren counts a child that has ended: a shell that spins for
// a moment adds its time, Self does not.
func TestWithChildren(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil || runtime.GOOS == "windows" {
		t.Skip("no sh")
	}
	before, selfBefore := WithChildren(), Self()
	require.NoError(t, exec.Command(sh, "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done").Run())
	kids := (WithChildren() - before) - (Self() - selfBefore)
	assert.Greater(t, kids, time.Duration(0), "the child's time")
}
