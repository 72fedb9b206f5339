package backendtest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// ropeGolden holds inverse frequencies and cos/sin tables computed by
// PyTorch the way transformers' Qwen3RotaryEmbedding does (float32 angles,
// so positions in the thousands round as they do in HF); see
// testdata/gen_rope.py for how it was produced.
//
//go:embed testdata/rope_golden.json
var ropeGolden []byte

type ropeCase struct {
	Theta   float64   `json:"theta"`
	Dim     int       `json:"dim"`
	InvFreq []float64 `json:"inv_freq"`
	Pos     []int32   `json:"pos"`
	Cos     []float64 `json:"cos"`
	Sin     []float64 `json:"sin"`
}

// RoPEGolden checks RoPE against PyTorch/transformers values at positions
// up to 40,000: rotating the unit vector e_i gives out[i] = cos θ_i and
// out[i + dim/2] = sin θ_i.
func RoPEGolden(t *testing.T, b backend.Backend, tol Tolerance) {
	var cases []ropeCase
	require.NoError(t, json.Unmarshal(ropeGolden, &cases))
	for _, c := range cases {
		t.Run(fmt.Sprintf("theta=%g/dim=%d", c.Theta, c.Dim), func(t *testing.T) {
			e := newEnv(t, b, tol, 140)
			freqs := backend.RoPEFreqs(c.Theta, c.Dim)
			half := c.Dim / 2
			// One "head" per frequency: head i holds e_i.
			x := make([]float64, len(c.Pos)*half*c.Dim)
			for tk := range c.Pos {
				for i := range half {
					x[(tk*half+i)*c.Dim+i] = 1
				}
			}
			out := e.zeros(len(x))
			require.NoError(t, b.RoPEForward(half, c.Dim, e.rows(c.Pos, nil), freqs, out, e.up(x)))
			got := e.down(out)
			for tk := range c.Pos {
				for i := range half {
					base := (tk*half + i) * c.Dim
					require.InDelta(t, c.Cos[tk*half+i], got[base+i], 2e-6, "cos pos %d freq %d", c.Pos[tk], i)
					require.InDelta(t, c.Sin[tk*half+i], got[base+i+half], 2e-6, "sin pos %d freq %d", c.Pos[tk], i)
				}
			}
		})
	}
}
