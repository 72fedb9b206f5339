package losstest

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/loss"
)

// Evaluator is what the checks run against; *loss.Computer implements it.
type Evaluator interface {
	// Compute evaluates the loss and its gradients.
	Compute(cfg loss.Config, b loss.Batch) (loss.Result, error)
	// Surrogate evaluates, at the batch at, the objective whose gradient
	// Compute reports at base (StopGradient terms held at their values at
	// base). See loss.Computer.Surrogate.
	Surrogate(cfg loss.Config, base, at loss.Batch) (float64, error)
}

// RandomBatch returns a [rows, cols] batch with every optional input set:
// ragged row lengths, a mask-0 gap inside the first row (a tool-output
// span) and, when rows >= 3, one row that is all padding. Values are
// float32 and finite: log-probs in (−∞, −0.05], the old, reference and
// rollout log-probs within a few tenths of them, standard-normal
// advantages and entropies in [0.1, 3).
func RandomBatch(rng *rand.Rand, rows, cols int) loss.Batch {
	n := rows * cols
	lp, old, ref, roll, adv, mask, ent := make([]float32, n), make([]float32, n), make([]float32, n),
		make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for r := range rows {
		length := cols - r%cols // ragged: cols, cols−1, ...
		if rows >= 3 && r == rows-1 {
			length = 0
		}
		for t := range length {
			mask[r*cols+t] = 1
		}
	}
	if cols >= 3 {
		mask[1] = 0
	}
	for i := range n {
		lp[i] = float32(-math.Abs(rng.NormFloat64())*0.7 - 0.05)
		old[i] = lp[i] + float32(0.4*rng.NormFloat64())
		ref[i] = lp[i] + float32(0.3*rng.NormFloat64())
		roll[i] = old[i] + float32(0.3*rng.NormFloat64())
		adv[i] = float32(rng.NormFloat64())
		ent[i] = float32(0.1 + 2.9*rng.Float64())
	}
	return loss.Batch{
		LogProbs: dense(rows, cols, lp), OldLogProbs: dense(rows, cols, old), Advantages: dense(rows, cols, adv),
		Mask: dense(rows, cols, mask), RefLogProbs: dense(rows, cols, ref), RolloutLogProbs: dense(rows, cols, roll),
		Entropy: dense(rows, cols, ent),
	}
}

// CheckGradient compares Result.GradLogProbs and Result.GradEntropy with
// central finite differences of the surrogate objective,
// (S(x+h) − S(x−h)) / (x₊ − x₋), evaluated in float64 with h = 1e-3 and
// the exact float32 step x₊ − x₋. Positions where the one-sided
// differences disagree (a clip or clamp boundary lies within h) are
// skipped; the check fails if more than half are skipped, or if any
// other position differs by more than 2e-5 + 1e-3·|fd|.
func CheckGradient(e Evaluator, cfg loss.Config, b loss.Batch) error {
	res, err := e.Compute(cfg, b)
	if err != nil {
		return fmt.Errorf("losstest: CheckGradient: %w", err)
	}
	base, err := e.Surrogate(cfg, b, b)
	if err != nil {
		return fmt.Errorf("losstest: CheckGradient: %w", err)
	}
	if !near(base, res.Loss, 1e-12, 1e-9) {
		return fmt.Errorf("losstest: CheckGradient: Surrogate at the base point = %v, Compute.Loss = %v", base, res.Loss)
	}
	type target struct {
		name string
		pick func(loss.Batch) *tensor.Dense
		grad *tensor.Dense
	}
	targets := []target{{"LogProbs", func(x loss.Batch) *tensor.Dense { return x.LogProbs }, res.GradLogProbs}}
	if res.GradEntropy != nil {
		targets = append(targets, target{"Entropy", func(x loss.Batch) *tensor.Dense { return x.Entropy }, res.GradEntropy})
	}
	cols := b.LogProbs.Shape()[1]
	var checked, skipped int
	for _, tg := range targets {
		grad := tg.grad.Float32s()
		for i := range grad {
			p := cloneBatch(b)
			data := tg.pick(p).Float32s()
			x := data[i]
			xp, xm := x+1e-3, x-1e-3
			data[i] = xp
			up, err := e.Surrogate(cfg, b, p)
			if err != nil {
				return fmt.Errorf("losstest: CheckGradient: %s[%d,%d]+h: %w", tg.name, i/cols, i%cols, err)
			}
			data[i] = xm
			down, err := e.Surrogate(cfg, b, p)
			if err != nil {
				return fmt.Errorf("losstest: CheckGradient: %s[%d,%d]−h: %w", tg.name, i/cols, i%cols, err)
			}
			fwd := (up - base) / float64(xp-x)
			bwd := (base - down) / float64(x-xm)
			if math.Abs(fwd-bwd) > 0.05*math.Max(math.Abs(fwd), math.Abs(bwd))+1e-6 {
				skipped++ // a kink within h: finite differences say nothing here
				continue
			}
			checked++
			fd := (up - down) / float64(xp-xm)
			if g := float64(grad[i]); !near(g, fd, 2e-5, 1e-3) {
				return fmt.Errorf("losstest: CheckGradient: d loss/d %s[%d,%d] = %v, finite differences give %v",
					tg.name, i/cols, i%cols, g, fd)
			}
		}
	}
	if skipped > checked {
		return fmt.Errorf("losstest: CheckGradient: %d of %d positions sit on a kink; the batch cannot test this objective",
			skipped, checked+skipped)
	}
	return nil
}

// CheckPadding verifies that padding changes nothing: rewriting every
// mask-0 position of every input with other finite values, and appending
// three padded columns, leave the loss, the metrics and the gradients at
// the real positions unchanged, and the gradients at padded positions zero.
// With "seq-mean-token-sum-norm" and no AggDivisor the divisor would follow
// T, so the check pins AggDivisor to the original T.
func CheckPadding(e Evaluator, cfg loss.Config, b loss.Batch, rng *rand.Rand) error {
	cols := b.LogProbs.Shape()[1]
	if cfg.AggDivisor == 0 {
		cfg.AggDivisor = float64(cols)
	}
	ref, err := e.Compute(cfg, b)
	if err != nil {
		return fmt.Errorf("losstest: CheckPadding: %w", err)
	}
	mask := b.Mask.Float32s()
	if err := zeroAtPadding("original batch", ref, mask, cols); err != nil {
		return err
	}

	scrambled := cloneBatch(b)
	for _, t := range fieldsOf(&scrambled) {
		if *t == nil || t == &scrambled.Mask {
			continue
		}
		data := (*t).Float32s()
		for i, m := range mask {
			if m == 0 {
				data[i] = float32(-3 * rng.Float64())
			}
		}
	}
	got, err := e.Compute(cfg, scrambled)
	if err != nil {
		return fmt.Errorf("losstest: CheckPadding: scrambled padding: %w", err)
	}
	if err := sameResult("scrambled padding", ref, got, cols, cols); err != nil {
		return err
	}

	const extra = 3
	wide := widenBatch(b, extra, rng)
	got, err = e.Compute(cfg, wide)
	if err != nil {
		return fmt.Errorf("losstest: CheckPadding: %d padded columns: %w", extra, err)
	}
	if err := zeroAtPadding("padded columns", got, wide.Mask.Float32s(), cols+extra); err != nil {
		return err
	}
	return sameResult(fmt.Sprintf("%d padded columns", extra), ref, got, cols, cols+extra)
}

// CheckZeroAdvantage verifies that with A = 0 everywhere, and no entropy
// or KL term, the policy loss and its gradient vanish.
func CheckZeroAdvantage(e Evaluator, cfg loss.Config, b loss.Batch) error {
	cfg.EntropyCoef, cfg.KLCoef = 0, 0
	z := cloneBatch(b)
	adv := z.Advantages.Float32s()
	for i := range adv {
		adv[i] = 0
	}
	res, err := e.Compute(cfg, z)
	if err != nil {
		return fmt.Errorf("losstest: CheckZeroAdvantage: %w", err)
	}
	if pg := res.Metrics["pg_loss"]; math.Abs(pg) > 1e-12 || math.Abs(res.Loss) > 1e-12 {
		return fmt.Errorf("losstest: CheckZeroAdvantage: loss %v, pg_loss %v at A = 0, want 0", res.Loss, pg)
	}
	cols := b.LogProbs.Shape()[1]
	for i, g := range res.GradLogProbs.Float32s() {
		if g != 0 {
			return fmt.Errorf("losstest: CheckZeroAdvantage: d loss/d LogProbs[%d,%d] = %v at A = 0, want 0", i/cols, i%cols, g)
		}
	}
	return nil
}

// CheckREINFORCE verifies that at ratio 1 (OldLogProbs = LogProbs), with
// sequence-level advantages, no TIS and no entropy or KL term, the
// gradient is the REINFORCE gradient −A·w, where w is the weight agg gives
// the token: 1/N for "token-mean" over N tokens, 1/S for
// "seq-mean-token-sum" over S non-empty rows, 1/(S·D) for
// "seq-mean-token-sum-norm" with divisor D, 1/(S·n_b) for
// "seq-mean-token-mean" with n_b tokens in the row. agg is the aggregation
// the objective applies to its policy term: its Variant.Agg, else
// Config.Agg ("seq-mean-token-mean" for gspo, sapo and geo_mean; Config.Agg
// for vanilla, cispo and gpg). Rows without tokens get one, so that
// geo_mean's mean over all rows is a mean over non-empty rows. Only an
// objective that declares Variant.ReducesToREINFORCE need pass it.
func CheckREINFORCE(e Evaluator, cfg loss.Config, b loss.Batch, agg loss.Agg) error {
	cfg.EntropyCoef, cfg.KLCoef, cfg.TISCap = 0, 0, 0
	rows, cols := b.LogProbs.Shape()[0], b.LogProbs.Shape()[1]
	r := cloneBatch(b)
	copy(r.OldLogProbs.Float32s(), r.LogProbs.Float32s())
	mask, adv := r.Mask.Float32s(), r.Advantages.Float32s()
	for row := range rows {
		m := mask[row*cols : (row+1)*cols]
		if !has1(m) {
			m[0] = 1
		}
		a := adv[row*cols : (row+1)*cols]
		for t := range a {
			a[t] = a[0]
		}
	}
	res, err := e.Compute(cfg, r)
	if err != nil {
		return fmt.Errorf("losstest: CheckREINFORCE: %w", err)
	}
	divisor := cfg.AggDivisor
	if divisor == 0 {
		divisor = float64(cols)
	}
	var total, seqs float64
	counts := make([]float64, rows)
	for row := range rows {
		for _, m := range mask[row*cols : (row+1)*cols] {
			counts[row] += float64(m)
		}
		total += counts[row]
		if counts[row] > 0 {
			seqs++
		}
	}
	grad := res.GradLogProbs.Float32s()
	for i, g := range grad {
		row := i / cols
		var w float64
		switch agg {
		case loss.AggTokenMean:
			w = 1 / total
		case loss.AggSeqMeanTokenSum:
			w = 1 / seqs
		case loss.AggSeqMeanTokenSumNorm:
			w = 1 / seqs / divisor
		case loss.AggSeqMeanTokenMean:
			w = 1 / seqs / counts[row]
		default:
			return fmt.Errorf("losstest: CheckREINFORCE: unknown aggregation %q", agg)
		}
		want := -float64(adv[i]) * float64(mask[i]) * w
		if !near(float64(g), want, 1e-7, 1e-5) {
			return fmt.Errorf("losstest: CheckREINFORCE: d loss/d LogProbs[%d,%d] = %v, want −A·w = %v (agg %s)", row, i%cols, g, want, agg)
		}
	}
	return nil
}

// VariantEvaluator is an Evaluator that also says which Variant a mode
// names, so that the checks can read the properties it declares;
// *loss.Computer implements it.
type VariantEvaluator interface {
	Evaluator
	// Lookup returns the variant registered under name.
	Lookup(name loss.Mode) (loss.Variant, bool)
}

// Check runs, on random batches (seeded, so failures reproduce), the
// checks every objective must pass and those its Variant declares, and
// returns their failures joined (errors.Join), or nil:
//
//   - CheckPadding and CheckZeroAdvantage on a 4×6 and a 3×5 batch;
//   - CheckGradient, the costly one, on the 3×5 batch;
//   - CheckREINFORCE on both batches if the variant declares
//     ReducesToREINFORCE, with its Agg (or cfg.Agg, or "token-mean").
//
// cfg.Mode names the variant (empty means "vanilla", as in Compute).
func Check(e VariantEvaluator, cfg loss.Config) error {
	checks, err := suite(e, cfg)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range checks {
		if err := c.run(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// CheckAll runs the checks of Check as subtests of t, named after the
// batch shape and the check ("3x5/gradient", "4x6/reinforce", ...).
func CheckAll(t *testing.T, e VariantEvaluator, cfg loss.Config) {
	t.Helper()
	checks, err := suite(e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(); err != nil {
				t.Error(err)
			}
		})
	}
}

// namedCheck is one check of the suite on one batch.
type namedCheck struct {
	name string
	run  func() error
}

// suite lists the checks Check and CheckAll run for cfg.
func suite(e VariantEvaluator, cfg loss.Config) ([]namedCheck, error) {
	mode := cmp.Or(cfg.Mode, loss.ModeVanilla)
	v, ok := e.Lookup(mode)
	if !ok {
		return nil, fmt.Errorf("losstest: mode %q is not registered: %w", mode, loss.ErrUnknownName)
	}
	agg := cmp.Or(v.Agg, cfg.Agg, loss.AggTokenMean)
	var checks []namedCheck
	for si, sh := range [][2]int{{4, 6}, {3, 5}} {
		seed := uint64(1000*si + 7)
		b := RandomBatch(rand.New(rand.NewPCG(seed, 1)), sh[0], sh[1])
		name := fmt.Sprintf("%dx%d/", sh[0], sh[1])
		if sh[0] == 3 {
			checks = append(checks, namedCheck{name + "gradient", func() error { return CheckGradient(e, cfg, b) }})
		}
		checks = append(checks,
			namedCheck{name + "padding", func() error { return CheckPadding(e, cfg, b, rand.New(rand.NewPCG(seed, 2))) }},
			namedCheck{name + "zero-advantage", func() error { return CheckZeroAdvantage(e, cfg, b) }})
		if v.ReducesToREINFORCE {
			checks = append(checks, namedCheck{name + "reinforce", func() error { return CheckREINFORCE(e, cfg, b, agg) }})
		}
	}
	return checks, nil
}

// Rows is a batch as plain slices, B rows of T values per tensor, for
// writing a batch by hand (Rows.Batch) and reading one (RowsOf). A nil
// field is an absent optional tensor.
type Rows struct {
	LogProbs, OldLogProbs, Advantages, Mask [][]float32
	RefLogProbs, RolloutLogProbs, Entropy   [][]float32
}

// fields lists r's fields with their names, in loss.Batch's order.
func (r *Rows) fields() []struct {
	name string
	v    *[][]float32
} {
	return []struct {
		name string
		v    *[][]float32
	}{
		{"LogProbs", &r.LogProbs}, {"OldLogProbs", &r.OldLogProbs}, {"Advantages", &r.Advantages}, {"Mask", &r.Mask},
		{"RefLogProbs", &r.RefLogProbs}, {"RolloutLogProbs", &r.RolloutLogProbs}, {"Entropy", &r.Entropy},
	}
}

// Batch returns r as a loss.Batch of new [B,T] float32 tensors. LogProbs,
// OldLogProbs, Advantages and Mask are required (loss.ErrMissing); B and
// T must be positive (loss.ErrEmptyBatch), and every row of every field
// must have LogProbs' shape (loss.ErrShape). Values are copied as they
// are: loss.Compute checks that they are finite and the mask 0 or 1.
func (r Rows) Batch() (loss.Batch, error) {
	rows := len(r.LogProbs)
	if rows == 0 || len(r.LogProbs[0]) == 0 {
		return loss.Batch{}, fmt.Errorf("losstest: Rows.Batch: LogProbs has %d rows of %d values: %w", rows, firstLen(r.LogProbs), loss.ErrEmptyBatch)
	}
	cols := len(r.LogProbs[0])
	var b loss.Batch
	dst := fieldsOf(&b)
	for i, f := range r.fields() {
		v := *f.v
		if v == nil {
			if i < 4 {
				return loss.Batch{}, fmt.Errorf("losstest: Rows.Batch: %s is nil: %w", f.name, loss.ErrMissing)
			}
			continue
		}
		if len(v) != rows {
			return loss.Batch{}, fmt.Errorf("losstest: Rows.Batch: %s has %d rows, LogProbs has %d: %w", f.name, len(v), rows, loss.ErrShape)
		}
		data := make([]float32, 0, rows*cols)
		for j, row := range v {
			if len(row) != cols {
				return loss.Batch{}, fmt.Errorf("losstest: Rows.Batch: %s row %d has %d values, LogProbs row 0 has %d: %w",
					f.name, j, len(row), cols, loss.ErrShape)
			}
			data = append(data, row...)
		}
		*dst[i] = dense(rows, cols, data)
	}
	return b, nil
}

// RowsOf copies b's tensors into Rows; absent optional tensors stay nil.
// A tensor that is not a [B,T] float32 tensor in host memory is an error
// (loss.ErrShape).
func RowsOf(b loss.Batch) (Rows, error) {
	var r Rows
	src := fieldsOf(&b)
	for i, f := range r.fields() {
		if *src[i] == nil {
			continue
		}
		v, err := Values(*src[i])
		if err != nil {
			return Rows{}, fmt.Errorf("losstest: RowsOf: Batch.%s: %w", f.name, err)
		}
		*f.v = v
	}
	return r, nil
}

// Values copies a [B,T] float32 tensor, such as a Batch field or
// loss.Result.GradLogProbs, into B rows of T values. A nil tensor, or one
// that is not a [B,T] float32 tensor in host memory, is an error
// (loss.ErrMissing, loss.ErrShape).
func Values(t *tensor.Dense) ([][]float32, error) {
	switch {
	case t == nil:
		return nil, fmt.Errorf("losstest: Values: nil tensor: %w", loss.ErrMissing)
	case t.Dtype().Type == nil:
		return nil, fmt.Errorf("losstest: Values: uninitialised tensor.Dense: %w", loss.ErrShape)
	case t.Dtype() != tensor.Float32:
		return nil, fmt.Errorf("losstest: Values: dtype %v, want float32: %w", t.Dtype(), loss.ErrShape)
	case t.Shape().Dims() != 2:
		return nil, fmt.Errorf("losstest: Values: shape %v, want [B,T]: %w", t.Shape(), loss.ErrShape)
	case !t.IsNativelyAccessible() || t.RequiresIterator():
		return nil, fmt.Errorf("losstest: Values: a view or not in host memory: %w", loss.ErrShape)
	}
	rows, cols := t.Shape()[0], t.Shape()[1]
	data := t.Float32s()
	if len(data) != rows*cols {
		return nil, fmt.Errorf("losstest: Values: %d values for shape %v: %w", len(data), t.Shape(), loss.ErrShape)
	}
	out := make([][]float32, rows)
	for r := range out {
		out[r] = append([]float32(nil), data[r*cols:(r+1)*cols]...)
	}
	return out, nil
}

func firstLen(v [][]float32) int {
	if len(v) == 0 {
		return 0
	}
	return len(v[0])
}

// sameResult compares two results on the first cols columns; a has acols
// columns, b has bcols.
func sameResult(what string, a, b loss.Result, acols, bcols int) error {
	if !near(a.Loss, b.Loss, 1e-12, 1e-9) {
		return fmt.Errorf("losstest: CheckPadding: %s changed the loss from %v to %v", what, a.Loss, b.Loss)
	}
	keys := make([]string, 0, len(a.Metrics))
	for k := range a.Metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !near(a.Metrics[k], b.Metrics[k], 1e-12, 1e-9) {
			return fmt.Errorf("losstest: CheckPadding: %s changed metric %q from %v to %v", what, k, a.Metrics[k], b.Metrics[k])
		}
	}
	for _, g := range []struct {
		name string
		x, y *tensor.Dense
	}{{"LogProbs", a.GradLogProbs, b.GradLogProbs}, {"Entropy", a.GradEntropy, b.GradEntropy}} {
		if g.x == nil || g.y == nil {
			if (g.x == nil) != (g.y == nil) {
				return fmt.Errorf("losstest: CheckPadding: %s: gradient wrt %s present in one result only", what, g.name)
			}
			continue
		}
		xs, ys := g.x.Float32s(), g.y.Float32s()
		rows := len(xs) / acols
		for r := range rows {
			for c := range acols {
				x, y := xs[r*acols+c], ys[r*bcols+c]
				if !near(float64(x), float64(y), 1e-9, 1e-6) {
					return fmt.Errorf("losstest: CheckPadding: %s changed d loss/d %s[%d,%d] from %v to %v", what, g.name, r, c, x, y)
				}
			}
		}
	}
	return nil
}

func zeroAtPadding(what string, r loss.Result, mask []float32, cols int) error {
	for _, g := range []struct {
		name string
		d    *tensor.Dense
	}{{"LogProbs", r.GradLogProbs}, {"Entropy", r.GradEntropy}} {
		if g.d == nil {
			continue
		}
		for i, v := range g.d.Float32s() {
			if mask[i] == 0 && v != 0 {
				return fmt.Errorf("losstest: CheckPadding: %s: d loss/d %s[%d,%d] = %v at a padding position, want 0", what, g.name, i/cols, i%cols, v)
			}
		}
	}
	return nil
}

func near(got, want, atol, rtol float64) bool {
	return math.Abs(got-want) <= atol+rtol*math.Abs(want)
}

func has1(m []float32) bool {
	for _, v := range m {
		if v != 0 {
			return true
		}
	}
	return false
}

func dense(rows, cols int, v []float32) *tensor.Dense {
	return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(v))
}

func fieldsOf(b *loss.Batch) []**tensor.Dense {
	return []**tensor.Dense{&b.LogProbs, &b.OldLogProbs, &b.Advantages, &b.Mask, &b.RefLogProbs, &b.RolloutLogProbs, &b.Entropy}
}

// cloneBatch deep-copies every tensor of b.
func cloneBatch(b loss.Batch) loss.Batch {
	c := b
	for _, t := range fieldsOf(&c) {
		if *t != nil {
			sh := (*t).Shape()
			*t = dense(sh[0], sh[1], append([]float32(nil), (*t).Float32s()...))
		}
	}
	return c
}

// widenBatch appends extra mask-0 columns holding random finite values.
func widenBatch(b loss.Batch, extra int, rng *rand.Rand) loss.Batch {
	c := b
	isMask := func(t **tensor.Dense) bool { return t == &c.Mask }
	for _, t := range fieldsOf(&c) {
		if *t == nil {
			continue
		}
		sh := (*t).Shape()
		rows, cols := sh[0], sh[1]
		src := (*t).Float32s()
		out := make([]float32, rows*(cols+extra))
		for r := range rows {
			copy(out[r*(cols+extra):], src[r*cols:(r+1)*cols])
			for k := range extra {
				if !isMask(t) {
					out[r*(cols+extra)+cols+k] = float32(-2 * rng.Float64())
				}
			}
		}
		*t = dense(rows, cols+extra, out)
	}
	return c
}
