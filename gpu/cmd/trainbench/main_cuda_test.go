//go:build agentrl_cuda && cgo

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/gpu"
)

// TestEndToEndOnCUDA is TestEndToEndOnCPU on the CUDA backend, with the
// kernel profile: under gpu/kernels/emu's fake driver
// (bash gpu/kernels/emu/fakecuda.sh ./gpu/cmd/trainbench -test.run
// TestEndToEndOnCUDA) it runs the program's GPU-only paths — device
// memory peaks, counters, the profiled step — on the emulated kernels.
// The check's fp32 run matches the CPU reference within its bound, the
// bf16 run within bf16's.
func TestEndToEndOnCUDA(t *testing.T) {
	be, err := gpu.New(context.Background())
	if err != nil {
		require.True(t, errors.Is(err, gpu.ErrNoDriver) || errors.Is(err, gpu.ErrNoDevice), "%v", err)
		if os.Getenv("AGENTRL_REQUIRE_GPU") != "" {
			t.Fatalf("AGENTRL_REQUIRE_GPU is set but no GPU: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	require.NoError(t, be.Close())
	exe, err := os.Executable()
	require.NoError(t, err)
	var stderr bytes.Buffer
	o, err := parseFlags([]string{"-device", "cuda", "-shapes", "tiny:2x8", "-steps", "1", "-warmup", "1", "-kernels",
		"-torch", "env TRAINBENCH_HELPER=torch " + exe, "-check-shape", "tiny", "-check-lens", "9,5",
		"-check-cmd", "env TRAINBENCH_HELPER=check " + exe}, &stderr)
	require.NoError(t, err)
	var out bytes.Buffer
	ok, err := run(context.Background(), o, &out)
	require.NoError(t, err, stderr.String())
	rep := out.String()
	t.Log(rep)
	assert.True(t, ok, stderr.String())
	assert.NotContains(t, rep, "Errors:")
	assert.Contains(t, rep, "| fp32 | 12 |")
	assert.Contains(t, rep, "| bf16 | 12 |")
	assert.Contains(t, rep, "agentrl kernels of one profiled tiny step")
	assert.Contains(t, rep, "| rmsnorm_fwd |")
	assert.NotContains(t, rep, "| tiny | — | — |", "the device work per step is counted")
}
