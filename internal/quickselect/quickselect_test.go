package quickselect

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// kthBySorting is the reference: the k-th entry of v sorted in
// decreasing order.
func kthBySorting[T float32 | float64](v []T, k int) T {
	sorted := slices.Clone(v)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	return sorted[k-1]
}

// TestKthLargest checks KthLargest against sorting on 500 random slices
// of each element type the samplers use, with many ties.
func TestKthLargest(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for trial := 0; trial < 500; trial++ {
		n := 1 + r.IntN(200)
		v64 := make([]float64, n)
		v32 := make([]float32, n)
		for i := range v64 {
			v64[i] = float64(r.IntN(20)) // many ties
			v32[i] = float32(v64[i]) - 0.5
		}
		k := 1 + r.IntN(n)
		want64, want32 := kthBySorting(v64, k), kthBySorting(v32, k)
		require.Equal(t, want64, KthLargest(v64, k), "float64: n %d k %d", n, k)
		require.Equal(t, want32, KthLargest(v32, k), "float32: n %d k %d", n, k)
	}
}
