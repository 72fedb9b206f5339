package policy

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// The golden values come from testdata/gen_model_golden.py: an
// independent float64 PyTorch implementation of Qwen3ForCausalLM and
// Qwen2ForCausalLM (written from transformers' modeling_qwen3.py and
// modeling_qwen2.py) with gradients from torch autograd, on the same
// checkpoints the Go model loads.

type golden struct {
	seqs    [][]int
	tensors map[string][]float32
}

func loadGolden(t *testing.T, name string) golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "model", name+".golden.json"))
	require.NoError(t, err)
	var j struct {
		Sequences [][]int `json:"sequences"`
	}
	require.NoError(t, json.Unmarshal(data, &j))
	f, err := safetensors.Open(filepath.Join("testdata", "model", name+".golden.safetensors"))
	require.NoError(t, err)
	defer f.Close()
	g := golden{seqs: j.Sequences, tensors: map[string][]float32{}}
	for _, info := range f.Tensors() {
		v, err := f.Float32(info.Name)
		require.NoError(t, err)
		g.tensors[info.Name] = v
	}
	return g
}

func loadTiny(t *testing.T, name string, opts ...ModelOption) *Model {
	t.Helper()
	m, err := Load(filepath.Join("testdata", "model", name), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

var tinyModels = []string{"qwen3-tiny", "qwen2-tiny", "llama-tiny"}

func maxAbsDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// packed flattens per-token results the way the golden file stores them:
// row t of a sequence predicts token t+1, so golden row off+t is
// stats[b][t+1], and each sequence's last row is 0.
func packed(stats [][]float32) []float32 {
	var out []float32
	for _, s := range stats {
		out = append(out, s[1:]...)
		out = append(out, 0)
	}
	return out
}

func TestLogitsMatchPyTorch(t *testing.T) {
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m, g := loadTiny(t, name), loadGolden(t, name)
			logits, err := m.Logits(g.seqs[0])
			require.NoError(t, err)
			require.Equal(t, []int{len(g.seqs[0]), m.Config().VocabSize}, []int(logits.Shape()))
			got := logits.Data().([]float32)
			want := g.tensors["logits"]
			require.Len(t, got, len(want))
			t.Logf("max |logit − torch| = %.3g", maxAbsDiff(got, want))
			assert.Less(t, maxAbsDiff(got, want), 1e-4)
		})
	}
}

func TestForwardMatchesPyTorch(t *testing.T) {
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m, g := loadTiny(t, name), loadGolden(t, name)
			for _, tc := range []struct {
				temp      float64
				logp, ent string
			}{{0, "logp_t1", "ent_t1"}, {1, "logp_t1", "ent_t1"}, {0.7, "logp_t07", "ent_t07"}} {
				stats, back, err := m.Forward(context.Background(), lm.TokenBatch{Tokens: g.seqs, Temperature: tc.temp}, false)
				require.NoError(t, err)
				require.Nil(t, back)
				// The golden last rows have no target; the entropy of
				// those rows is not part of TokenStats, so zero them.
				wantEnt := append([]float32(nil), g.tensors[tc.ent]...)
				off := 0
				for _, s := range g.seqs {
					off += len(s)
					wantEnt[off-1] = 0
				}
				assert.Less(t, maxAbsDiff(packed(stats.LogProbs), g.tensors[tc.logp]), 1e-4, "log-probs at T=%v", tc.temp)
				assert.Less(t, maxAbsDiff(packed(stats.Entropy), wantEnt), 1e-4, "entropy at T=%v", tc.temp)
				for b := range g.seqs {
					assert.Zero(t, stats.LogProbs[b][0])
					assert.Zero(t, stats.Entropy[b][0])
				}
			}
		})
	}
}

// unpack turns packed golden rows back into per-token values [b][t]
// (position t+1 gets row off+t).
func unpack(seqs [][]int, rows []float32) [][]float32 {
	out := make([][]float32, len(seqs))
	off := 0
	for b, s := range seqs {
		out[b] = make([]float32, len(s))
		for i := 0; i+1 < len(s); i++ {
			out[b][i+1] = rows[off+i]
		}
		off += len(s)
	}
	return out
}

func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

func TestBackwardMatchesPyTorch(t *testing.T) {
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m, g := loadTiny(t, name), loadGolden(t, name)
			ctx := context.Background()
			stats, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs, Temperature: 0.7}, true)
			require.NoError(t, err)
			require.NotNil(t, back)
			assert.Less(t, maxAbsDiff(packed(stats.LogProbs), g.tensors["logp_t07"]), 1e-4)
			// L = Σ w·logp + Σ u·H: dL/dlogp = w, dL/dH = u.
			require.NoError(t, back(ctx, unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])))
			params := m.Params()
			require.Len(t, params, len(m.Config().TensorSpecs()))
			worst, worstName := 0.0, ""
			for _, p := range params {
				want, ok := g.tensors["grad."+p.Name]
				require.True(t, ok, p.Name)
				require.Len(t, p.Grad, len(want), p.Name)
				e := relErr(p.Grad, want)
				if e > worst {
					worst, worstName = e, p.Name
				}
				assert.Less(t, e, 1e-3, "gradient of %s", p.Name)
			}
			t.Logf("worst gradient relative error %.3g (%s) over %d tensors", worst, worstName, len(params))
			// A second call is refused, and the gradients accumulate over passes.
			require.ErrorIs(t, back(ctx, nil, nil), ErrInput)
			_, back2, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs, Temperature: 0.7}, true)
			require.NoError(t, err)
			require.NoError(t, back2(ctx, unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])))
			for _, p := range m.Params() {
				want := g.tensors["grad."+p.Name]
				twice := make([]float32, len(want))
				for i, v := range want {
					twice[i] = 2 * v
				}
				assert.Less(t, relErr(p.Grad, twice), 1e-3, "accumulated gradient of %s", p.Name)
			}
		})
	}
}

func TestForwardMaskAndEmptySequences(t *testing.T) {
	ctx := context.Background()
	m, g := loadTiny(t, "qwen3-tiny"), loadGolden(t, "qwen3-tiny")
	full, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs}, false)
	require.NoError(t, err)
	// A mask keeps the unmasked positions' values and zeroes the others;
	// an empty sequence in the batch gives empty results.
	mask := make([][]float32, len(g.seqs)+1)
	for b, s := range g.seqs {
		mask[b] = make([]float32, len(s))
		for i := range s {
			if i%2 == 1 {
				mask[b][i] = 1
			}
		}
	}
	mask[len(g.seqs)] = []float32{}
	seqs := append(append([][]int(nil), g.seqs...), []int{})
	masked, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs, Mask: mask}, true)
	require.NoError(t, err)
	require.Len(t, masked.LogProbs, len(seqs))
	assert.Empty(t, masked.LogProbs[len(g.seqs)])
	for b := range g.seqs {
		for i := range g.seqs[b] {
			wantLP, wantH := full.LogProbs[b][i], full.Entropy[b][i]
			if mask[b][i] == 0 {
				wantLP, wantH = 0, 0
			}
			assert.InDelta(t, wantLP, masked.LogProbs[b][i], 1e-6, "seq %d pos %d", b, i)
			assert.InDelta(t, wantH, masked.Entropy[b][i], 1e-6, "seq %d pos %d", b, i)
		}
	}
	ones := func() [][]float32 {
		out := make([][]float32, len(seqs))
		for b, s := range seqs {
			out[b] = make([]float32, len(s))
			for i := range out[b] {
				out[b][i] = 1
			}
		}
		return out
	}
	require.NoError(t, back(ctx, ones(), nil))

	empty, back, err := m.Forward(ctx, lm.TokenBatch{}, true)
	require.NoError(t, err)
	assert.Empty(t, empty.LogProbs)
	require.NoError(t, back(ctx, nil, nil))
}

func TestForwardRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen3-tiny")
	long := make([]int, m.Config().MaxPositionEmbeddings+1)
	for _, tc := range []struct {
		name  string
		batch lm.TokenBatch
		want  string
	}{
		{"token out of range", lm.TokenBatch{Tokens: [][]int{{1, 2}, {3, 100}}}, "sequence 1, position 1"},
		{"negative temperature", lm.TokenBatch{Tokens: [][]int{{1, 2}}, Temperature: -1}, "temperature"},
		{"NaN temperature", lm.TokenBatch{Tokens: [][]int{{1, 2}}, Temperature: math.NaN()}, "temperature"},
		{"mask rows", lm.TokenBatch{Tokens: [][]int{{1, 2}}, Mask: [][]float32{}}, "mask has 0 rows"},
		{"mask length", lm.TokenBatch{Tokens: [][]int{{1, 2}}, Mask: [][]float32{{1}}}, "mask row 0"},
		{"too long", lm.TokenBatch{Tokens: [][]int{long}}, "max_position_embeddings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := m.Forward(ctx, tc.batch, true)
			require.ErrorIs(t, err, ErrInput)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := m.Logits(nil)
	require.ErrorIs(t, err, ErrInput)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = m.Forward(cctx, lm.TokenBatch{Tokens: [][]int{{1, 2}}}, false)
	require.ErrorIs(t, err, context.Canceled)

	seqs := [][]int{{1, 2, 3}, {4, 5}}
	for _, tc := range []struct {
		name   string
		dlp    [][]float32
		dent   [][]float32
		expect string
	}{
		{"sequence count", [][]float32{{0, 1, 1}}, nil, "gradLogProbs has 1 sequences"},
		{"length", [][]float32{{0, 1, 1}, {0}}, nil, "gradLogProbs[1] has 1 values"},
		{"NaN", [][]float32{{0, float32(math.NaN()), 1}, {0, 1}}, nil, "gradLogProbs[0][1]"},
		{"entropy length", [][]float32{{0, 1, 1}, {0, 1}}, [][]float32{{0, 1, 1}, {0, 1, 1}}, "gradEntropy[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs}, true)
			require.NoError(t, err)
			err = back(ctx, tc.dlp, tc.dent)
			require.ErrorIs(t, err, ErrInput)
			assert.Contains(t, err.Error(), tc.expect)
		})
	}
}
