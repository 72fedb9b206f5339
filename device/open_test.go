package device_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
)

// tinyConfig is a Qwen3 of hidden size hidden and head dim headDim.
func tinyConfig(hidden, headDim int) policy.Config {
	return policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 16, HiddenSize: hidden, IntermediateSize: 2 * hidden,
		NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: headDim,
		MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
	}
}

// gpuHere reports whether this binary opens a GPU on this machine, and
// otherwise the error gpu.New gives: gpu.ErrNotCompiled without the
// build tag, gpu.ErrNoDriver or gpu.ErrNoDevice without a GPU.
func gpuHere(t *testing.T) (bool, error) {
	t.Helper()
	g, err := gpu.New(context.Background())
	if err != nil {
		require.True(t, errors.Is(err, gpu.ErrNotCompiled) || errors.Is(err, gpu.ErrNoDriver) || errors.Is(err, gpu.ErrNoDevice),
			"gpu.New on a machine without a usable GPU: %v", err)
		if os.Getenv("AGENTRL_REQUIRE_GPU") != "" {
			t.Fatalf("AGENTRL_REQUIRE_GPU is set but no GPU: %v", err)
		}
		return false, err
	}
	require.NoError(t, g.Close())
	return true, nil
}

func TestOpenCPU(t *testing.T) {
	for _, p := range []device.Precision{device.PrecisionAuto, device.FP32} {
		d, err := device.Open(context.Background(), device.Config{Device: device.Spec{Kind: device.CPU}, Precision: p}, tinyConfig(32, 16))
		require.NoError(t, err)
		assert.Equal(t, device.Config{Device: device.Spec{Kind: device.CPU}, Precision: device.FP32}, d.Config())
		assert.NoError(t, d.Fallback())
		assert.True(t, strings.HasPrefix(d.String(), "cpu: cpu("), d.String())
		assert.True(t, strings.HasSuffix(d.String(), ", fp32"), d.String())
		_, ok := d.Backend().(backend.Optimizer)
		assert.True(t, ok, "the CPU backend runs the device optimizer")

		// A model runs on it.
		m, err := policy.New(tinyConfig(32, 16), 1, policy.WithBackend(d.Backend()))
		require.NoError(t, err)
		assert.Same(t, d.Backend(), m.Backend())
		_, err = m.Logits([]int{1, 2, 3})
		require.NoError(t, err)
		require.NoError(t, m.Close())
		require.NoError(t, d.Close())
		require.NoError(t, d.Close(), "Close twice")
	}
}

// TestOpenAuto: auto opens the GPU where this binary and machine have
// one, and otherwise the CPU, saying why.
func TestOpenAuto(t *testing.T) {
	here, gerr := gpuHere(t)
	for _, p := range []device.Precision{device.PrecisionAuto, device.BF16} {
		d, err := device.Open(context.Background(), device.Config{Precision: p}, tinyConfig(32, 16))
		require.NoError(t, err)
		if here {
			assert.NoError(t, d.Fallback())
			assert.Equal(t, device.CUDA, d.Config().Device.Kind)
			require.NoError(t, d.Close())
			continue
		}
		require.Error(t, d.Fallback())
		assert.Equal(t, device.Config{Device: device.Spec{Kind: device.CPU}, Precision: device.FP32}, d.Config())
		assert.Contains(t, d.String(), "; auto chose the CPU: ")
		assert.Contains(t, d.String(), gerr.Error(), "the GPU's own error is the reason")
		if errors.Is(gerr, gpu.ErrNotCompiled) {
			require.ErrorIs(t, d.Fallback(), gpu.ErrNotCompiled)
			assert.Contains(t, d.String(), "auto chose the CPU: this binary was built without the agentrl_cuda build tag")
		}
		for _, sentinel := range []error{gpu.ErrNotCompiled, gpu.ErrNoDriver, gpu.ErrNoDevice} {
			if errors.Is(gerr, sentinel) {
				require.ErrorIs(t, d.Fallback(), sentinel)
			}
		}
		if p == device.BF16 {
			assert.True(t, strings.HasSuffix(d.String(), "; -precision bf16 applies to CUDA only"), d.String())
		}
		require.NoError(t, d.Close())
	}
}

// TestOpenCUDAWithoutGPU: asking for CUDA where there is none is an
// error that says why, never a fallback or a panic.
func TestOpenCUDAWithoutGPU(t *testing.T) {
	here, gerr := gpuHere(t)
	if here {
		t.Skip("this machine has a GPU; open_cuda_test.go covers it")
	}
	for _, s := range []string{"cuda", "cuda:3"} {
		spec, err := device.ParseSpec(s)
		require.NoError(t, err)
		d, err := device.Open(context.Background(), device.Config{Device: spec}, tinyConfig(32, 16))
		require.Error(t, err)
		assert.Nil(t, d)
		assert.True(t, strings.HasPrefix(err.Error(), "device "+spec.String()+": "), err.Error())
		if errors.Is(gerr, gpu.ErrNotCompiled) {
			require.ErrorIs(t, err, gpu.ErrNotCompiled)
			assert.Contains(t, err.Error(), "this binary was built without the agentrl_cuda build tag")
		} else {
			assert.True(t, errors.Is(err, gpu.ErrNoDriver) || errors.Is(err, gpu.ErrNoDevice), "%v", err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := device.Open(context.Background(), device.Config{Device: device.Spec{Kind: device.CPU}, Precision: device.BF16}, policy.Config{})
	require.ErrorIs(t, err, device.ErrInvalid)
	_, err = device.Open(context.Background(), device.Config{Device: device.Spec{Kind: 5}}, policy.Config{})
	require.ErrorIs(t, err, device.ErrInvalid)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, k := range []device.Kind{device.Auto, device.CPU, device.CUDA} {
		_, err = device.Open(ctx, device.Config{Device: device.Spec{Kind: k}}, policy.Config{})
		require.ErrorIs(t, err, context.Canceled, "%v", k)
	}
}

func TestNewCPU(t *testing.T) {
	assert.True(t, strings.HasSuffix(device.NewCPU(3).Name(), ", 3 workers)"), device.NewCPU(3).Name())
	// workers ≤ 0: GOMAXPROCS, the default of the CPU backend.
	assert.Equal(t, device.NewCPU(0).Name(), device.NewCPU(-2).Name())
	_, ok := device.NewCPU(1).(backend.Optimizer)
	assert.True(t, ok)
}
