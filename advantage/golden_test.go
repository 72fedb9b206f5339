package advantage

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goldenFile is produced by testdata/gen_golden.py, which re-implements
// verl's estimators (verl/trainer/ppo/core_algos.py) in PyTorch, float64, on
// padded [B, T] tensors, as verl runs them, and for the turn-level
// estimators by testdata/gen_turn_golden.py, which computes them on
// verl-agent's per-step layout (one row per turn, gigpo/core_gigpo.py).
// Regenerate with `/usr/bin/python3 testdata/gen_golden.py` and
// `/usr/bin/python3 testdata/gen_turn_golden.py` from this directory.
type goldenFile struct {
	Batches map[string]goldenInput `json:"batches"`
	Cases   []struct {
		Name      string `json:"name"`
		Estimator string `json:"estimator"`
		Batch     string `json:"batch"`
		Config    struct {
			NormByStd bool    `json:"norm_by_std"`
			Gamma     float64 `json:"gamma"`
			Lambda    float64 `json:"lambda"`
			Epsilon   float64 `json:"epsilon"`
			// StepWeight is gigpo's ω; absent (nil) in golden.json.
			StepWeight *float64 `json:"step_weight"`
		} `json:"config"`
		Advantages [][]float64 `json:"advantages"`
		Returns    [][]float64 `json:"returns"`
	} `json:"cases"`
}

type goldenInput struct {
	Scores         []float64   `json:"scores"`
	Groups         []string    `json:"groups"`
	Mask           [][]float32 `json:"mask"`
	TokenRewards   [][]float32 `json:"token_rewards"`
	Turns          [][]Turn    `json:"turns"`
	Values         [][]float32 `json:"values"`
	BaselineScores []float64   `json:"baseline_scores"`
}

func TestGoldenAgainstVerlReference(t *testing.T) {
	covered := map[string]bool{}
	for _, file := range []string{"golden.json", "turn_golden.json"} {
		raw, err := os.ReadFile(filepath.Join("testdata", file))
		require.NoError(t, err)
		var g goldenFile
		require.NoError(t, json.Unmarshal(raw, &g))
		require.NotEmpty(t, g.Cases, file)
		checkGoldenCases(t, g, covered)
	}
	for _, n := range NewRegistry().Names() {
		assert.True(t, covered[string(n)], "no golden case for %s", n)
	}
}

// checkGoldenCases runs the cases of g, marking their estimators covered.
func checkGoldenCases(t *testing.T, g goldenFile, covered map[string]bool) {
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			gi, ok := g.Batches[c.Batch]
			require.True(t, ok, "batch %q", c.Batch)
			in := Input(gi)
			cfg := Config{
				Estimator:  Estimator(c.Estimator),
				NormByStd:  new(c.Config.NormByStd),
				Gamma:      new(c.Config.Gamma),
				Lambda:     new(c.Config.Lambda),
				Epsilon:    c.Config.Epsilon,
				StepWeight: c.Config.StepWeight,
			}
			out, err := Compute(cfg, in)
			require.NoError(t, err)
			assertRowsClose(t, "Advantages", c.Advantages, out.Advantages)
			assertRowsClose(t, "Returns", c.Returns, out.Returns)
			covered[c.Estimator] = true
		})
	}
}

// assertRowsClose compares within 1e-5, relative to the magnitude where it
// exceeds 1 (the output is float32, with 24 bits of mantissa).
func assertRowsClose(t *testing.T, field string, want [][]float64, got [][]float32) {
	t.Helper()
	require.Len(t, got, len(want), field)
	for i := range want {
		require.Len(t, got[i], len(want[i]), "%s[%d]", field, i)
		for j := range want[i] {
			tol := 1e-5 * math.Max(1, math.Abs(want[i][j]))
			assert.InDelta(t, want[i][j], float64(got[i][j]), tol, "%s[%d][%d]", field, i, j)
		}
	}
}
