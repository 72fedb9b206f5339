//go:build !agentrl_cuda || !cgo

package gpu

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// Without the agentrl_cuda tag, New reports that CUDA is not compiled in, and a
// zero Backend fails every call with the same error instead of panicking.
func TestNewWithoutCUDATag(t *testing.T) {
	be, err := New(context.Background())
	require.ErrorIs(t, err, ErrNotCompiled)
	require.Nil(t, be)

	var z Backend
	var b backend.Backend = &z
	_, err = b.Alloc(4)
	require.ErrorIs(t, err, ErrNotCompiled)
	require.ErrorIs(t, b.Gemm(backend.Gemm{}, nil, nil, nil), ErrNotCompiled)
	require.ErrorIs(t, b.AttentionForward(backend.Attention{}, nil, nil, nil, nil, nil, nil), ErrNotCompiled)
	require.ErrorIs(t, z.AdamW(AdamWStep{}, nil, nil, nil, nil), ErrNotCompiled)
	_, err = z.GradNorm()
	require.ErrorIs(t, err, ErrNotCompiled)
	require.ErrorIs(t, z.Close(), ErrNotCompiled)
	require.Equal(t, "gpu(not compiled in)", z.Name())
	require.False(t, z.TensorCoreAttention(128))
}
