package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// The LoRA golden values come from testdata/gen_lora_golden.py: the
// float64 PyTorch reference of gen_model_golden.py with PEFT's LoRA
// Linear on the adapted projections and gradients of A and B from torch
// autograd; the adapter folders are written there in PEFT's layout.

var loraCases = []struct{ name, base string }{
	{"qwen3-tiny-lora", "qwen3-tiny"}, // r 4, alpha 8, all seven (k under QK-norm), tied embeddings
	{"llama-tiny-lora", "llama-tiny"}, // r 3, alpha 5, rsLoRA, all seven, biases
}

func loadWithAdapter(t *testing.T, base, adapter string) *Model {
	t.Helper()
	m := loadTiny(t, base)
	require.NoError(t, m.LoadAdapter(filepath.Join("testdata", "model", adapter)))
	return m
}

func TestLoRAMatchesPyTorch(t *testing.T) {
	for _, tc := range loraCases {
		t.Run(tc.name, func(t *testing.T) {
			m := loadWithAdapter(t, tc.base, tc.name)
			seqs := loadGolden(t, tc.base).seqs
			g := loadGolden(t, tc.name)
			ctx := context.Background()
			stats, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs, Temperature: 0.7}, true)
			require.NoError(t, err)
			assert.Less(t, maxAbsDiff(packed(stats.LogProbs), g.tensors["logp_t07"]), 1e-4)
			wantEnt := slices.Clone(g.tensors["ent_t07"])
			off := 0
			for _, s := range seqs {
				off += len(s)
				wantEnt[off-1] = 0 // no target on the last row
			}
			assert.Less(t, maxAbsDiff(packed(stats.Entropy), wantEnt), 1e-4)
			require.NoError(t, back(ctx, unpack(seqs, g.tensors["w"]), unpack(seqs, g.tensors["u"])))
			params := m.Params()
			wantN := 0
			for k := range g.tensors {
				if len(k) > 5 && k[:5] == "grad." {
					wantN++
				}
			}
			require.Len(t, params, wantN, "Params lists exactly the adapters")
			worst := 0.0
			for _, p := range params {
				want, ok := g.tensors["grad."+p.Name]
				require.True(t, ok, "PEFT name %s", p.Name)
				e := relErr(p.Grad, want)
				worst = math.Max(worst, e)
				assert.Less(t, e, 1e-3, "gradient of %s", p.Name)
			}
			t.Logf("worst adapter gradient relative error %.3g over %d tensors", worst, len(params))
		})
	}
}

// lossAndGrads is L = Σ w·logp + Σ u·H over seqs at temperature 0.7 and,
// when grads is set, the adapters' gradients of it.
func lossAndGrads(t *testing.T, m *Model, seqs [][]int, w, u [][]float32, grads bool) (float64, []lm.Param) {
	t.Helper()
	ctx := context.Background()
	stats, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs, Temperature: 0.7}, grads)
	require.NoError(t, err)
	var loss float64
	for b := range seqs {
		for i := range seqs[b] {
			loss += float64(w[b][i])*float64(stats.LogProbs[b][i]) + float64(u[b][i])*float64(stats.Entropy[b][i])
		}
	}
	if !grads {
		return loss, nil
	}
	ZeroGrad(m.Params())
	require.NoError(t, back(ctx, w, u))
	return loss, m.Params()
}

// TestLoRAGradientsFiniteDifferences checks dL/dA and dL/dB against
// central differences (L(θ+h) − L(θ−h))/2h of the model's own forward, on
// the entries of largest gradient of every tensor (where the float32
// forward's rounding, ~1e-6·|L|/h, is small against the derivative).
func TestLoRAGradientsFiniteDifferences(t *testing.T) {
	for _, tc := range loraCases {
		t.Run(tc.name, func(t *testing.T) {
			m := loadWithAdapter(t, tc.base, tc.name)
			seqs := loadGolden(t, tc.base).seqs
			g := loadGolden(t, tc.name)
			w, u := unpack(seqs, g.tensors["w"]), unpack(seqs, g.tensors["u"])
			_, params := lossAndGrads(t, m, seqs, w, u, true)
			grads := make([][]float32, len(params))
			for i, p := range params {
				grads[i] = slices.Clone(p.Grad)
			}
			const h = 1e-2
			checked := 0
			for i, p := range params {
				// The entry of largest |gradient| in each tensor.
				k := 0
				for j, v := range grads[i] {
					if math.Abs(float64(v)) > math.Abs(float64(grads[i][k])) {
						k = j
					}
				}
				orig := p.Data[k]
				p.Data[k] = orig + h
				lp, _ := lossAndGrads(t, m, seqs, w, u, false)
				p.Data[k] = orig - h
				lm, _ := lossAndGrads(t, m, seqs, w, u, false)
				p.Data[k] = orig
				fd := (lp - lm) / (2 * h)
				an := float64(grads[i][k])
				assert.InDelta(t, fd, an, 2e-2*math.Abs(an)+1e-3, "%s[%d]", p.Name, k)
				checked++
			}
			t.Logf("%d entries checked", checked)
		})
	}
}

func TestLoRAZeroBLeavesModelUnchanged(t *testing.T) {
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, name)
			seqs := loadGolden(t, name).seqs
			ctx := context.Background()
			before, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs}, false)
			require.NoError(t, err)
			require.NoError(t, m.AddLoRA(LoRAConfig{Rank: 4, Alpha: 16, TargetModules: []string{LoRAAllLinear}}, 7))
			after, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs}, false)
			require.NoError(t, err)
			// B = 0: every adapted projection adds scale·u·0 = +0 exactly.
			assert.Equal(t, before.LogProbs, after.LogProbs)
			assert.Equal(t, before.Entropy, after.Entropy)
			params := m.Params()
			require.Len(t, params, 2*7*m.Config().NumHiddenLayers)
			for _, p := range params {
				if filepath.Ext(p.Name) == ".weight" && p.Name[len(p.Name)-len("lora_B.weight"):] == "lora_B.weight" {
					assert.Equal(t, make([]float32, len(p.Data)), p.Data, p.Name)
					continue
				}
				// PEFT's init: kaiming_uniform(a=√5) = U(±1/√in).
				in := len(p.Data) / 4
				bound := float32(1 / math.Sqrt(float64(in)))
				var nonzero int
				for _, v := range p.Data {
					require.LessOrEqual(t, v, bound, p.Name)
					require.GreaterOrEqual(t, v, -bound, p.Name)
					if v != 0 {
						nonzero++
					}
				}
				assert.Equal(t, len(p.Data), nonzero, p.Name)
			}
		})
	}
}

func TestLoRAMergeEqualsAdapter(t *testing.T) {
	for _, tc := range loraCases {
		t.Run(tc.name, func(t *testing.T) {
			m := loadWithAdapter(t, tc.base, tc.name)
			seqs := loadGolden(t, tc.base).seqs
			base := make([][]float32, len(m.w.base))
			for i, p := range m.w.base {
				base[i] = slices.Clone(p.data)
			}
			logits := func(m *Model) []float32 {
				z, err := m.Logits(seqs[0])
				require.NoError(t, err)
				return z.Data().([]float32)
			}
			withAdapter := logits(m)

			// Save writes the merged weights: a plain checkpoint computes the same.
			dir := t.TempDir()
			require.NoError(t, m.Save(dir, lm.SaveOptions{}))
			full, err := Load(dir)
			require.NoError(t, err)
			defer full.Close()
			_, has := full.LoRA()
			assert.False(t, has)
			assert.Less(t, maxAbsDiff(logits(full), withAdapter), 1e-4, "saved merged checkpoint")

			require.NoError(t, m.MergeLoRA())
			assert.Less(t, maxAbsDiff(logits(m), withAdapter), 1e-4, "merged")
			assert.ErrorIs(t, m.MergeLoRA(), ErrLoRA)
			_, _, err = m.Forward(context.Background(), lm.TokenBatch{Tokens: seqs}, true)
			assert.ErrorIs(t, err, ErrLoRA, "training a merged adapter")

			require.NoError(t, m.UnmergeLoRA())
			assert.Less(t, maxAbsDiff(logits(m), withAdapter), 1e-4, "unmerged")
			for i, p := range m.w.base {
				// W + ΔW − ΔW in float32: within a few ulps of |W| + |ΔW|.
				assert.Less(t, maxAbsDiff(p.data, base[i]), 1e-6, p.spec.Name)
			}
			assert.ErrorIs(t, m.UnmergeLoRA(), ErrLoRA)
		})
	}
}

func TestLoRAGenerationUsesAdapter(t *testing.T) {
	tc := loraCases[1]
	m := loadWithAdapter(t, tc.base, tc.name)
	prompt := loadGolden(t, tc.base).seqs[0]
	ctx := context.Background()
	req := []lm.GenerateRequest{{Prompt: prompt, Params: lm.SampleParams{MaxNewTokens: 6, StopTokenIDs: nil}}}
	got, err := m.Generate(ctx, req)
	require.NoError(t, err)
	// Greedy decoding, token by token from the full forward's logits.
	seq := slices.Clone(prompt)
	v := m.Config().VocabSize
	for range got[0].Tokens {
		z, err := m.Logits(seq)
		require.NoError(t, err)
		last := z.Data().([]float32)[(len(seq)-1)*v:]
		seq = append(seq, argmax(last))
	}
	assert.Equal(t, seq[len(prompt):], got[0].Tokens)
	// and it differs from the base model's greedy continuation.
	b := loadTiny(t, tc.base)
	plain, err := b.Generate(ctx, req)
	require.NoError(t, err)
	assert.NotEqual(t, plain[0].Tokens, got[0].Tokens)
}

func argmax(x []float32) int {
	k := 0
	for i, v := range x {
		if v > x[k] {
			k = i
		}
	}
	return k
}

func TestLoRATrainsOnlyAdapters(t *testing.T) {
	tc := loraCases[0]
	m := loadWithAdapter(t, tc.base, tc.name)
	seqs := loadGolden(t, tc.base).seqs
	g := loadGolden(t, tc.name)
	base := make([][]float32, len(m.w.base))
	for i, p := range m.w.base {
		base[i] = slices.Clone(p.data)
		assert.True(t, p.frozen)
		assert.Nil(t, p.grad, "no gradient buffer for a frozen weight")
	}
	opt, err := NewAdamW(m.Params(), AdamWConfig{LR: 1e-2})
	require.NoError(t, err)
	before := slices.Clone(m.Params()[0].Data)
	_, _ = lossAndGrads(t, m, seqs, unpack(seqs, g.tensors["w"]), unpack(seqs, g.tensors["u"]), true)
	_, err = opt.Step()
	require.NoError(t, err)
	assert.NotEqual(t, before, m.Params()[0].Data, "the adapter moved")
	for i, p := range m.w.base {
		assert.Equal(t, base[i], p.data, "%s is frozen", p.spec.Name)
		assert.Nil(t, p.dw, "%s has no device gradient", p.spec.Name)
	}
	// The step reaches the next forward (adapters are uploaded every call).
	stats, _, err := m.Forward(context.Background(), lm.TokenBatch{Tokens: seqs, Temperature: 0.7}, false)
	require.NoError(t, err)
	assert.Greater(t, maxAbsDiff(packed(stats.LogProbs), g.tensors["logp_t07"]), 1e-4)
}

func TestLoRAAdapterRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  LoRAConfig
		opts lm.AdapterSaveOptions
	}{
		{"f32", LoRAConfig{Rank: 4, Alpha: 16, TargetModules: []string{"v_proj", "q_proj"}, BaseModel: "Qwen/Qwen3-4B"}, lm.AdapterSaveOptions{}},
		{"rslora", LoRAConfig{Rank: 8, Alpha: 16, UseRSLoRA: true, TargetModules: []string{LoRAAllLinear}}, lm.AdapterSaveOptions{}},
		{"rslora folded", LoRAConfig{Rank: 8, Alpha: 16, UseRSLoRA: true, TargetModules: []string{"gate_proj", "up_proj", "down_proj"}}, lm.AdapterSaveOptions{FoldScale: true}},
		{"bf16", LoRAConfig{Rank: 2, TargetModules: []string{"k_proj", "o_proj"}}, lm.AdapterSaveOptions{DType: safetensors.BF16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := loadTiny(t, "qwen3-tiny")
			require.NoError(t, m.AddLoRA(tc.cfg, 3))
			// Give B values, as training would.
			for i, p := range m.Params() {
				for j := range p.Data {
					p.Data[j] = float32(math.Sin(float64(7*i+j))) * 0.3
				}
			}
			dir := t.TempDir()
			require.NoError(t, m.SaveAdapter(dir, tc.opts))

			// The files, as PEFT, vLLM and SGLang read them.
			var conf map[string]any
			data, err := os.ReadFile(filepath.Join(dir, AdapterConfigFileName))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &conf))
			want, _ := tc.cfg.WithDefaults()
			assert.Equal(t, "LORA", conf["peft_type"])
			assert.Equal(t, "none", conf["bias"])
			assert.Equal(t, "CAUSAL_LM", conf["task_type"])
			assert.Equal(t, float64(want.Rank), conf["r"])
			assert.Equal(t, tc.cfg.BaseModel, conf["base_model_name_or_path"])
			assert.Nil(t, conf["modules_to_save"])
			assert.Equal(t, false, conf["use_dora"])
			mods := []string{}
			for _, x := range conf["target_modules"].([]any) {
				mods = append(mods, x.(string))
			}
			assert.ElementsMatch(t, want.TargetModules, mods)
			scale := tc.cfg.Scale()
			if tc.opts.FoldScale {
				// SGLang's alpha/r must give the rsLoRA scale 16/√8.
				assert.Equal(t, false, conf["use_rslora"])
				assert.InDelta(t, 16/math.Sqrt(8), conf["lora_alpha"].(float64)/8, 1e-12)
			} else {
				assert.Equal(t, tc.cfg.UseRSLoRA, conf["use_rslora"])
				assert.Equal(t, want.Alpha, conf["lora_alpha"])
			}
			f, err := safetensors.Open(filepath.Join(dir, AdapterWeightsFileName))
			require.NoError(t, err)
			cfg := m.Config()
			for _, info := range f.Tensors() {
				var layer int
				var kind, mod, ab string
				_, err := fmtSscanfLoRA(info.Name, &layer, &kind, &mod, &ab)
				require.NoError(t, err, info.Name)
				out, in := projShape(cfg, mod)
				if ab == "A" {
					assert.Equal(t, []int{want.Rank, in}, info.Shape, info.Name)
				} else {
					assert.Equal(t, []int{out, want.Rank}, info.Shape, info.Name)
				}
				if tc.opts.DType == "" {
					assert.Equal(t, safetensors.F32, info.DType)
				} else {
					assert.Equal(t, tc.opts.DType, info.DType)
				}
			}
			require.NoError(t, f.Close())

			// Load onto a fresh base: same adapter, same scale, same outputs.
			m2 := loadTiny(t, "qwen3-tiny")
			require.NoError(t, m2.LoadAdapter(dir))
			got, ok := m2.LoRA()
			require.True(t, ok)
			assert.InDelta(t, scale, got.Scale(), 1e-12)
			p1, p2 := m.Params(), m2.Params()
			require.Len(t, p2, len(p1))
			tol := 0.0
			if tc.opts.DType == safetensors.BF16 {
				tol = 0.3 * math.Pow(2, -8) // |x| ≤ 0.3, bf16 keeps 8 significant bits
			}
			for i := range p1 {
				assert.Equal(t, p1[i].Name, p2[i].Name)
				assert.LessOrEqual(t, maxAbsDiff(p1[i].Data, p2[i].Data), tol, p1[i].Name)
			}
			seqs := loadGolden(t, "qwen3-tiny").seqs
			s1, _, err := m.Forward(context.Background(), lm.TokenBatch{Tokens: seqs}, false)
			require.NoError(t, err)
			s2, _, err := m2.Forward(context.Background(), lm.TokenBatch{Tokens: seqs}, false)
			require.NoError(t, err)
			if tol == 0 {
				assert.Less(t, maxAbsDiff(packed(s1.LogProbs), packed(s2.LogProbs)), 1e-6)
			}
		})
	}
}

// fmtSscanfLoRA splits a PEFT tensor name
// base_model.model.model.layers.N.<self_attn|mlp>.<mod>.lora_<A|B>.weight.
func fmtSscanfLoRA(name string, layer *int, kind, mod, ab *string) (int, error) {
	var rest string
	n, err := fmt.Sscanf(name, "base_model.model.model.layers.%d.%s", layer, &rest)
	if err != nil {
		return n, err
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 || parts[3] != "weight" || (parts[2] != "lora_A" && parts[2] != "lora_B") {
		return n, assert.AnError
	}
	*kind, *mod, *ab = parts[0], parts[1], parts[2][5:]
	return 4, nil
}

// projShape is the [out, in] of a projection, from the config.
func projShape(c Config, mod string) (out, in int) {
	q, kv := c.NumAttentionHeads*c.HeadDim, c.NumKeyValueHeads*c.HeadDim
	switch mod {
	case "q_proj":
		return q, c.HiddenSize
	case "k_proj", "v_proj":
		return kv, c.HiddenSize
	case "o_proj":
		return c.HiddenSize, q
	case "gate_proj", "up_proj":
		return c.IntermediateSize, c.HiddenSize
	default:
		return c.HiddenSize, c.IntermediateSize
	}
}

func TestParseAdapterConfigErrors(t *testing.T) {
	base := func(edit func(map[string]any)) []byte {
		c := map[string]any{"r": 8, "lora_alpha": 16, "target_modules": []string{"q_proj", "v_proj"}, "peft_type": "LORA", "bias": "none"}
		edit(c)
		b, err := json.Marshal(c)
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string // part of the message: the field at fault
	}{
		{"malformed", []byte(`{"r": 8,`), "adapter_config.json"},
		{"not an object", []byte(`[1]`), "adapter_config.json"},
		{"no r", base(func(c map[string]any) { delete(c, "r") }), "r: missing"},
		{"no alpha", base(func(c map[string]any) { delete(c, "lora_alpha") }), "lora_alpha: missing"},
		{"no targets", base(func(c map[string]any) { delete(c, "target_modules") }), "target_modules: missing"},
		{"r zero", base(func(c map[string]any) { c["r"] = 0 }), "r:"},
		{"r fractional", base(func(c map[string]any) { c["r"] = 2.5 }), "r:"},
		{"r string", base(func(c map[string]any) { c["r"] = "8" }), "r:"},
		{"alpha negative", base(func(c map[string]any) { c["lora_alpha"] = -1 }), "lora_alpha"},
		{"regex targets", base(func(c map[string]any) { c["target_modules"] = ".*proj" }), "regular expression"},
		{"unknown module", base(func(c map[string]any) { c["target_modules"] = []string{"lm_head"} }), "lm_head"},
		{"empty targets", base(func(c map[string]any) { c["target_modules"] = []string{} }), "empty"},
		{"non-string target", base(func(c map[string]any) { c["target_modules"] = []any{1} }), "not a string"},
		{"prefix tuning", base(func(c map[string]any) { c["peft_type"] = "PREFIX_TUNING" }), "peft_type"},
		{"bias all", base(func(c map[string]any) { c["bias"] = "all" }), "bias"},
		{"dora", base(func(c map[string]any) { c["use_dora"] = true }), "use_dora"},
		{"fan in fan out", base(func(c map[string]any) { c["fan_in_fan_out"] = true }), "fan_in_fan_out"},
		{"modules to save", base(func(c map[string]any) { c["modules_to_save"] = []string{"lm_head"} }), "modules_to_save"},
		{"layers to transform", base(func(c map[string]any) { c["layers_to_transform"] = []int{0} }), "layers_to_transform"},
		{"layers to transform int", base(func(c map[string]any) { c["layers_to_transform"] = 1 }), "layers_to_transform"},
		{"rank pattern", base(func(c map[string]any) { c["rank_pattern"] = map[string]int{"q_proj": 4} }), "rank_pattern"},
		{"dropout 1", base(func(c map[string]any) { c["lora_dropout"] = 1 }), "lora_dropout"},
		{"rslora string", base(func(c map[string]any) { c["use_rslora"] = "yes" }), "use_rslora"},
		// Keys match exactly, as in PEFT's and vLLM's Python dict.
		{"r in capitals", base(func(c map[string]any) { c["R"] = c["r"]; delete(c, "r") }), "r: missing"},
		{"number beyond float64", []byte(`{"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "layers_pattern": [1e400]}`), "layers_pattern: json: cannot unmarshal number 1e400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAdapterConfig(tc.data)
			require.ErrorIs(t, err, ErrLoRA)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// What PEFT writes with its defaults parses, nulls and empty patterns included.
	c, err := ParseAdapterConfig(base(func(c map[string]any) {
		c["modules_to_save"], c["layers_to_transform"], c["rank_pattern"] = nil, nil, map[string]int{}
		c["lora_dropout"], c["use_rslora"], c["target_modules"] = 0.05, true, "all-linear"
	}))
	require.NoError(t, err)
	assert.Equal(t, LoRAConfig{Rank: 8, Alpha: 16, TargetModules: []string{LoRAAllLinear}, UseRSLoRA: true}, c)
	assert.InDelta(t, 16/math.Sqrt(8), c.Scale(), 1e-15)
}

func TestLoRAConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		cfg   LoRAConfig
		scale float64
		mods  []string
		err   bool
	}{
		{LoRAConfig{Rank: 8}, 1, []string{"q_proj", "v_proj"}, false},                              // alpha 0 = r
		{LoRAConfig{Rank: 8, Alpha: 16}, 2, []string{"q_proj", "v_proj"}, false},                   // 16/8
		{LoRAConfig{Rank: 16, Alpha: 16, UseRSLoRA: true}, 4, []string{"q_proj", "v_proj"}, false}, // 16/√16
		{LoRAConfig{Rank: 4, TargetModules: []string{"down_proj", "q_proj", "q_proj"}}, 1, []string{"q_proj", "down_proj"}, false},
		{LoRAConfig{Rank: 4, TargetModules: []string{"all-linear"}}, 1, loraModules[:], false},
		{LoRAConfig{}, 0, nil, true},
		{LoRAConfig{Rank: 4, Alpha: math.NaN()}, 0, nil, true},
		{LoRAConfig{Rank: 4, Alpha: math.Inf(1)}, 0, nil, true},
		{LoRAConfig{Rank: 4, TargetModules: []string{"embed_tokens"}}, 0, nil, true},
	} {
		d, err := tc.cfg.WithDefaults()
		if tc.err {
			assert.ErrorIs(t, err, ErrLoRA, "%+v", tc.cfg)
			assert.ErrorIs(t, tc.cfg.Validate(), ErrLoRA)
			assert.Zero(t, tc.cfg.Scale())
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.mods, d.TargetModules)
		assert.InDelta(t, tc.scale, tc.cfg.Scale(), 1e-15)
	}
}

func TestLoadAdapterErrors(t *testing.T) {
	src := filepath.Join("testdata", "model", "qwen3-tiny-lora")
	read := func(t *testing.T) []safetensors.Tensor {
		f, err := safetensors.Open(filepath.Join(src, AdapterWeightsFileName))
		require.NoError(t, err)
		defer f.Close()
		var ts []safetensors.Tensor
		for _, info := range f.Tensors() {
			v, err := f.Float32(info.Name)
			require.NoError(t, err)
			ts = append(ts, safetensors.Tensor{Name: info.Name, DType: safetensors.F32, Shape: info.Shape, Float32: v})
		}
		return ts
	}
	conf, err := os.ReadFile(filepath.Join(src, AdapterConfigFileName))
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		edit  func([]safetensors.Tensor) []safetensors.Tensor
		conf  []byte
		model string
		want  string
	}{
		{"missing tensor", func(ts []safetensors.Tensor) []safetensors.Tensor { return ts[1:] }, nil, "", "missing tensor"},
		{"unexpected tensor", func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.Tensor{Name: "base_model.model.lm_head.lora_A.weight", DType: safetensors.F32, Shape: []int{1}, Float32: []float32{0}})
		}, nil, "", "unexpected tensor"},
		{"wrong shape", func(ts []safetensors.Tensor) []safetensors.Tensor {
			ts[0].Shape = []int{ts[0].Shape[1], ts[0].Shape[0]}
			return ts
		}, nil, "", "has shape"},
		{"NaN", func(ts []safetensors.Tensor) []safetensors.Tensor {
			ts[2].Float32[5] = float32(math.NaN())
			return ts
		}, nil, "", "NaN"},
		{"rank disagrees with config", nil, []byte(strings.Replace(string(conf), `"r": 4`, `"r": 5`, 1)), "", "has shape"},
		{"other architecture", nil, nil, "qwen2-tiny", "shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ts := read(t)
			if tc.edit != nil {
				ts = tc.edit(ts)
			}
			require.NoError(t, safetensors.WriteFile(filepath.Join(dir, AdapterWeightsFileName), ts, nil))
			c := conf
			if tc.conf != nil {
				c = tc.conf
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, AdapterConfigFileName), c, 0o644))
			name := "qwen3-tiny"
			if tc.model != "" {
				name = tc.model
			}
			m := loadTiny(t, name)
			seqs := loadGolden(t, name).seqs
			before, _, err := m.Forward(context.Background(), lm.TokenBatch{Tokens: seqs}, false)
			require.NoError(t, err)
			err = m.LoadAdapter(dir)
			require.ErrorIs(t, err, ErrLoRA)
			assert.Contains(t, err.Error(), tc.want)
			// The model is left as it was: no adapter, full training.
			_, has := m.LoRA()
			assert.False(t, has)
			assert.Len(t, m.Params(), len(m.Config().TensorSpecs()))
			after, back, err := m.Forward(context.Background(), lm.TokenBatch{Tokens: seqs}, true)
			require.NoError(t, err)
			assert.Equal(t, before.LogProbs, after.LogProbs)
			require.NoError(t, back(context.Background(), after.LogProbs, nil))
		})
	}
	t.Run("missing folder", func(t *testing.T) {
		m := loadTiny(t, "qwen3-tiny")
		assert.Error(t, m.LoadAdapter(filepath.Join(t.TempDir(), "none")))
	})
	t.Run("second adapter", func(t *testing.T) {
		m := loadWithAdapter(t, "qwen3-tiny", "qwen3-tiny-lora")
		assert.ErrorIs(t, m.LoadAdapter(src), ErrLoRA)
		assert.ErrorIs(t, m.AddLoRA(LoRAConfig{Rank: 2}, 1), ErrLoRA)
	})
	t.Run("no adapter", func(t *testing.T) {
		m := loadTiny(t, "qwen3-tiny")
		assert.ErrorIs(t, m.SaveAdapter(t.TempDir(), lm.AdapterSaveOptions{}), ErrLoRA)
		assert.ErrorIs(t, m.MergeLoRA(), ErrLoRA)
		assert.ErrorIs(t, m.UnmergeLoRA(), ErrLoRA)
		assert.ErrorIs(t, m.AddLoRA(LoRAConfig{Rank: 0}, 1), ErrLoRA)
		assert.ErrorIs(t, m.SaveAdapter(t.TempDir(), lm.AdapterSaveOptions{DType: safetensors.F16}), ErrInput)
	})
}

func FuzzParseAdapterConfig(f *testing.F) {
	conf, err := os.ReadFile(filepath.Join("testdata", "model", "llama-tiny-lora", AdapterConfigFileName))
	require.NoError(f, err)
	f.Add(conf)
	f.Add([]byte(`{"r": 8, "lora_alpha": 16, "target_modules": "all-linear"}`))
	f.Add([]byte(`{"r": 1e300, "lora_alpha": 1e-300, "target_modules": [""]}`))
	f.Add([]byte(`{"r": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseAdapterConfig(data)
		if err != nil {
			require.ErrorIs(t, err, ErrLoRA)
			return
		}
		// Whatever parses is usable, and survives a write and a re-read.
		require.NoError(t, c.Validate())
		s := c.Scale()
		require.False(t, math.IsNaN(s) || math.IsInf(s, 0) || s <= 0, "scale %v", s)
		out, err := MarshalAdapterConfig(c)
		require.NoError(t, err)
		c2, err := ParseAdapterConfig(out)
		require.NoError(t, err)
		require.InDelta(t, s, c2.Scale(), 1e-12*s)
	})
}

// TestLoRAChangesBetweenForwardAndBackward: merging (or attaching) after
// a forward makes its backward fail instead of mixing two functions; the
// sessions' KV caches of the old function are dropped.
func TestLoRAChangesBetweenForwardAndBackward(t *testing.T) {
	ctx := context.Background()
	tc := loraCases[0]
	m := loadWithAdapter(t, tc.base, tc.name)
	seqs := loadGolden(t, tc.base).seqs
	stats, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs}, true)
	require.NoError(t, err)
	require.NoError(t, m.MergeLoRA())
	assert.ErrorIs(t, back(ctx, stats.LogProbs, nil), ErrLoRA)
	require.NoError(t, m.UnmergeLoRA())

	b := loadTiny(t, tc.base)
	_, back, err = b.Forward(ctx, lm.TokenBatch{Tokens: seqs}, true)
	require.NoError(t, err)
	req := []lm.GenerateRequest{{Prompt: seqs[0][:3], Params: lm.SampleParams{MaxNewTokens: 2}, Session: "s"}}
	gen, err := b.Generate(ctx, req)
	require.NoError(t, err)
	require.NoError(t, b.LoadAdapter(filepath.Join("testdata", "model", tc.name)))
	assert.ErrorIs(t, back(ctx, stats.LogProbs, nil), ErrLoRA)
	req[0].Prompt = append(slices.Clone(req[0].Prompt), gen[0].Tokens...)
	again, err := b.Generate(ctx, req)
	require.NoError(t, err)
	assert.Zero(t, again[0].CachedTokens, "the session's cache was computed without the adapter")
}

// TestLoRAUnmergeAfterAdapterMoved: unmerging subtracts the adapter as it
// was merged, so the base comes back even if A and B moved meanwhile.
func TestLoRAUnmergeAfterAdapterMoved(t *testing.T) {
	tc := loraCases[1]
	m := loadWithAdapter(t, tc.base, tc.name)
	base := make([][]float32, len(m.w.base))
	for i, p := range m.w.base {
		base[i] = slices.Clone(p.data)
	}
	require.NoError(t, m.MergeLoRA())
	for _, p := range m.Params() {
		for j := range p.Data {
			p.Data[j] += 0.5 // an optimizer's momentum, a restore
		}
	}
	require.NoError(t, m.UnmergeLoRA())
	for i, p := range m.w.base {
		assert.Less(t, maxAbsDiff(p.data, base[i]), 1e-6, p.spec.Name)
	}
}
