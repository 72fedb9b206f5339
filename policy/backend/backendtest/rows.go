package backendtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// foreignRows is a Rows no backend made.
type foreignRows struct{}

func (foreignRows) Len() int { return 2 }

// Rows checks NewRows and FreeRows: the layout's checks (negative
// positions are ErrIndex; spans outside the rows, with KLen < QLen, or
// sharing a query row are ErrShape), that the backend keeps its own copy
// of the positions (changing the caller's slice afterwards changes
// nothing), and that freed, foreign and nil rows are ErrBuffer errors in
// FreeRows, RoPE and attention.
func Rows(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 150)
	bad := []struct {
		name  string
		want  error
		pos   []int32
		spans []backend.Span
	}{
		{"negative position", backend.ErrIndex, []int32{0, -4}, nil},
		{"span past the rows", backend.ErrShape, []int32{0, 1}, []backend.Span{{Q0: 1, QLen: 2, K0: 0, KLen: 2}}},
		{"negative offset", backend.ErrShape, []int32{0, 1}, []backend.Span{{Q0: -1, QLen: 1, K0: 0, KLen: 1}}},
		{"KLen < QLen", backend.ErrShape, []int32{0, 1}, []backend.Span{{Q0: 0, QLen: 2, K0: 0, KLen: 1}}},
		{"overlapping queries", backend.ErrShape, []int32{0, 1}, []backend.Span{{Q0: 0, QLen: 1, K0: 0, KLen: 1}, {Q0: 0, QLen: 1, K0: 1, KLen: 1}}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = b.NewRows(c.pos, c.spans) })
			require.ErrorIs(t, err, c.want)
		})
	}

	t.Run("own copy", func(t *testing.T) {
		const heads, hd = 1, 4
		pos := []int32{3, 9}
		freqs := backend.RoPEFreqs(1e4, hd)
		x := e.randn(2*heads*hd, 1)
		r := e.rows(pos, nil)
		pos[0], pos[1] = 0, 0
		out := e.zeros(len(x))
		require.NoError(t, b.RoPEForward(heads, hd, r, freqs, out, e.up(x)))
		e.close("rope at the positions given", e.down(out), refRoPE(heads, hd, []int32{3, 9}, freqs, x, 1))
	})

	t.Run("freed, foreign and nil rows", func(t *testing.T) {
		r, err := b.NewRows([]int32{0, 1}, backend.PackedSpans([]int{2}))
		require.NoError(t, err)
		require.NoError(t, b.FreeRows(r))
		x4 := e.zeros(4)
		a := backend.Attention{Heads: 1, KVHeads: 1, HeadDim: 2, Scale: 1}
		for name, rr := range map[string]backend.Rows{"freed": r, "foreign": foreignRows{}, "nil": nil} {
			require.ErrorIs(t, b.FreeRows(rr), backend.ErrBuffer, name)
			require.ErrorIs(t, b.RoPEForward(1, 2, rr, []float32{1}, x4, x4), backend.ErrBuffer, name)
			require.ErrorIs(t, b.RoPEBackward(1, 2, rr, []float32{1}, x4, e.zeros(4)), backend.ErrBuffer, name)
			require.ErrorIs(t, b.AttentionForward(a, rr, x4, nil, x4, x4, x4), backend.ErrBuffer, name)
			require.ErrorIs(t, b.AttentionBackward(a, rr, nil, nil, nil, x4, x4, x4, x4, x4, e.zeros(2)), backend.ErrBuffer, name)
		}
	})
}
