package loss

import (
	"fmt"

	"gorgonia.org/tensor"
)

// PadRows lays per-sequence rows out as one [len(rows), T] float32
// tensor, the layout of a Batch's fields: row i of the tensor holds
// rows[i][starts[i]:], left-aligned, cut to T columns and padded with
// zeros (a start at or past the row's end gives a row of zeros). With
// rows aligned with whole sequences (prompt and response) and starts the
// prompt lengths, each row of the tensor is a sequence's response span,
// left-aligned as verl's responses are; rows that are response spans
// already take starts nil (all zeros). Padding is 0 in every field, Mask
// included, so that it contributes nothing.
//
// It returns an error wrapping ErrShape when there are no rows, when
// T < 1, when starts is neither nil nor one per row, or when a start is
// negative.
func PadRows(rows [][]float32, starts []int, T int) (*tensor.Dense, error) {
	switch {
	case len(rows) == 0:
		return nil, fmt.Errorf("loss: PadRows: no rows: %w", ErrShape)
	case T < 1:
		return nil, fmt.Errorf("loss: PadRows: %d columns, want ≥ 1: %w", T, ErrShape)
	}
	if starts != nil && len(starts) != len(rows) {
		return nil, fmt.Errorf("loss: PadRows: %d starts for %d rows: %w", len(starts), len(rows), ErrShape)
	}
	data := make([]float32, len(rows)*T)
	for i, r := range rows {
		start := 0
		if starts != nil {
			start = starts[i]
		}
		if start < 0 {
			return nil, fmt.Errorf("loss: PadRows: row %d starts at %d: %w", i, start, ErrShape)
		}
		copy(data[i*T:(i+1)*T], r[min(start, len(r)):])
	}
	return tensor.New(tensor.WithShape(len(rows), T), tensor.WithBacking(data)), nil
}

// UnpadRows is PadRows' inverse, for gradients with respect to a
// Batch's fields (Result.GradLogProbs, Result.GradEntropy): it returns
// one row per row of the [B,T] tensor g, row i of length lens[i], holding
// scale × g[i][j] at position starts[i]+j (for the columns j that fit)
// and zero elsewhere — on the prompt, and where a shorter sequence was
// padded. scale weights the rows, for example by a micro-batch's share
// of the mini-batch whose gradients are accumulated.
//
// It returns an error wrapping ErrShape when g is not a [B,T] float32
// tensor, when starts and lens are not one per row of g, or when a start
// or a length is negative.
func UnpadRows(g *tensor.Dense, starts, lens []int, scale float32) ([][]float32, error) {
	if g == nil || g.Dtype() != tensor.Float32 || len(g.Shape()) != 2 {
		return nil, fmt.Errorf("loss: UnpadRows: want a [B,T] float32 tensor: %w", ErrShape)
	}
	B, T := g.Shape()[0], g.Shape()[1]
	if len(starts) != B || len(lens) != B {
		return nil, fmt.Errorf("loss: UnpadRows: %d starts and %d lengths for %d rows: %w", len(starts), len(lens), B, ErrShape)
	}
	var data []float32
	if B*T > 0 { // an empty tensor has no data to read
		data = g.Data().([]float32)
	}
	out := make([][]float32, B)
	for i, n := range lens {
		if n < 0 || starts[i] < 0 {
			return nil, fmt.Errorf("loss: UnpadRows: row %d starts at %d and is %d long: %w", i, starts[i], n, ErrShape)
		}
		row := make([]float32, n)
		for j := starts[i]; j < n && j-starts[i] < T; j++ {
			row[j] = data[i*T+j-starts[i]] * scale
		}
		out[i] = row
	}
	return out, nil
}
