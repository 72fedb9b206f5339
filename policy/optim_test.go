package policy

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrl/agentrl/lm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type adamGolden struct {
	Names       []string   `json:"names"`
	Shapes      [][]int    `json:"shapes"`
	Beta1       float64    `json:"beta1"`
	Beta2       float64    `json:"beta2"`
	Eps         float64    `json:"eps"`
	WeightDecay float64    `json:"weight_decay"`
	MaxNorm     float64    `json:"max_norm"`
	Init        [][]uint32 `json:"init"`
	Steps       []struct {
		LR           float64    `json:"lr"`
		Grads        [][]uint32 `json:"grads"`
		Norm         float64    `json:"norm"`
		ClippedGrads [][]uint32 `json:"clipped_grads"`
		Params       [][]uint32 `json:"params"`
	} `json:"steps"`
}

func fromBits(b []uint32) []float32 {
	out := make([]float32, len(b))
	for i, x := range b {
		out[i] = math.Float32frombits(x)
	}
	return out
}

// tableSchedule replays a fixed learning rate per step (with LR 1).
type tableSchedule []float64

func (s tableSchedule) Factor(step int64) float64 { return s[step] }

func assertRelClose(t *testing.T, want, got []float32, rel float64, msg string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		tol := rel * math.Max(math.Abs(w), 1e-6)
		if math.Abs(w-g) > tol {
			t.Fatalf("%s[%d]: got %.9g, want %.9g (torch)", append([]any{msg, i, g, w}, args...)...)
		}
	}
}

// TestAdamWGolden replays testdata/adamw_golden.json, produced by
// torch.optim.AdamW and torch.nn.utils.clip_grad_norm_ (torch 1.13, see
// testdata/gen_adamw.py): six steps with clipping, weight decay and a
// changing learning rate, compared to 1e-6 relative.
func TestAdamWGolden(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "adamw_golden.json"))
	require.NoError(t, err)
	var g adamGolden
	require.NoError(t, json.Unmarshal(data, &g))
	params := make([]lm.Param, len(g.Names))
	for i, name := range g.Names {
		params[i] = lm.Param{Name: name, Data: fromBits(g.Init[i]), Grad: make([]float32, len(g.Init[i]))}
	}
	lrs := make(tableSchedule, len(g.Steps))
	for i, s := range g.Steps {
		lrs[i] = s.LR
	}
	opt, err := NewAdamW(params, AdamWConfig{LR: 1, Beta1: g.Beta1, Beta2: g.Beta2, Eps: g.Eps, WeightDecay: g.WeightDecay, Schedule: lrs})
	require.NoError(t, err)
	exact, total := 0, 0
	for k, s := range g.Steps {
		for i := range params {
			copy(params[i].Grad, fromBits(s.Grads[i]))
		}
		norm, err := ClipGradNorm(params, g.MaxNorm)
		require.NoError(t, err)
		assert.InEpsilon(t, s.Norm, norm, 1e-6, "step %d norm", k)
		for i := range params {
			assertRelClose(t, fromBits(s.ClippedGrads[i]), params[i].Grad, 1e-6, "step %d clipped grad %s", k, params[i].Name)
		}
		lr, err := opt.Step()
		require.NoError(t, err)
		assert.Equal(t, s.LR, lr)
		for i := range params {
			want := fromBits(s.Params[i])
			assertRelClose(t, want, params[i].Data, 1e-6, "step %d param %s", k, params[i].Name)
			for j := range want {
				total++
				if want[j] == params[i].Data[j] {
					exact++
				}
			}
		}
	}
	t.Logf("%d of %d parameter values equal torch's bit for bit", exact, total)
	assert.Equal(t, int64(len(g.Steps)), opt.Steps())
	// The first step clipped (norm > 1), the last did not.
	assert.Greater(t, g.Steps[0].Norm, 1.0)
	assert.Less(t, g.Steps[len(g.Steps)-1].Norm, 1.0)
}

// TestAdamWFirstStepByHand: with zero weight decay, the first AdamW step
// moves each parameter by lr·g/(|g| + ε·...) ≈ lr·sign(g): m = (1-β1)g,
// v = (1-β2)g², bias-corrected m̂ = g, √v̂ = |g|, so θ ← θ − lr·g/(|g|+ε).
func TestAdamWFirstStepByHand(t *testing.T) {
	p := []lm.Param{{Name: "w", Data: []float32{1, 1, 1}, Grad: []float32{0.5, -2, 0}}}
	opt, err := NewAdamW(p, AdamWConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	require.NoError(t, err)
	_, err = opt.Step()
	require.NoError(t, err)
	assert.InDelta(t, 1-0.1*0.5/(0.5+1e-8), p[0].Data[0], 1e-7)
	assert.InDelta(t, 1+0.1*2/(2+1e-8), p[0].Data[1], 1e-7)
	assert.Equal(t, float32(1), p[0].Data[2]) // zero gradient, zero moment
	// Weight decay alone (zero gradient): θ·(1 − lr·λ) = 1·(1 − 0.1·0.5).
	q := []lm.Param{{Name: "w", Data: []float32{1}, Grad: []float32{0}}}
	opt, err = NewAdamW(q, AdamWConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.5})
	require.NoError(t, err)
	_, err = opt.Step()
	require.NoError(t, err)
	assert.Equal(t, float32(0.95), q[0].Data[0])
}

// TestAdamWZeroConfig: the zero AdamWConfig is torch's AdamW without
// weight decay (lr 1e-3, betas (0.9, 0.999), eps 1e-8), so its first step
// moves each parameter by 1e-3·g/(|g| + 1e-8) and leaves a parameter with
// a zero gradient where it is (no 0/0); a zero pair of betas is defaulted
// but Beta1 0 beside a set Beta2 is kept.
func TestAdamWZeroConfig(t *testing.T) {
	want := AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	assert.Equal(t, want, AdamWConfig{}.WithDefaults())
	torch := DefaultAdamWConfig()
	torch.WeightDecay = 0
	assert.Equal(t, want, torch, "DefaultAdamWConfig differs from the zero value in WeightDecay only")
	assert.Equal(t, 0.01, DefaultAdamWConfig().WeightDecay)
	assert.NoError(t, AdamWConfig{}.Validate())
	assert.ErrorContains(t, AdamWConfig{LR: -1}.Validate(), "LR = -1")
	// Set fields are kept as given.
	set := AdamWConfig{LR: 0.1, Beta1: 0.5, Beta2: 0.9, Eps: 1e-6, WeightDecay: 0.2}
	assert.Equal(t, set, set.WithDefaults())
	assert.Equal(t, AdamWConfig{LR: 1e-3, Beta1: 0, Beta2: 0.99, Eps: 1e-8}, AdamWConfig{Beta2: 0.99}.WithDefaults())
	assert.Equal(t, AdamWConfig{LR: 1e-3, Beta1: 0.8, Beta2: 0, Eps: 1e-8}, AdamWConfig{Beta1: 0.8}.WithDefaults())

	p := []lm.Param{{Name: "w", Data: []float32{1, 1, 1}, Grad: []float32{0.5, -2, 0}}}
	opt, err := NewAdamW(p, AdamWConfig{})
	require.NoError(t, err)
	assert.Equal(t, want, opt.Config())
	assert.Equal(t, 1e-3, opt.LR())
	_, err = opt.Step()
	require.NoError(t, err)
	assert.InDelta(t, 1-1e-3*0.5/(0.5+1e-8), p[0].Data[0], 1e-7)
	assert.InDelta(t, 1+1e-3*2/(2+1e-8), p[0].Data[1], 1e-7)
	assert.Equal(t, float32(1), p[0].Data[2])

	// Gradients 1 then 0. With Beta1 0 the second step's first moment is
	// the zero gradient, so the parameter stays; with the default 0.9 it
	// is 0.9·0.1 = 0.09, v = 0.999·0.001, and the parameter moves by
	// 1e-3·(0.09/0.19)/√(0.000999/0.001999) ≈ 6.7006e-4.
	second := func(cfg AdamWConfig) (first, second float32) {
		q := []lm.Param{{Name: "w", Data: []float32{1}, Grad: []float32{1}}}
		o, err := NewAdamW(q, cfg)
		require.NoError(t, err)
		_, err = o.Step()
		require.NoError(t, err)
		first = q[0].Data[0]
		q[0].Grad[0] = 0
		_, err = o.Step()
		require.NoError(t, err)
		return first, q[0].Data[0]
	}
	a, b := second(AdamWConfig{Beta2: 0.999})
	assert.InDelta(t, 1-1e-3, a, 1e-7)
	assert.Equal(t, a, b, "Beta1 0: no momentum")
	a, b = second(AdamWConfig{})
	assert.InDelta(t, 1-1e-3, a, 1e-7)
	assert.InDelta(t, 6.7006e-4, a-b, 1e-7, "Beta1 0.9: momentum carries the first gradient")
}

func TestClipGradNorm(t *testing.T) {
	// Gradients (3, 4) and (12): norm √(9+16+144) = 13. maxNorm 6.5 gives
	// the scale 6.5/(13 + 1e-6).
	p := []lm.Param{{Name: "a", Data: make([]float32, 2), Grad: []float32{3, 4}}, {Name: "b", Data: make([]float32, 1), Grad: []float32{12}}}
	norm, err := ClipGradNorm(p, 6.5)
	require.NoError(t, err)
	assert.Equal(t, 13.0, norm)
	c := 6.5 / (13 + 1e-6)
	assert.InDeltaSlice(t, []float32{float32(3 * c), float32(4 * c)}, p[0].Grad, 1e-6)
	assert.InDelta(t, 12*c, p[1].Grad[0], 1e-6)
	// Below the limit: unchanged.
	norm, err = ClipGradNorm(p, 100)
	require.NoError(t, err)
	assert.InDelta(t, 6.5, norm, 1e-5)
	assert.Equal(t, float32(12*c), p[1].Grad[0])

	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		p := []lm.Param{{Name: "a", Data: make([]float32, 2), Grad: []float32{1, 2}}, {Name: "b", Data: make([]float32, 2), Grad: []float32{3, bad}}}
		_, err := ClipGradNorm(p, 1)
		require.ErrorIs(t, err, ErrNonFinite)
		assert.ErrorContains(t, err, "b[1]")
		assert.Equal(t, []float32{1, 2}, p[0].Grad, "no update on a non-finite norm")
	}
	// Finite values whose squares overflow float32 still have a finite
	// float64 norm.
	big := []lm.Param{{Name: "a", Data: make([]float32, 2), Grad: []float32{3e38, 3e38}}}
	norm, err = ClipGradNorm(big, 1)
	require.NoError(t, err)
	assert.InEpsilon(t, 3e38*math.Sqrt2, norm, 1e-6)

	_, err = ClipGradNorm(p, 0)
	assert.ErrorContains(t, err, "maxNorm = 0")
	_, err = ClipGradNorm(p, math.NaN())
	assert.ErrorContains(t, err, "maxNorm = NaN")
}

func TestSchedules(t *testing.T) {
	// Cosine with 10 warmup steps, 110 total, min ratio 0.1, by hand:
	// step 5: 5/10; step 10: progress 0 → 1; step 60: progress ½,
	// cos(π/2) = 0 → 0.1 + 0.9·½ = 0.55; step 110: cos(π) = −1 → 0.1;
	// step 200: progress 1.9, the formula rises again but HF/verl clamp
	// only from below, so 0.1 + 0.9·½·(1+cos(1.9π)).
	c := CosineSchedule{WarmupSteps: 10, TotalSteps: 110, MinLRRatio: 0.1}
	assert.Equal(t, 0.0, c.Factor(0))
	assert.Equal(t, 0.5, c.Factor(5))
	assert.Equal(t, 1.0, c.Factor(10))
	assert.InDelta(t, 0.55, c.Factor(60), 1e-15)
	assert.InDelta(t, 0.1, c.Factor(110), 1e-15)
	assert.InDelta(t, 0.1+0.45*(1+math.Cos(1.9*math.Pi)), c.Factor(200), 1e-15)
	// HF default: min ratio 0, at a quarter of the decay cos(π/4).
	h := CosineSchedule{WarmupSteps: 0, TotalSteps: 100}
	assert.Equal(t, 1.0, h.Factor(0))
	assert.InDelta(t, 0.5*(1+math.Cos(math.Pi/4)), h.Factor(25), 1e-15)
	assert.InDelta(t, 0, h.Factor(100), 1e-15)

	// Warmup–stable–decay, 10 warmup steps, held to step 70, then a
	// cosine to 0.1 over the last 40 of 110, by hand: step 70 is the
	// decay's start, cos(0) → 1; step 90 its middle, cos(π/2) = 0 →
	// 0.55; step 110 its end and anything after, cos(π) → 0.1.
	w := WSDSchedule{WarmupSteps: 10, DecaySteps: 40, TotalSteps: 110, MinLRRatio: 0.1}
	assert.Equal(t, []float64{0, 0.5, 1, 1, 1}, []float64{w.Factor(0), w.Factor(5), w.Factor(10), w.Factor(40), w.Factor(69)})
	assert.Equal(t, 1.0, w.Factor(70))
	assert.InDelta(t, 0.55, w.Factor(90), 1e-15)
	assert.InDelta(t, 0.1+0.45*(1+math.Cos(math.Pi/4)), w.Factor(80), 1e-15)
	assert.InDelta(t, 0.1, w.Factor(110), 1e-15)
	assert.InDelta(t, 0.1, w.Factor(500), 1e-15)
	// A decay longer than what follows the warmup starts right after it.
	long := WSDSchedule{WarmupSteps: 10, DecaySteps: 1000, TotalSteps: 110}
	assert.Equal(t, 1.0, long.Factor(10))
	assert.InDelta(t, 0.5, long.Factor(60), 1e-15)
	assert.InDelta(t, 0, long.Factor(110), 1e-15)
	// No decay: the constant schedule.
	assert.Equal(t, 1.0, WSDSchedule{WarmupSteps: 2, TotalSteps: 5}.Factor(100))

	k := ConstantSchedule{WarmupSteps: 4}
	assert.Equal(t, []float64{0, 0.25, 0.5, 0.75, 1, 1}, []float64{k.Factor(0), k.Factor(1), k.Factor(2), k.Factor(3), k.Factor(4), k.Factor(100)})
	assert.Equal(t, 1.0, ConstantSchedule{}.Factor(0))

	// The optimizer applies the schedule by its own step count.
	p := []lm.Param{{Name: "w", Data: []float32{0}, Grad: []float32{0}}}
	opt, err := NewAdamW(p, AdamWConfig{LR: 2e-3, Beta1: 0.9, Beta2: 0.999, Schedule: k})
	require.NoError(t, err)
	for i, want := range []float64{0, 5e-4, 1e-3, 1.5e-3, 2e-3} {
		lr, err := opt.Step()
		require.NoError(t, err)
		assert.InDelta(t, want, lr, 1e-18, "step %d", i)
	}
}

func randomParams(r *rand.Rand, sizes map[string]int) []lm.Param {
	var ps []lm.Param
	for _, name := range []string{"embed", "layer.0.w", "layer.0.b", "norm"} {
		n := sizes[name]
		p := lm.Param{Name: name, Data: make([]float32, n), Grad: make([]float32, n)}
		for i := range p.Data {
			p.Data[i] = float32(r.NormFloat64())
		}
		ps = append(ps, p)
	}
	return ps
}

func fillGrads(r *rand.Rand, ps []lm.Param) {
	for _, p := range ps {
		for i := range p.Grad {
			p.Grad[i] = float32(r.NormFloat64())
		}
	}
}

// TestAdamWResume: saving after 3 steps and continuing in a fresh optimizer
// gives, bit for bit, the parameters of 7 uninterrupted steps.
func TestAdamWResume(t *testing.T) {
	sizes := map[string]int{"embed": 40, "layer.0.w": 30, "layer.0.b": 5, "norm": 8}
	cfg := AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Schedule: CosineSchedule{WarmupSteps: 2, TotalSteps: 7, MinLRRatio: 0.1}}

	run := func(steps int, ps []lm.Param, opt *AdamW, gr *rand.Rand) {
		for i := 0; i < steps; i++ {
			fillGrads(gr, ps)
			_, err := ClipGradNorm(ps, 1)
			require.NoError(t, err)
			_, err = opt.Step()
			require.NoError(t, err)
		}
	}
	straight := randomParams(rand.New(rand.NewPCG(1, 2)), sizes)
	opt, err := NewAdamW(straight, cfg)
	require.NoError(t, err)
	run(7, straight, opt, rand.New(rand.NewPCG(3, 4)))

	resumed := randomParams(rand.New(rand.NewPCG(1, 2)), sizes)
	gr := rand.New(rand.NewPCG(3, 4))
	opt1, err := NewAdamW(resumed, cfg)
	require.NoError(t, err)
	run(3, resumed, opt1, gr)
	dir := t.TempDir()
	require.NoError(t, opt1.SaveStateFile(dir))

	// A fresh process: parameters come back from the checkpoint (here: the
	// same slices copied), the optimizer from its state file.
	fresh := make([]lm.Param, len(resumed))
	for i, p := range resumed {
		fresh[i] = lm.Param{Name: p.Name, Data: append([]float32(nil), p.Data...), Grad: make([]float32, len(p.Data))}
	}
	opt2, err := NewAdamW(fresh, cfg)
	require.NoError(t, err)
	require.NoError(t, opt2.LoadStateFile(dir))
	assert.Equal(t, int64(3), opt2.Steps())
	run(4, fresh, opt2, gr)
	for i := range straight {
		assert.Equal(t, bitsOf32(straight[i].Data), bitsOf32(fresh[i].Data), straight[i].Name)
	}

	// The io.Writer form gives the same bytes as the file.
	var buf bytes.Buffer
	require.NoError(t, opt1.SaveState(&buf))
	file, err := os.ReadFile(filepath.Join(dir, StateFileName))
	require.NoError(t, err)
	assert.Equal(t, file, buf.Bytes())
}

func bitsOf32(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

func TestAdamWStateErrors(t *testing.T) {
	mk := func(names ...string) []lm.Param {
		var ps []lm.Param
		for _, n := range names {
			ps = append(ps, lm.Param{Name: n, Data: make([]float32, 3), Grad: []float32{1, 2, 3}})
		}
		return ps
	}
	opt, err := NewAdamW(mk("a", "b"), DefaultAdamWConfig())
	require.NoError(t, err)
	_, err = opt.Step()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, opt.SaveState(&buf))
	data := buf.Bytes()

	other, err := NewAdamW(mk("a", "c"), DefaultAdamWConfig())
	require.NoError(t, err)
	err = other.LoadState(bytes.NewReader(data), int64(len(data)))
	assert.ErrorContains(t, err, `lacks "exp_avg.c"`)
	assert.Equal(t, int64(0), other.Steps(), "unchanged after a failed load")

	fewer, err := NewAdamW(mk("a"), DefaultAdamWConfig())
	require.NoError(t, err)
	err = fewer.LoadState(bytes.NewReader(data), int64(len(data)))
	assert.ErrorContains(t, err, "holds 4 tensors, want 2")

	longer := []lm.Param{{Name: "a", Data: make([]float32, 4), Grad: make([]float32, 4)}, {Name: "b", Data: make([]float32, 3), Grad: make([]float32, 3)}}
	lo, err := NewAdamW(longer, DefaultAdamWConfig())
	require.NoError(t, err)
	err = lo.LoadState(bytes.NewReader(data), int64(len(data)))
	assert.ErrorContains(t, err, `"exp_avg.a" is F32 [3], want F32 [4]`)

	err = opt.LoadState(bytes.NewReader(data[:len(data)-1]), int64(len(data)-1))
	assert.ErrorContains(t, err, "optimizer state")
	err = opt.LoadState(bytes.NewReader(nil), 0)
	assert.Error(t, err)
}

func TestAdamWConfigErrors(t *testing.T) {
	ok := []lm.Param{{Name: "a", Data: make([]float32, 1), Grad: make([]float32, 1)}}
	for _, c := range []struct {
		mut  func(*AdamWConfig)
		want string
	}{
		{func(c *AdamWConfig) { c.LR = -1 }, "LR = -1"},
		{func(c *AdamWConfig) { c.LR = math.NaN() }, "LR = NaN"},
		{func(c *AdamWConfig) { c.Beta1 = 1 }, "Beta1 = 1"},
		{func(c *AdamWConfig) { c.Beta2 = -0.1 }, "Beta2 = -0.1"},
		{func(c *AdamWConfig) { c.Eps = math.Inf(1) }, "Eps = +Inf"},
		{func(c *AdamWConfig) { c.WeightDecay = -1 }, "WeightDecay = -1"},
	} {
		cfg := DefaultAdamWConfig()
		c.mut(&cfg)
		_, err := NewAdamW(ok, cfg)
		assert.ErrorContains(t, err, c.want)
	}
	_, err := NewAdamW([]lm.Param{{Name: "a", Data: make([]float32, 2), Grad: make([]float32, 1)}}, DefaultAdamWConfig())
	assert.ErrorContains(t, err, `"a" has 2 values but 1 gradients`)
	_, err = NewAdamW([]lm.Param{ok[0], ok[0]}, DefaultAdamWConfig())
	assert.ErrorContains(t, err, `duplicate parameter name "a"`)
	_, err = NewAdamW([]lm.Param{{Data: []float32{1}, Grad: []float32{1}}}, DefaultAdamWConfig())
	assert.ErrorContains(t, err, "parameter 0 has no name")

	cfg := DefaultAdamWConfig()
	cfg.Schedule = tableSchedule{math.Inf(1)}
	opt, err := NewAdamW(ok, cfg)
	require.NoError(t, err)
	_, err = opt.Step()
	assert.ErrorIs(t, err, ErrNonFinite)
	assert.Equal(t, int64(0), opt.Steps())
}

func BenchmarkAdamWStep(b *testing.B) {
	const n = 1 << 20
	p := []lm.Param{{Name: "w", Data: make([]float32, n), Grad: make([]float32, n)}}
	r := rand.New(rand.NewPCG(1, 1))
	for i := range p[0].Grad {
		p[0].Data[i] = float32(r.NormFloat64())
		p[0].Grad[i] = float32(r.NormFloat64())
	}
	opt, err := NewAdamW(p, DefaultAdamWConfig())
	require.NoError(b, err)
	b.SetBytes(n * 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := opt.Step(); err != nil {
			b.Fatal(err)
		}
	}
}
