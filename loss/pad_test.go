package loss

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestPadRows: values written out by hand. Rows aligned with whole
// sequences, starts the prompt lengths: [0 0 1 2 3] from 2 gives [1 2 3],
// padded to 4 columns; [0 4] from 1 gives [4 0 0 0]; a row longer than T
// is cut; a start at or past a row's end gives zeros.
func TestPadRows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rows   [][]float32
		starts []int
		T      int
		want   []float32
	}{
		{"prompts cut, padded", [][]float32{{0, 0, 1, 2, 3}, {0, 4}}, []int{2, 1}, 4, []float32{1, 2, 3, 0, 4, 0, 0, 0}},
		{"nil starts", [][]float32{{1, 2}, {3}}, nil, 2, []float32{1, 2, 3, 0}},
		{"longer than T", [][]float32{{1, 2, 3, 4}, {5}}, []int{1, 3}, 2, []float32{2, 3, 0, 0}},
		{"start at the end", [][]float32{{1, 2}}, []int{2}, 3, []float32{0, 0, 0}},
		{"empty row", [][]float32{{}, {7}}, []int{0, 0}, 1, []float32{0, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := PadRows(tc.rows, tc.starts, tc.T)
			require.NoError(t, err)
			assert.Equal(t, []int{len(tc.rows), tc.T}, []int(d.Shape()))
			assert.Equal(t, tc.want, d.Data().([]float32))
		})
	}
}

// TestUnpadRows: the [2, 5] gradient goes back to the response positions
// of each whole sequence (prompts of 2 and 3 tokens, sequences of 7 and
// 4), times 0.5, zero on the prompt; columns past a sequence's end are
// dropped.
func TestUnpadRows(t *testing.T) {
	g := tensor.New(tensor.WithShape(2, 5), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}))
	out, err := UnpadRows(g, []int{2, 3}, []int{7, 4}, 0.5)
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{0, 0, 0.5, 1, 1.5, 2, 2.5}, {0, 0, 0, 3}}, out)

	// A sequence longer than its prompt and T: the tail past the T
	// columns is zero. A start past the length: all zeros.
	g = tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))
	out, err = UnpadRows(g, []int{1, 5}, []int{5, 3}, 1)
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{0, 1, 2, 0, 0}, {0, 0, 0}}, out)

	// An empty tensor: no rows, or rows of no columns (all zeros).
	out, err = UnpadRows(tensor.New(tensor.WithShape(0, 3), tensor.WithBacking([]float32{})), nil, nil, 1)
	require.NoError(t, err)
	assert.Empty(t, out)
	out, err = UnpadRows(tensor.New(tensor.WithShape(2, 0), tensor.WithBacking([]float32{})), []int{0, 1}, []int{2, 2}, 1)
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{0, 0}, {0, 0}}, out)
}

// TestPadUnpadRoundTrip: padding the response spans and unpadding them
// with scale 1 gives the sequences back with their prompts zeroed.
func TestPadUnpadRoundTrip(t *testing.T) {
	seqs := [][]float32{{9, 9, 1, 2, 3}, {9, 4}, {9, 9, 9, 5, 6}}
	starts, lens := []int{2, 1, 3}, []int{5, 2, 5}
	d, err := PadRows(seqs, starts, 3)
	require.NoError(t, err)
	out, err := UnpadRows(d, starts, lens, 1)
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{0, 0, 1, 2, 3}, {0, 4}, {0, 0, 0, 5, 6}}, out)
}

func TestPadRowsErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rows   [][]float32
		starts []int
		T      int
		want   string
	}{
		{"no rows", nil, nil, 3, "no rows"},
		{"no columns", [][]float32{{1}}, nil, 0, "0 columns"},
		{"starts per row", [][]float32{{1}, {2}}, []int{0}, 1, "1 starts for 2 rows"},
		{"negative start", [][]float32{{1}, {2}}, []int{0, -1}, 1, "row 1 starts at -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PadRows(tc.rows, tc.starts, tc.T)
			require.ErrorIs(t, err, ErrShape)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestUnpadRowsErrors(t *testing.T) {
	two := tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float32{1, 2}))
	for _, tc := range []struct {
		name         string
		g            *tensor.Dense
		starts, lens []int
		want         string
	}{
		{"nil tensor", nil, nil, nil, "[B,T] float32"},
		{"zero tensor", &tensor.Dense{}, nil, nil, "[B,T] float32"},
		{"float64", tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float64{1})), []int{0}, []int{1}, "[B,T] float32"},
		{"one dimension", tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2})), []int{0, 0}, []int{1, 1}, "[B,T] float32"},
		{"starts per row", two, []int{0}, []int{1, 1}, "1 starts and 2 lengths for 2 rows"},
		{"lengths per row", two, []int{0, 0}, []int{1, 1, 1}, "2 starts and 3 lengths for 2 rows"},
		{"negative start", two, []int{0, -2}, []int{1, 1}, "row 1 starts at -2"},
		{"negative length", two, []int{0, 0}, []int{-1, 1}, "row 0 starts at 0 and is -1 long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UnpadRows(tc.g, tc.starts, tc.lens, 1)
			require.ErrorIs(t, err, ErrShape)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
