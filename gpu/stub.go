//go:build !agentrl_cuda || !cgo

package gpu

import (
	"context"

	"github.com/agentrl/agentrl/policy/backend"
)

// Backend is the CUDA backend. In this build (without the agentrl_cuda tag or
// without cgo) it cannot be created: New returns ErrNotCompiled, and every
// method of a zero Backend returns ErrNotCompiled.
type Backend struct{}

var (
	_ backend.Backend     = (*Backend)(nil)
	_ backend.Optimizer   = (*Backend)(nil)
	_ backend.Initializer = (*Backend)(nil)
)

// New returns ErrNotCompiled: this binary has no CUDA support.
func New(ctx context.Context, opts ...Option) (*Backend, error) {
	return nil, ErrNotCompiled
}

// Name reports that CUDA is not compiled in.
func (*Backend) Name() string { return "gpu(not compiled in)" }

// Close returns ErrNotCompiled.
func (*Backend) Close() error { return ErrNotCompiled }

// TensorCoreAttention reports false: no attention runs in this build.
func (*Backend) TensorCoreAttention(int) bool { return false }

// Stats returns zero statistics.
func (*Backend) Stats() CacheStats { return CacheStats{} }

// Profile returns ErrNotCompiled.
func (*Backend) Profile() ([]KernelTime, error) { return nil, ErrNotCompiled }

// Counters returns ErrNotCompiled.
func (*Backend) Counters() (Counters, error) { return Counters{}, ErrNotCompiled }

// ResetCounters returns ErrNotCompiled.
func (*Backend) ResetCounters() error { return ErrNotCompiled }

// RandNormal returns ErrNotCompiled.
func (*Backend) RandNormal(backend.Buffer, uint64, float32) error { return ErrNotCompiled }

// ResetPeak returns ErrNotCompiled.
func (*Backend) ResetPeak() error { return ErrNotCompiled }

// Alloc returns ErrNotCompiled.
func (*Backend) Alloc(int) (backend.Buffer, error) { return nil, ErrNotCompiled }

// Free returns ErrNotCompiled.
func (*Backend) Free(backend.Buffer) error { return ErrNotCompiled }

// Upload returns ErrNotCompiled.
func (*Backend) Upload(backend.Buffer, int, []float32) error { return ErrNotCompiled }

// Download returns ErrNotCompiled.
func (*Backend) Download([]float32, backend.Buffer, int) error { return ErrNotCompiled }

// Copy returns ErrNotCompiled.
func (*Backend) Copy(backend.Buffer, int, backend.Buffer, int, int) error { return ErrNotCompiled }

// Fill returns ErrNotCompiled.
func (*Backend) Fill(backend.Buffer, float32) error { return ErrNotCompiled }

// Gemm returns ErrNotCompiled.
func (*Backend) Gemm(backend.Gemm, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// LinearForward returns ErrNotCompiled.
func (*Backend) LinearForward(backend.Linear, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// LinearBackward returns ErrNotCompiled.
func (*Backend) LinearBackward(backend.Linear, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// EmbeddingForward returns ErrNotCompiled.
func (*Backend) EmbeddingForward(backend.Buffer, backend.Buffer, []int32, int) error {
	return ErrNotCompiled
}

// EmbeddingBackward returns ErrNotCompiled.
func (*Backend) EmbeddingBackward(backend.Buffer, backend.Buffer, []int32, int) error {
	return ErrNotCompiled
}

// RMSNormForward returns ErrNotCompiled.
func (*Backend) RMSNormForward(int, int, float32, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// RMSNormBackward returns ErrNotCompiled.
func (*Backend) RMSNormBackward(int, int, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// NewRows returns ErrNotCompiled.
func (*Backend) NewRows([]int32, []backend.Span) (backend.Rows, error) { return nil, ErrNotCompiled }

// FreeRows returns ErrNotCompiled.
func (*Backend) FreeRows(backend.Rows) error { return ErrNotCompiled }

// RoPEForward returns ErrNotCompiled.
func (*Backend) RoPEForward(int, int, backend.Rows, []float32, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// RoPEBackward returns ErrNotCompiled.
func (*Backend) RoPEBackward(int, int, backend.Rows, []float32, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// AttentionForward returns ErrNotCompiled.
func (*Backend) AttentionForward(backend.Attention, backend.Rows, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// AttentionBackward returns ErrNotCompiled.
func (*Backend) AttentionBackward(backend.Attention, backend.Rows, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// SwiGLUForward returns ErrNotCompiled.
func (*Backend) SwiGLUForward(backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// SwiGLUBackward returns ErrNotCompiled.
func (*Backend) SwiGLUBackward(backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// Add returns ErrNotCompiled.
func (*Backend) Add(backend.Buffer, backend.Buffer, backend.Buffer) error { return ErrNotCompiled }

// Axpy returns ErrNotCompiled.
func (*Backend) Axpy(float32, backend.Buffer, backend.Buffer) error { return ErrNotCompiled }

// LogProbEntropy returns ErrNotCompiled.
func (*Backend) LogProbEntropy(backend.LMHead, []int32, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// LogProbEntropyBackward returns ErrNotCompiled.
func (*Backend) LogProbEntropyBackward(backend.LMHead, []int32, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// Logits returns ErrNotCompiled.
func (*Backend) Logits(backend.LMHead, []int32, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// AdamW returns ErrNotCompiled.
func (*Backend) AdamW(AdamWStep, backend.Buffer, backend.Buffer, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// GradNorm returns ErrNotCompiled.
func (*Backend) GradNorm(...backend.Buffer) (float64, error) { return 0, ErrNotCompiled }

// Scale returns ErrNotCompiled.
func (*Backend) Scale(float32, backend.Buffer) error { return ErrNotCompiled }

// Synchronize returns ErrNotCompiled.
func (*Backend) Synchronize() error { return ErrNotCompiled }

// AllocBF16 returns ErrNotCompiled.
func (*Backend) AllocBF16(int) (backend.Buffer, error) { return nil, ErrNotCompiled }

// IsBF16 reports false: this build has no buffers.
func (*Backend) IsBF16(backend.Buffer) bool { return false }
