package loss_test

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/loss/losstest"
)

// FuzzCompute feeds arbitrary batches (any float32 bit patterns, NaN and
// Inf included, masks that are not 0/1, any shape up to 4×5) and
// configurations to Compute. It must never panic, and must either return
// one of the package's errors or a finite loss with finite, correctly
// shaped gradients that vanish on padding.
func FuzzCompute(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(0), uint8(2), uint8(3), []byte{0, 0, 128, 63, 0, 0, 0, 191})
	f.Add(uint8(5), uint8(3), uint8(4), uint8(1), uint8(1), []byte{0, 0, 192, 127})
	f.Add(uint8(1), uint8(2), uint8(2), uint8(4), uint8(5), make([]byte, 4*20*7))
	modes := []loss.Mode{"vanilla", "gspo", "cispo", "gpg", "sapo", "geo_mean", "nope"}
	aggs := []loss.Agg{"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm", "x"}
	kls := []loss.KLType{"k1", "k2", "k3", "abs", "k3+", "low_var_kl", "?"}
	sentinels := []error{loss.ErrConfig, loss.ErrShape, loss.ErrNonFinite, loss.ErrEmptyBatch, loss.ErrMissing, loss.ErrMaskValue, loss.ErrUnknownName}
	c := loss.NewComputer(nil)
	f.Fuzz(func(t *testing.T, mode, agg, kl, rows, cols uint8, data []byte) {
		r, k := int(rows%5), int(cols%6)
		next := func(i int) float32 {
			off := 4 * i
			if off+4 > len(data) {
				return float32(i%7) * -0.1
			}
			return math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		}
		field := func(j int, isMask bool) *tensor.Dense {
			v := make([]float32, r*k)
			for i := range v {
				v[i] = next(j*r*k + i)
				if isMask && len(data) < 8*r*k {
					v[i] = float32(i % 2) // mostly valid masks when data is short
				}
			}
			return tensor.New(tensor.WithShape(r, k), tensor.WithBacking(v))
		}
		b := loss.Batch{LogProbs: field(0, false), OldLogProbs: field(1, false), Advantages: field(2, false), Mask: field(3, true),
			RefLogProbs: field(4, false), RolloutLogProbs: field(5, false), Entropy: field(6, false)}
		cfg := loss.Config{Mode: modes[int(mode)%len(modes)], Agg: aggs[int(agg)%len(aggs)], KLType: kls[int(kl)%len(kls)],
			KLCoef: 0.1, EntropyCoef: 0.01, TISCap: 2}
		res, err := c.Compute(cfg, b)
		if err != nil {
			for _, s := range sentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
			t.Fatalf("loss %v", res.Loss)
		}
		mask := b.Mask.Float32s()
		for i, g := range res.GradLogProbs.Float32s() {
			if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) || (mask[i] == 0 && g != 0) {
				t.Fatalf("grad[%d] = %v (mask %v)", i, g, mask[i])
			}
		}
	})
}

// FuzzExpr builds arbitrary expressions (a stack program read from the
// input: leaves, unary, binary and ternary operations, numbers, every
// shape combination, misuse included) as a variant's Loss and computes
// them on a valid batch. Compute must never panic, and must either return
// one of the package's errors or a finite loss with finite gradients that
// vanish on padding.
func FuzzExpr(f *testing.F) {
	f.Add([]byte{0, 40, 3, 60, 20})          // −(logπ·A)
	f.Add([]byte{4, 31, 9, 21, 70, 50})      // SeqMean, broadcast, Max
	f.Add([]byte{2, 44, 1, 7, 8, 90, 65, 3}) // a Where
	f.Add([]byte{10, 11, 12, 13, 61, 62, 63})
	sentinels := []error{loss.ErrConfig, loss.ErrShape, loss.ErrNonFinite, loss.ErrMissing, loss.ErrUnknownName}
	b := losstest.RandomBatch(rand.New(rand.NewPCG(5, 5)), 3, 4)
	b.RolloutLogProbs = nil // RolloutLogProbs() must then fail with ErrMissing
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 32 {
			prog = prog[:32]
		}
		l := func(v *loss.Vars) loss.Expr {
			leaves := []func() loss.Expr{v.LogProbs, v.OldLogProbs, v.Advantages, v.Mask, v.Ratio, v.LogRatio, v.Count,
				v.Entropy, v.RefLogProbs, v.RolloutLogProbs, func() loss.Expr { return v.Const(0.5) }}
			var st []loss.Expr
			pop := func() loss.Expr {
				if len(st) == 0 {
					return v.LogProbs()
				}
				x := st[len(st)-1]
				st = st[:len(st)-1]
				return x
			}
			for i, c := range prog {
				num := float64(int(c)%7) - 3 // a number operand, −3..3
				switch op := int(c) % 50; {
				case op < len(leaves):
					st = append(st, leaves[op]())
				case op < 30:
					x := pop()
					unary := []func() loss.Expr{x.Neg, x.Abs, x.Sign, x.Square, x.Sqrt, x.Exp, x.Log, x.Tanh, x.Sigmoid,
						x.StopGradient, x.SeqSum, x.SeqMean, x.Sum, x.Mean,
						func() loss.Expr { return x.Clip(num, num+float64(i%3)) },
						func() loss.Expr { return x.Min(num) }, func() loss.Expr { return x.Max(num) },
						func() loss.Expr { return x.Add(num) }, func() loss.Expr { return x.Div(num) }}
					st = append(st, unary[op-len(leaves)]())
				case op < 49:
					y, x := pop(), pop()
					binary := []func(any) loss.Expr{x.Add, x.Sub, x.Mul, x.Div, x.Min, x.Max, x.GT, x.GE, x.LT, x.LE}
					var operand any = y
					if c >= 200 {
						operand = "bad"
					}
					st = append(st, binary[(op-30)%len(binary)](operand))
				default:
					bb, a, cond := pop(), pop(), pop()
					st = append(st, v.Where(cond, a, bb))
				}
			}
			return pop()
		}
		reg := loss.NewRegistry()
		if err := reg.Register("f", loss.Variant{Loss: l}); err != nil {
			t.Fatal(err)
		}
		res, err := loss.NewComputer(reg, loss.WithCacheSize(0)).Compute(loss.Config{Mode: "f", KLCoef: 0.1, EntropyCoef: 0.01}, b)
		if err != nil {
			for _, s := range sentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
			t.Fatalf("loss %v", res.Loss)
		}
		mask := b.Mask.Float32s()
		for _, g := range []*tensor.Dense{res.GradLogProbs, res.GradEntropy} {
			for i, x := range g.Float32s() {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || (mask[i] == 0 && x != 0) {
					t.Fatalf("grad[%d] = %v (mask %v)", i, x, mask[i])
				}
			}
		}
	})
}

// FuzzRolloutCorrection feeds arbitrary rollout-correction settings
// (verl's rollout_is, rollout_is_threshold, rollout_rs and
// rollout_rs_threshold strings, bypass_mode, loss_type) to Validate and
// Compute. Validate must never panic and must return nil or an error
// wrapping ErrConfig or ErrUnknownName; Compute must agree with it, and
// on a valid setting return a finite loss whose gradient vanishes on
// padding, and a masked fraction in [0, 1].
func FuzzRolloutCorrection(f *testing.F) {
	f.Add("sequence", 2.0, false, "seq_sum_k1", "0.5_2.0", false, "")
	f.Add("token", 1.5, true, "token_k1,seq_max_k3", "0.4_1.8,3.0", false, "ppo_clip")
	f.Add("", 0.0, false, "seq_mean_k1", "0.999_1.001", true, "reinforce")
	f.Add("token", -1.0, false, " token_k2 , ,token_k2", "nan", true, "pg")
	f.Add("geometric", 1e308, false, "seq_max_k1", "_2", false, "")
	f.Add("", 0.0, false, "seq_sum_k3,token_k1", "1e400,0.5_", false, "")
	b := losstest.RandomBatch(rand.New(rand.NewPCG(9, 9)), 3, 5)
	bypass := b
	bypass.RolloutLogProbs = nil
	f.Fuzz(func(t *testing.T, is string, isThr float64, norm bool, rs, rsThr string, bypassMode bool, lossType string) {
		rc := loss.RolloutCorrection{RolloutIS: loss.ISLevel(is), RolloutISThreshold: isThr, RolloutISBatchNormalize: norm,
			RolloutRS: rs, RolloutRSThreshold: rsThr, BypassMode: bypassMode, LossType: loss.BypassLoss(lossType)}
		verr := rc.Validate()
		if verr != nil && !errors.Is(verr, loss.ErrConfig) && !errors.Is(verr, loss.ErrUnknownName) {
			t.Fatalf("Validate: error wraps no sentinel: %v", verr)
		}
		in := b
		if bypassMode {
			in = bypass
		}
		res, err := loss.Compute(loss.Config{RolloutCorrection: rc}, in)
		if (err == nil) != (verr == nil) {
			t.Fatalf("Validate says %v, Compute says %v", verr, err)
		}
		if err != nil {
			return
		}
		if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
			t.Fatalf("loss %v", res.Loss)
		}
		mask := in.Mask.Float32s()
		for i, g := range res.GradLogProbs.Float32s() {
			if mask[i] == 0 && g != 0 {
				t.Fatalf("grad[%d] = %v on padding", i, g)
			}
		}
		if frac, ok := res.Metrics["rollout_corr/rollout_rs_masked_fraction"]; ok && (frac < 0 || frac > 1) {
			t.Fatalf("masked fraction %v", frac)
		}
	})
}
