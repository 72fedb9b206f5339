//go:build agentrl_cuda && cgo

package gpu

import (
	"errors"
	"fmt"

	"github.com/agentrl/agentrl/policy/backend"
)

var _ backend.BF16Weights = (*Backend)(nil)

// AllocBF16 returns a zeroed buffer of n elements stored as bfloat16, 2
// bytes each: a weight that the forward reads in bf16 and that has no
// float32 copy on this device (see backend.BF16Weights; policy's
// ShardOptions.BF16Weights keeps the float32 master as the rank's shard).
// A GEMM multiplies it as it is, with no copy in the weight cache; the
// embedding gathers its rows widened; a norm's weight and a bias are
// widened into scratch for the call. It needs BF16 precision: in TF32 or
// FP32 precision the products read float32 weights, and the error wraps
// errors.ErrUnsupported.
func (be *Backend) AllocBF16(n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: alloc of %d elements", backend.ErrShape, n)
	}
	if be.cfg.precision != BF16 {
		return nil, fmt.Errorf("%w: gpu: bfloat16 weight buffers in %v precision (they need bf16)", errors.ErrUnsupported, be.cfg.precision)
	}
	b := &buffer{owner: be, n: n, half: true}
	words := (n + 1) / 2 // whole 32-bit words, so that memset32 clears them
	err := be.enqueue(nil, func() error {
		p, err := be.cache.get(uint64(4 * words))
		if err != nil {
			return err
		}
		b.ptr = p
		return be.memset(p, 0, words)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// IsBF16 reports whether b is a bf16 buffer (AllocBF16) of this Backend.
func (be *Backend) IsBF16(b backend.Buffer) bool {
	gb, ok := b.(*buffer)
	return ok && gb != nil && gb.owner == be && gb.half
}

// fillHalf sets every element of the bf16 buffer b to v rounded to
// bfloat16: a 32-bit memset of two elements a word (its allocation is
// whole words).
func (be *Backend) fillHalf(b *buffer, v float32) error {
	h := uint32(bf16FromFloat32(v))
	return be.memsetBits(b.ptr, h|h<<16, (b.n+1)/2)
}

// halfWeight is the GEMM operand of the bf16 buffer b: the buffer itself
// for cuBLAS; for the fallback GEMM, which multiplies bf16-rounded
// float32, its widened copy from the weight cache.
func (be *Backend) halfWeight(b *buffer) (operand, error) {
	if be.blas != nil || b.n == 0 {
		return operand{b.ptr, opBF16}, nil
	}
	n := int64(b.n)
	p, err := be.weights.get(b, uint64(4*n), be.cache.get, func(dst devPtr) error { return be.elementwise("bf16_to_f32", n, dst, b.ptr, n) })
	if err != nil {
		return operand{}, fmt.Errorf("widening a bf16 weight: %w", err)
	}
	return operand{p, opRounded}, nil
}

// widen returns the float32 values of b: b's own memory, or for a bf16
// buffer a widened copy in scratch (a norm's weight, a bias: a few
// thousand elements). A nil b gives 0.
func (be *Backend) widen(s *scratch, b *buffer) (devPtr, error) {
	if b == nil || !b.half || b.n == 0 {
		if b == nil {
			return 0, nil
		}
		return b.ptr, nil
	}
	p, err := s.get(4 * b.n)
	if err != nil {
		return 0, err
	}
	return p, be.elementwise("bf16_to_f32", int64(b.n), p, b.ptr, int64(b.n))
}
