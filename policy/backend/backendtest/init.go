package backendtest

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// Initializer checks a backend's backend.Initializer, when it has one (it
// is skipped otherwise): RandNormal gives float32(std·NormalAt(seed, i))
// for every i — within one float32 rounding of the float64 value, as a
// backend's logarithm and cosine may differ from Go's in the last bit of
// the float64 — the same values on a second call, other values under
// another seed, and an error for a non-finite std or a nil buffer.
func Initializer(t *testing.T, b backend.Backend, _ Tolerance) {
	ini, ok := b.(backend.Initializer)
	if !ok {
		t.Skipf("%s has no backend.Initializer", b.Name())
	}
	e := newEnv(t, b, Tolerance{}, 23)
	// Lengths across the CPU backend's parallel split and a GPU block.
	for _, n := range []int{1, 1000, 70001} {
		for _, c := range []struct {
			seed uint64
			std  float32
		}{{1, 0.02}, {1 << 40, 1}} {
			buf := e.zeros(n)
			require.NoError(t, ini.RandNormal(buf, c.seed, c.std))
			got := downF32(e, buf)
			for i, g := range got {
				want := float64(c.std) * backend.NormalAt(c.seed, uint64(i))
				// One float32 rounding of a value known to ~1e-15.
				require.InDelta(t, want, float64(g), math.Abs(want)*0x1p-23+1e-30, "n %d seed %d element %d", n, c.seed, i)
			}
			require.NoError(t, ini.RandNormal(buf, c.seed, c.std))
			require.Equal(t, got, downF32(e, buf), "the same seed gives the same values")
			require.NoError(t, ini.RandNormal(buf, c.seed+1, c.std))
			other := downF32(e, buf)
			same := 0
			for i := range got {
				if got[i] == other[i] {
					same++
				}
			}
			require.Less(t, same, max(2, n/100), "another seed gives other values")
		}
	}
	buf := e.zeros(3)
	require.ErrorIs(t, ini.RandNormal(buf, 0, float32(math.NaN())), backend.ErrArg)
	require.ErrorIs(t, ini.RandNormal(buf, 0, float32(math.Inf(1))), backend.ErrArg)
	require.ErrorIs(t, ini.RandNormal(nil, 0, 1), backend.ErrBuffer)
}
