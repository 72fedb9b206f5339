//go:build agentrl_cuda && cgo

package device_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/gpu"
)

// TestOpenCUDA: on a GPU (or gpu/kernels/emu's fake driver), the
// precision follows the model's size under auto and the flag otherwise,
// and the description says which attention kernels the model's head dim
// gets: tensor cores in bf16 up to head dim 128, float32 otherwise.
func TestOpenCUDA(t *testing.T) {
	if here, err := gpuHere(t); !here {
		t.Skipf("no GPU: %v", err)
	}
	cuda0 := device.Spec{Kind: device.CUDA}
	for _, tc := range []struct {
		name            string
		c               device.Config
		hidden, headDim int
		want            device.Precision
		says            []string
	}{
		{"arith auto", device.Config{}, 128, 32, device.FP32,
			[]string{"cuda:0: gpu(", "; precision fp32 (auto: hidden size 128 < 1024); attention at head dim 32 on fp32 kernels"}},
		{"Qwen3-0.6B auto", device.Config{Device: cuda0}, 1024, 128, device.BF16,
			[]string{"; precision bf16 (auto: hidden size 1024 ≥ 1024); attention at head dim 128 on bf16 tensor cores"}},
		{"bf16 asked, head dim 256", device.Config{Device: cuda0, Precision: device.BF16}, 512, 256, device.BF16,
			[]string{"; precision bf16 (as asked); attention at head dim 256 on fp32 kernels"}},
		{"tf32 asked", device.Config{Device: cuda0, Precision: device.TF32}, 2048, 128, device.TF32,
			[]string{"; precision tf32 (as asked); attention at head dim 128 on fp32 kernels"}},
		{"unknown model", device.Config{Device: cuda0}, 0, 0, device.FP32,
			[]string{"; precision fp32 (auto: model size unknown, fp32 below hidden size 1024)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tinyConfig(tc.hidden, tc.headDim)
			d, err := device.Open(context.Background(), tc.c, cfg)
			require.NoError(t, err)
			defer func() { require.NoError(t, d.Close()) }()
			t.Logf("device: %s", d)
			assert.NoError(t, d.Fallback())
			assert.Equal(t, device.Config{Device: cuda0, Precision: tc.want}, d.Config())
			for _, s := range tc.says {
				assert.Contains(t, d.String(), s)
			}
			_, ok := d.Backend().(*gpu.Backend)
			assert.True(t, ok, "%T", d.Backend())
		})
	}

	_, err := device.Open(context.Background(), device.Config{Device: device.Spec{Kind: device.CUDA, Ordinal: 99}}, tinyConfig(64, 16))
	require.ErrorIs(t, err, gpu.ErrNoDevice)
	assert.Contains(t, err.Error(), "device cuda:99: ")
}
