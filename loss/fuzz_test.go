package loss_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/loss"
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
