package loss

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"
)

// Batch holds the per-token inputs of one loss computation, all [B,T]
// float32 tensors laid out row-major (row = sequence, column = response
// position). LogProbs, OldLogProbs, Advantages and Mask are required;
// the others are optional and enable the terms that need them.
//
// Every value must be finite, padding included. Mask values must be 0 or 1;
// a position with mask 0 contributes nothing to the loss, the metrics or
// the gradients.
type Batch struct {
	LogProbs    *tensor.Dense // log π_θ(a_t), the tensor gradients are taken against
	OldLogProbs *tensor.Dense // log π_old(a_t) at rollout time, recomputed by the trainer
	Advantages  *tensor.Dense // A_t
	Mask        *tensor.Dense // response mask: 1 for trained tokens, 0 for prompt, tool output, padding

	RefLogProbs     *tensor.Dense // log π_ref(a_t), for the KL loss
	RolloutLogProbs *tensor.Dense // the rollout sampler's log-probs, for TIS and the rollout correction's decoupled mode
	Entropy         *tensor.Dense // per-token entropy of π_θ, for the entropy bonus
}

// field is one named tensor of a Batch.
type field struct {
	name string
	t    *tensor.Dense
}

func (b Batch) fields() []field {
	return []field{
		{"LogProbs", b.LogProbs}, {"OldLogProbs", b.OldLogProbs}, {"Advantages", b.Advantages}, {"Mask", b.Mask},
		{"RefLogProbs", b.RefLogProbs}, {"RolloutLogProbs", b.RolloutLogProbs}, {"Entropy", b.Entropy},
	}
}

// dims validates the batch and returns B and T.
func (b Batch) dims() (rows, cols int, err error) {
	for i, f := range b.fields() {
		if f.t == nil {
			if i < 4 {
				return 0, 0, fmt.Errorf("loss: Batch.%s is nil: %w", f.name, ErrMissing)
			}
			continue
		}
		if f.t.Dtype().Type == nil {
			// A zero tensor.Dense has no dtype; printing it would panic.
			return 0, 0, fmt.Errorf("loss: Batch.%s is an uninitialised tensor.Dense (no dtype, no data): %w", f.name, ErrShape)
		}
		if f.t.Dtype() != tensor.Float32 {
			return 0, 0, fmt.Errorf("loss: Batch.%s has dtype %v, want float32: %w", f.name, f.t.Dtype(), ErrShape)
		}
		sh := f.t.Shape()
		if len(sh) != 2 {
			return 0, 0, fmt.Errorf("loss: Batch.%s has shape %v, want [B,T]: %w", f.name, sh, ErrShape)
		}
		if i == 0 {
			rows, cols = sh[0], sh[1]
			if rows == 0 || cols == 0 {
				return 0, 0, fmt.Errorf("loss: Batch.LogProbs has shape %v: %w", sh, ErrEmptyBatch)
			}
		} else if sh[0] != rows || sh[1] != cols {
			return 0, 0, fmt.Errorf("loss: Batch.%s has shape %v, Batch.LogProbs has [%d %d]: %w", f.name, sh, rows, cols, ErrShape)
		}
		if !f.t.IsNativelyAccessible() || f.t.RequiresIterator() {
			return 0, 0, fmt.Errorf("loss: Batch.%s is a view or not in host memory; pass a contiguous tensor: %w", f.name, ErrShape)
		}
		data := f.t.Float32s()
		if len(data) != rows*cols {
			return 0, 0, fmt.Errorf("loss: Batch.%s holds %d values, want %d: %w", f.name, len(data), rows*cols, ErrShape)
		}
		for k, v := range data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return 0, 0, fmt.Errorf("loss: Batch.%s[%d,%d] = %v: %w", f.name, k/cols, k%cols, v, ErrNonFinite)
			}
			if i == 3 && v != 0 && v != 1 {
				return 0, 0, fmt.Errorf("loss: Batch.Mask[%d,%d] = %v: %w", k/cols, k%cols, v, ErrMaskValue)
			}
		}
	}
	return rows, cols, nil
}

// widen copies a float32 tensor into dst (float64), growing it as needed.
func widen(dst []float64, t *tensor.Dense) []float64 {
	src := t.Float32s()
	if cap(dst) < len(src) {
		dst = make([]float64, len(src))
	}
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float64(v)
	}
	return dst
}

// narrow returns a new [rows,cols] float32 tensor holding src, with −0
// written as 0 (a masked token's gradient is −A·0).
func narrow(src []float64, rows, cols int) *tensor.Dense {
	out := make([]float32, len(src))
	for i, v := range src {
		if v != 0 {
			out[i] = float32(v)
		}
	}
	return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(out))
}
