package eval

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPassAtK(t *testing.T) {
	tests := []struct {
		name    string
		n, c, k int
		want    float64
	}{
		// 1 − C(3,2)/C(5,2) = 1 − 3/10 = 0.7.
		{"n5c2k2", 5, 2, 2, 0.7},
		// No correct sample: C(5,3)/C(5,3) = 1, pass@3 = 0.
		{"none correct", 5, 0, 3, 0},
		// All correct.
		{"all correct", 5, 5, 1, 1},
		// pass@1 is the fraction correct: 1/4.
		{"pass1 is c/n", 4, 1, 1, 0.25},
		// 1 − C(7,5)/C(10,5) = 1 − 21/252 = 11/12.
		{"n10c3k5", 10, 3, 5, 11.0 / 12},
		// n − c = 2 < k = 3: every 3-subset holds the correct one.
		{"n-c<k", 3, 1, 3, 1},
		// 1 − C(12,4)/C(16,4) = 1 − 495/1820 = 1325/1820.
		{"n16c4k4", 16, 4, 4, 1325.0 / 1820},
		// C(199,100)/C(200,100) = (200−100)/200 = 1/2, so pass@100 = 0.5
		// (the product form never forms the ~1e59 binomials).
		{"large n", 200, 1, 100, 0.5},
		// n − c = 990 < k = 1000: certain.
		{"k = n", 1000, 10, 1000, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PassAtK(tt.n, tt.c, tt.k)
			require.NoError(t, err)
			assert.InDelta(t, tt.want, got, 1e-12)
		})
	}
}

func TestPassAtKMidRange(t *testing.T) {
	// 1 − C(990,500)/C(1000,500) = 1 − Π_{i=991}^{1000}(1 − 500/i).
	// Each factor (i−500)/i lies in [491/991, 500/1000], so the product lies
	// in [(491/991)^10, 0.5^10] ⊂ [0.000893, 0.000977].
	got, err := PassAtK(1000, 10, 500)
	require.NoError(t, err)
	assert.Greater(t, got, 1-0.000977)
	assert.Less(t, got, 1-0.000893)
}

func TestPassAtKErrors(t *testing.T) {
	for _, tt := range []struct{ n, c, k int }{
		{5, 2, 0}, {5, 2, 6}, {5, 6, 2}, {5, -1, 2}, {0, 0, 1}, {-1, 0, 1},
	} {
		_, err := PassAtK(tt.n, tt.c, tt.k)
		require.ErrorIs(t, err, ErrInvalidK, "n=%d c=%d k=%d", tt.n, tt.c, tt.k)
	}
}

func TestKs(t *testing.T) {
	assert.Nil(t, Ks(0))
	assert.Equal(t, []int{1}, Ks(1))
	assert.Equal(t, []int{1, 2}, Ks(2))
	assert.Equal(t, []int{1, 2, 3}, Ks(3))
	assert.Equal(t, []int{1, 2, 4, 8}, Ks(8))
	assert.Equal(t, []int{1, 2, 4, 8, 10}, Ks(10))
	assert.Equal(t, []int{1, 2, 4, 8, 16}, Ks(16))
}

// twoPrompts is the fixture of the deterministic tests.
//
//	p1: acc 1 0 1 1, score 1 0 1 1, pred 7 3 7 7
//	p2: acc 0 0 1 0, score 0 0 1 0, pred 1 2 9 2
func twoPrompts() []Record {
	mk := func(id string, acc bool, pred string, tools float64) Record {
		s := 0.0
		if acc {
			s = 1
		}
		return Record{DataSource: "arith", PromptID: id, Score: s, Acc: acc, Pred: pred,
			Extra: map[string]float64{"tool_calls": tools}}
	}
	return []Record{
		mk("p1", true, "7", 1), mk("p1", false, "3", 0), mk("p1", true, "7", 1), mk("p1", true, "7", 2),
		mk("p2", false, "1", 1), mk("p2", false, "2", 1), mk("p2", true, "9", 1), mk("p2", false, "2", 1),
	}
}

func TestEvaluateDeterministicMetrics(t *testing.T) {
	res, err := Evaluate(context.Background(), twoPrompts(), DefaultConfig())
	require.NoError(t, err)
	get := func(v, name string) float64 {
		t.Helper()
		x, ok := res.Value("arith", v, name)
		require.True(t, ok, "%s %s", v, name)
		return x
	}
	sd := math.Sqrt(0.75 * 0.25) // population std of {1,0,1,1} and of {0,0,1,0}
	// mean@4 of acc: (3/4 + 1/4)/2 = 0.5.
	assert.InDelta(t, 0.5, get("acc", "mean@4"), 1e-15)
	assert.InDelta(t, sd, get("acc", "std@4"), 1e-15)
	assert.InDelta(t, 0.5, get("reward", "mean@4"), 1e-15)
	// tool_calls: p1 mean (1+0+1+2)/4 = 1, p2 mean 1; std p1 = sqrt((0+1+0+1)/4) = sqrt(0.5), p2 0.
	assert.InDelta(t, 1, get("tool_calls", "mean@4"), 1e-15)
	assert.InDelta(t, math.Sqrt(0.5)/2, get("tool_calls", "std@4"), 1e-15)
	// pass@1 = mean acc = 0.5.
	assert.InDelta(t, 0.5, get("acc", "pass@1"), 1e-15)
	// pass@2: p1 has n−c = 1 < 2 → 1; p2: 1 − C(3,2)/C(4,2) = 0.5; mean 0.75.
	assert.InDelta(t, 0.75, get("acc", "pass@2"), 1e-15)
	// pass@4: both prompts have a correct sample → 1.
	assert.InDelta(t, 1, get("acc", "pass@4"), 1e-15)
	// tool_calls of p2 is constant 1, of p1 in {0,1,2}: worst@4 ≤ 1, best@4 ≥ 1.
	assert.LessOrEqual(t, get("tool_calls", "worst@4/mean"), 1.0)
	assert.GreaterOrEqual(t, get("tool_calls", "best@4/mean"), 1.0)
	_, ok := res.Value("reward", "acc", "pass@1")
	assert.False(t, ok)
}

func TestEvaluateOrderAndSections(t *testing.T) {
	res, err := Evaluate(context.Background(), twoPrompts(), DefaultConfig())
	require.NoError(t, err)
	var keys []string
	for _, m := range res.Metrics {
		keys = append(keys, m.Key())
		assert.Equal(t, 2, m.Prompts, m.Key())
	}
	// Per variable: mean@4, std@4, then best/worst/maj at k = 2 and 4;
	// the acc variable adds pass@1, pass@2, pass@4 after them.
	perVar := []string{"mean@4", "std@4"}
	for _, k := range []string{"2", "4"} {
		perVar = append(perVar, "best@"+k+"/mean", "best@"+k+"/std", "worst@"+k+"/mean", "worst@"+k+"/std",
			"maj@"+k+"/mean", "maj@"+k+"/std")
	}
	var want []string
	for _, v := range []string{"reward", "acc", "tool_calls"} {
		for _, name := range perVar {
			section := "val-aux"
			// verl's val-core: acc's mean, maj and best at the largest n.
			if v == "acc" && (name == "mean@4" || name == "best@4/mean" || name == "best@4/std" ||
				name == "maj@4/mean" || name == "maj@4/std") {
				section = "val-core"
			}
			want = append(want, section+"/arith/"+v+"/"+name)
		}
		if v == "acc" {
			want = append(want, "val-aux/arith/acc/pass@1", "val-aux/arith/acc/pass@2", "val-aux/arith/acc/pass@4")
		}
	}
	assert.Equal(t, want, keys)
	assert.Len(t, res.Map(), len(want))
}

func TestEvaluatePromptOrderIndependent(t *testing.T) {
	recs := twoPrompts()
	swapped := append(append([]Record{}, recs[4:]...), recs[:4]...)
	a, err := Evaluate(context.Background(), recs, DefaultConfig())
	require.NoError(t, err)
	b, err := Evaluate(context.Background(), swapped, DefaultConfig())
	require.NoError(t, err)
	// The generator is re-seeded per prompt and k, and a sum of two terms
	// commutes exactly, so the results are identical.
	assert.Equal(t, a.Map(), b.Map())
}

func TestEvaluateSeedChangesDraws(t *testing.T) {
	a, err := Evaluate(context.Background(), twoPrompts(), Config{Seed: 1})
	require.NoError(t, err)
	b, err := Evaluate(context.Background(), twoPrompts(), Config{Seed: 2})
	require.NoError(t, err)
	va, _ := a.Value("arith", "acc", "best@2/mean")
	vb, _ := b.Value("arith", "acc", "best@2/mean")
	assert.NotEqual(t, va, vb)
	c, err := Evaluate(context.Background(), twoPrompts(), Config{Seed: 1})
	require.NoError(t, err)
	assert.Equal(t, a, c)
	// The zero Config is verl's: the same draws as DefaultConfig.
	z, err := Evaluate(context.Background(), twoPrompts(), Config{})
	require.NoError(t, err)
	d, err := Evaluate(context.Background(), twoPrompts(), DefaultConfig())
	require.NoError(t, err)
	assert.Equal(t, d, z)
}

func TestEvaluateSourcesRaggedAndSingle(t *testing.T) {
	recs := []Record{
		{PromptID: "a", Score: 1, Acc: true},                      // source "" → "unknown", n = 2
		{DataSource: "gsm", PromptID: "a", Score: 0.5, Acc: true}, // same id, other source, n = 1
		{PromptID: "a", Score: 0, Acc: false},
		{PromptID: "b", Score: 1, Acc: true}, // n = 4
		{PromptID: "b", Score: 1, Acc: true},
		{PromptID: "b", Score: 1, Acc: true},
		{PromptID: "b", Score: 0, Acc: false},
	}
	res, err := Evaluate(context.Background(), recs, DefaultConfig())
	require.NoError(t, err)
	byKey := map[string]Metric{}
	for _, m := range res.Metrics {
		byKey[m.Key()] = m
	}
	// "unknown": a has n = 2 (acc 1,0), b has n = 4 (acc 1,1,1,0).
	// mean@2 comes from a alone (0.5), mean@4 from b alone (0.75); verl
	// marks only the largest n as core.
	assert.Equal(t, Metric{Source: "unknown", Var: "acc", Name: "mean@2", K: 2, Value: 0.5, Prompts: 1},
		byKey["val-aux/unknown/acc/mean@2"])
	assert.Equal(t, Metric{Source: "unknown", Var: "acc", Name: "mean@4", K: 4, Value: 0.75, Prompts: 1, Core: true},
		byKey["val-core/unknown/acc/mean@4"])
	// pass@1 over both prompts: (0.5 + 0.75)/2; pass@2: a: 1 − C(1,2)/… = 1
	// (n − c = 1 < 2), b: 1 (n − c = 1 < 2).
	assert.InDelta(t, 0.625, byKey["val-aux/unknown/acc/pass@1"].Value, 1e-15)
	assert.Equal(t, 2, byKey["val-aux/unknown/acc/pass@1"].Prompts)
	assert.InDelta(t, 1, byKey["val-aux/unknown/acc/pass@2"].Value, 1e-15)
	// No Pred anywhere: no maj@k.
	for k := range byKey {
		assert.NotContains(t, k, "maj@")
	}
	// gsm: one sample → only mean@1 per variable and pass@1.
	var gsm []string
	for _, m := range res.Metrics {
		if m.Source == "gsm" {
			gsm = append(gsm, m.Key())
		}
	}
	assert.Equal(t, []string{"val-aux/gsm/reward/mean@1", "val-core/gsm/acc/mean@1", "val-aux/gsm/acc/pass@1"}, gsm)
	assert.Equal(t, "unknown", res.Metrics[0].Source)
}

func TestEvaluateErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Evaluate(ctx, nil, DefaultConfig())
	require.ErrorIs(t, err, ErrNoRecords)

	good := func() []Record { return twoPrompts() }
	tests := []struct {
		name   string
		mutate func([]Record)
		want   string
	}{
		{"NaN score", func(r []Record) { r[2].Score = math.NaN() }, "record 2"},
		{"Inf score", func(r []Record) { r[3].Score = math.Inf(-1) }, "record 3"},
		{"empty prompt", func(r []Record) { r[5].PromptID = "" }, "record 5: empty PromptID"},
		{"NaN extra", func(r []Record) { r[1].Extra = map[string]float64{"tool_calls": math.NaN()} }, `Extra "tool_calls" is NaN`},
		{"missing extra", func(r []Record) { r[4].Extra = map[string]float64{"turns": 1} }, `Extra field "tool_calls" missing`},
		{"extra count", func(r []Record) { r[6].Extra = nil }, "record 6"},
		{"reserved extra", func(r []Record) {
			for i := range r {
				r[i].Extra = map[string]float64{"acc": 1}
			}
		}, `Extra name "acc"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := good()
			tt.mutate(recs)
			_, err := Evaluate(ctx, recs, DefaultConfig())
			require.ErrorIs(t, err, ErrInvalidRecord)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err = Evaluate(ctx, good(), Config{Resamples: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = Evaluate(canceled, good(), DefaultConfig())
	require.ErrorIs(t, err, context.Canceled)
}

// exactBootstrap enumerates all n^k ordered draws of k indices out of n
// (each with probability n^-k) and returns the exact mean and variance of
// the max, the min and the majority value of vals. The majority rule is
// written independently of bootstrapWork.run, from verl's calc_maj_val:
// count the votes, the winner is the answer with the most votes that is
// drawn first, its value is the value at its first draw.
func exactBootstrap(vals []float64, preds []string, k int) (best, worst, maj [2]float64) {
	n := len(vals)
	total := int(math.Pow(float64(n), float64(k)))
	idx := make([]int, k)
	var sb, sb2, sw, sw2, sm, sm2 float64
	for t := range total {
		x := t
		for j := range k {
			idx[j] = x % n
			x /= n
		}
		hi, lo := math.Inf(-1), math.Inf(1)
		votes := map[string]int{}
		for _, i := range idx {
			hi = math.Max(hi, vals[i])
			lo = math.Min(lo, vals[i])
			votes[preds[i]]++
		}
		most := 0
		for _, c := range votes {
			most = max(most, c)
		}
		var mv float64
		for _, i := range idx {
			if votes[preds[i]] == most {
				mv = vals[i]
				break
			}
		}
		sb, sb2 = sb+hi, sb2+hi*hi
		sw, sw2 = sw+lo, sw2+lo*lo
		sm, sm2 = sm+mv, sm2+mv*mv
	}
	f := float64(total)
	moments := func(s, s2 float64) [2]float64 { return [2]float64{s / f, s2/f - (s/f)*(s/f)} }
	return moments(sb, sb2), moments(sw, sw2), moments(sm, sm2)
}

// checkBootstrap asserts that a bootstrap mean over b resamples lies
// within 5 standard errors (sd/√b) of the exact expectation, and the
// bootstrap std within 5 standard errors of the exact std.
func checkBootstrap(t *testing.T, label string, exact [2]float64, got bootStat, b int) {
	t.Helper()
	sd := math.Sqrt(math.Max(exact[1], 0))
	se := sd / math.Sqrt(float64(b))
	assert.InDelta(t, exact[0], got.mean, 5*se+1e-12, "%s mean", label)
	// For a bounded statistic with range ≤ 1 the fourth central moment is
	// ≤ var, so Var(s²) ≤ var/b and SE(s) ≤ sqrt(var/b)/(2·sd) = 1/(2√b).
	assert.InDelta(t, sd, got.std, 5/(2*math.Sqrt(float64(b)))+1e-12, "%s std", label)
}

func TestBootstrapMatchesExactExpectation(t *testing.T) {
	type prompt struct {
		vals  []float64
		preds []string
	}
	cases := map[string]prompt{
		// p1 of twoPrompts: acc 1 0 1 1, pred 7 3 7 7.
		"binary": {[]float64{1, 0, 1, 1}, []string{"7", "3", "7", "7"}},
		// Distinct values and a three-way vote with ties.
		"scores": {[]float64{0.1, 0.9, 0.4, 0.7, 0.2}, []string{"a", "b", "a", "c", "b"}},
		// All answers differ: every vote is a tie, won by the first draw.
		"all ties": {[]float64{0.3, 0.6, 0.9}, []string{"x", "y", "z"}},
	}
	for name, c := range cases {
		for _, k := range Ks(len(c.vals))[1:] {
			for _, b := range []int{1000, 20000} {
				t.Run(name+"/k"+strconv.Itoa(k)+"/b"+strconv.Itoa(b), func(t *testing.T) {
					p := promptOf(c.vals, c.preds)
					var w bootstrapWork
					got := w.run(p, k, b, DefaultSeed, true)
					best, worst, maj := exactBootstrap(c.vals, c.preds, k)
					checkBootstrap(t, "best", best, got.best[0], b)
					checkBootstrap(t, "worst", worst, got.worst[0], b)
					checkBootstrap(t, "maj", maj, got.maj[0], b)
				})
			}
		}
	}
}

func TestBootstrapHandDerived(t *testing.T) {
	// p1 of twoPrompts: n = 4, c = 3, preds 7 3 7 7 (7 is correct).
	p := promptOf([]float64{1, 0, 1, 1}, []string{"7", "3", "7", "7"})
	const b = 100000
	var w bootstrapWork
	// best@2 = 1 − (1/4)^2 = 0.9375; worst@2 = (3/4)^2 = 0.5625; maj@2 is
	// the value of the first draw (a 1–1 tie goes to the first), so 3/4.
	r := w.run(p, 2, b, 7, true)
	checkBootstrap(t, "best@2", [2]float64{0.9375, 0.9375 * 0.0625}, r.best[0], b)
	checkBootstrap(t, "worst@2", [2]float64{0.5625, 0.5625 * 0.4375}, r.worst[0], b)
	checkBootstrap(t, "maj@2", [2]float64{0.75, 0.75 * 0.25}, r.maj[0], b)
	// maj@4: X = number of "3" draws ~ Bin(4, 1/4). "3" wins for X ≥ 3
	// (12/256 + 1/256) and for X = 2 when a "3" is drawn first (half of
	// 54/256). P(win 3) = 40/256, so maj@4 = 216/256 = 0.84375.
	r = w.run(p, 4, b, 7, true)
	checkBootstrap(t, "maj@4", [2]float64{0.84375, 0.84375 * 0.15625}, r.maj[0], b)
	// best@4 = 1 − (1/4)^4, worst@4 = (3/4)^4.
	checkBootstrap(t, "best@4", [2]float64{1 - 1.0/256, (1 - 1.0/256) / 256}, r.best[0], b)
	checkBootstrap(t, "worst@4", [2]float64{81.0 / 256, 81.0 / 256 * 175 / 256}, r.worst[0], b)
}

// promptOf builds a one-variable prompt for the bootstrap tests.
func promptOf(vals []float64, preds []string) *evalPrompt {
	p := &evalPrompt{vars: [][]float64{vals}}
	ids := map[string]int{}
	for _, s := range preds {
		id, ok := ids[s]
		if !ok {
			id = len(ids)
			ids[s] = id
		}
		p.preds = append(p.preds, id)
	}
	p.npred = len(ids)
	return p
}

func BenchmarkEvaluate500x16(b *testing.B) {
	recs := benchRecords(500, 16)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Evaluate(ctx, recs, DefaultConfig()); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRecords makes prompts × samples records with a deterministic mix of
// scores, answers and tool calls.
func benchRecords(prompts, samples int) []Record {
	recs := make([]Record, 0, prompts*samples)
	for p := range prompts {
		for s := range samples {
			h := (p*7919 + s*104729) % 97
			acc := h%3 == 0
			score := 0.0
			if acc {
				score = 1
			}
			recs = append(recs, Record{
				DataSource: "bench", PromptID: "p" + strconv.Itoa(p), Score: score, Acc: acc,
				Pred:  strconv.Itoa(h % 5),
				Extra: map[string]float64{"tool_calls": float64(h % 4)},
			})
		}
	}
	return recs
}

// FuzzEvaluate checks invariants on arbitrary small evaluations: every
// metric is finite, means lie within the range of the values, best@k ≥
// worst@k, and pass@k does not fall as k grows.
func FuzzEvaluate(f *testing.F) {
	f.Add(uint8(4), []byte{1, 0, 1, 1, 0, 0, 2, 0})
	f.Add(uint8(1), []byte{9})
	f.Add(uint8(3), []byte{0, 0, 0, 255, 255, 255, 7})
	f.Fuzz(func(t *testing.T, n uint8, data []byte) {
		samples := int(n%8) + 1
		if len(data) == 0 || len(data) > 64 {
			return
		}
		var recs []Record
		for i, b := range data {
			recs = append(recs, Record{
				PromptID: strconv.Itoa(i / samples), Score: float64(b) / 255, Acc: b%2 == 1,
				Pred: strconv.Itoa(int(b % 3)), Extra: map[string]float64{"len": float64(b)},
			})
		}
		res, err := Evaluate(context.Background(), recs, Config{Resamples: 50, Seed: uint64(n)})
		require.NoError(t, err)
		hi := map[string]float64{"reward": 1, "acc": 1, "len": 255}
		pass := map[int]float64{}
		for _, m := range res.Metrics {
			require.False(t, math.IsNaN(m.Value) || math.IsInf(m.Value, 0), m.Key())
			require.GreaterOrEqual(t, m.Value, -1e-12, m.Key())
			require.LessOrEqual(t, m.Value, hi[m.Var]+1e-9, m.Key())
			if strings.HasPrefix(m.Name, "pass@") {
				pass[m.K] = m.Value
			}
		}
		for _, v := range []string{"reward", "acc", "len"} {
			for _, k := range Ks(samples)[1:] {
				ks := strconv.Itoa(k)
				best, okB := res.Value("unknown", v, "best@"+ks+"/mean")
				worst, okW := res.Value("unknown", v, "worst@"+ks+"/mean")
				if okB && okW {
					require.GreaterOrEqual(t, best, worst-1e-12)
				}
			}
		}
		if len(data)%samples == 0 { // every prompt has n = samples
			ks := Ks(samples)
			for i := 1; i < len(ks); i++ {
				require.GreaterOrEqual(t, pass[ks[i]], pass[ks[i-1]]-1e-12)
			}
		}
	})
}

func TestEvaluateBootstrapEndToEnd(t *testing.T) {
	// One prompt through Evaluate: the aggregated best@4, worst@4 and
	// maj@4 of the reward agree with the exact enumeration.
	vals := []float64{0.1, 0.9, 0.4, 0.7, 0.2}
	preds := []string{"a", "b", "a", "c", "b"}
	var recs []Record
	for i := range vals {
		recs = append(recs, Record{DataSource: "s", PromptID: "q", Score: vals[i], Pred: preds[i]})
	}
	const b = 20000
	res, err := Evaluate(context.Background(), recs, Config{Resamples: b, Seed: 3})
	require.NoError(t, err)
	best, worst, maj := exactBootstrap(vals, preds, 4)
	for _, c := range []struct {
		name  string
		exact [2]float64
	}{{"best@4", best}, {"worst@4", worst}, {"maj@4", maj}} {
		m, ok := res.Value("s", VarReward, c.name+"/mean")
		require.True(t, ok)
		s, ok := res.Value("s", VarReward, c.name+"/std")
		require.True(t, ok)
		checkBootstrap(t, c.name, c.exact, bootStat{mean: m, std: s}, b)
	}
}

func TestMajorityDrawTieBreak(t *testing.T) {
	// Samples 0..4 with answers a b a c b (ids 0 1 0 2 1).
	preds := []int{0, 1, 0, 2, 1}
	tests := []struct {
		name  string
		draws []int
		want  int
	}{
		// b a b a: a 2–2 tie; b was drawn first, its first draw is sample 1.
		{"tie to first drawn", []int{1, 0, 4, 2}, 1},
		// a b b a: tie, a first drawn at sample 0.
		{"tie other order", []int{0, 1, 4, 2}, 0},
		// c a a: a wins 2–1; its first draw is sample 2.
		{"majority", []int{3, 2, 0}, 2},
		// c b a: a three-way tie goes to the first draw, c.
		{"all differ", []int{3, 4, 0}, 3},
		// one draw.
		{"single", []int{4}, 4},
	}
	w := &bootstrapWork{counts: make([]int, 3), first: make([]int, 3)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w.draws = tt.draws
			assert.Equal(t, tt.want, w.majorityDraw(preds))
			assert.Equal(t, []int{0, 0, 0}, w.counts, "counts left zero")
		})
	}
}
