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
