package backend

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoPEFreqsMatchTransformers(t *testing.T) {
	// Golden inv_freq from PyTorch (backendtest/testdata/gen_rope.py).
	raw, err := os.ReadFile(filepath.Join("backendtest", "testdata", "rope_golden.json"))
	require.NoError(t, err)
	var cases []struct {
		Theta   float64   `json:"theta"`
		Dim     int       `json:"dim"`
		InvFreq []float32 `json:"inv_freq"`
	}
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.NotEmpty(t, cases)
	for _, c := range cases {
		got := RoPEFreqs(c.Theta, c.Dim)
		require.Len(t, got, c.Dim/2)
		for i := range got {
			// Equal up to one float32 ulp (torch's float32 pow may round
			// differently from math.Pow).
			require.InEpsilon(t, c.InvFreq[i], got[i], 1.2e-7, "theta %g dim %d i %d", c.Theta, c.Dim, i)
		}
	}
	require.Nil(t, RoPEFreqs(1e4, 1))
}

func TestSpans(t *testing.T) {
	require.Equal(t, []Span{{Q0: 0, QLen: 3, K0: 0, KLen: 3}, {Q0: 3, QLen: 0, K0: 3, KLen: 0}, {Q0: 3, QLen: 2, K0: 3, KLen: 2}},
		PackedSpans([]int{3, 0, 2}))
	require.Equal(t, []Span{{Q0: 0, QLen: 2, K0: 0, KLen: 2}, {Q0: 4, QLen: 4, K0: 4, KLen: 4}},
		PaddedSpans(4, []int{2, 4}))
}

func TestLMHeadScale(t *testing.T) {
	require.Equal(t, float32(1), LMHead{}.Scale())
	require.Equal(t, float32(2), LMHead{InvTemp: 2}.Scale())
}

func ExamplePackedSpans() {
	// Two prompts of 3 and 2 tokens packed into 5 rows: each attends only
	// to its own rows.
	fmt.Println(PackedSpans([]int{3, 2}))
	// Output: [{0 3 0 3} {3 2 3 2}]
}

func ExampleRoPEFreqs() {
	// theta = 10000, head dim 8: 10000^(−2i/8) for i = 0..3.
	fmt.Println(RoPEFreqs(10000, 8))
	// Output: [1 0.1 0.01 0.001]
}

// TestNewRowLayout: the layout's derived facts, worked out by hand, and
// that it keeps copies of the caller's slices.
func TestNewRowLayout(t *testing.T) {
	cases := []struct {
		name         string
		pos          []int32
		spans        []Span
		qRows, kRows int
		disjoint     bool
	}{
		{"none", nil, nil, 0, 0, true},
		{"packed 3+2", []int32{0, 1, 2, 0, 1}, PackedSpans([]int{3, 2}), 5, 5, true},
		// Decode: two queries over caches at 0…9 and 16…20.
		{"decode", []int32{9, 4}, []Span{{Q0: 0, QLen: 1, K0: 0, KLen: 10}, {Q0: 1, QLen: 1, K0: 16, KLen: 5}}, 2, 21, true},
		// Keys 0…3 and 2…4 overlap; a span without queries does not count.
		{"overlapping keys", []int32{0, 1}, []Span{{Q0: 0, QLen: 1, K0: 0, KLen: 4}, {Q0: 1, QLen: 1, K0: 2, KLen: 3}}, 2, 5, false},
		{"overlap without queries", []int32{0}, []Span{{Q0: 0, QLen: 1, K0: 0, KLen: 4}, {Q0: 1, QLen: 0, K0: 2, KLen: 3}}, 1, 5, true},
		// Three ranges sorted as [0,10), [2,3), [12,13): the first two overlap.
		{"nested keys", []int32{0, 1, 2}, []Span{{Q0: 2, QLen: 1, K0: 12, KLen: 1}, {Q0: 0, QLen: 1, K0: 0, KLen: 10}, {Q0: 1, QLen: 1, K0: 2, KLen: 1}}, 3, 13, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := NewRowLayout(c.pos, c.spans)
			require.NoError(t, err)
			require.Equal(t, len(c.pos), l.Len())
			require.Equal(t, c.qRows, l.QRows)
			require.Equal(t, c.kRows, l.KRows)
			require.Equal(t, c.disjoint, l.KeysDisjoint)
			if len(c.pos) > 0 {
				c.pos[0] = 99
				require.NotEqual(t, int32(99), l.Pos[0], "a copy")
			}
		})
	}
}
