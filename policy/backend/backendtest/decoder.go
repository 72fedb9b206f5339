package backendtest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// Decoder checks a backend.Decoder (run by Run when the backend is one):
// the paged KV cache (DecoderKV), device sampling (DecoderSampling) and
// the errors of bad calls (DecoderErrors).
func Decoder(t *testing.T, b backend.Backend, tol Tolerance) {
	t.Run("KV", func(t *testing.T) { DecoderKV(t, b, tol) })
	t.Run("Sampling", func(t *testing.T) { DecoderSampling(t, b, tol) })
	t.Run("TopLogprobs", func(t *testing.T) { DecoderTopLogprobs(t, b, tol) })
	t.Run("Errors", func(t *testing.T) { DecoderErrors(t, b, tol) })
}

// pagedSeq is a sequence of the KV check as the reference sees it: its
// keys and values per layer, position after position, and its blocks.
type pagedSeq struct {
	k, v   [][]float64 // [layer][pos·width + c]
	blocks []int32
}

// DecoderKV runs three forward steps over a paged cache of 16 blocks of 4
// rows (2 layers, 2 KV heads of dim 8, 4 query heads): prefills of 6 and
// 3 rows in scattered blocks beside a row in no sequence; then a decode
// row, a prefill chunk of 5 continuing a sequence, and a new sequence;
// then a sequence that shares the first block of an earlier one and a
// copy (CopyKVBlocks) of its partly filled second block, which it
// overwrites from its own position 6 on. After each step's AppendKV,
// PagedAttention of every layer must equal causal attention over each
// sequence's keys and values laid out contiguously (refAttention), and
// rows in no sequence must be zero.
func DecoderKV(t *testing.T, b backend.Backend, tol Tolerance) {
	d := b.(backend.Decoder)
	e := newEnv(t, b, tol, 140)
	spec := backend.KVCacheSpec{Layers: 2, KVHeads: 2, HeadDim: 8, BlockSize: 4, Blocks: 16}
	a := backend.Attention{Heads: 4, KVHeads: 2, HeadDim: 8}
	a.Scale = float32(1 / math.Sqrt(float64(a.HeadDim)))
	w, qw := spec.Width(), a.Heads*a.HeadDim
	bytes, err := d.KVBlockBytes(spec)
	require.NoError(t, err)
	// At least 2 bytes (bfloat16) per value: 2 · 2 layers · 4 rows · 16.
	require.GreaterOrEqual(t, bytes, int64(2*2*2*4*16))
	c, err := d.NewKVCache(spec)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.FreeKVCache(c)) }()
	require.Equal(t, spec, c.Spec())

	seqs := map[string]*pagedSeq{}
	newSeq := func(name string, blocks ...int32) {
		seqs[name] = &pagedSeq{k: make([][]float64, spec.Layers), v: make([][]float64, spec.Layers), blocks: blocks}
	}
	type part struct {
		name string
		n    int // new rows
	}
	step := func(label string, pad int, parts ...part) {
		t.Helper()
		var ps backend.PagedStep
		rows := 0
		for _, p := range parts {
			s := seqs[p.name]
			klen := len(s.k[0])/w + p.n
			ps.Seqs = append(ps.Seqs, backend.PagedSeq{Q0: rows, QLen: p.n, KLen: klen, Blocks: s.blocks})
			rows += p.n
		}
		ps.Rows = rows + pad // padding rows belong to no sequence
		l, err := d.PrepareStep(c, ps)
		require.NoError(t, err, label)
		defer func() { require.NoError(t, d.ReleaseStep(l)) }()
		for layer := range spec.Layers {
			k, v, q := e.randn(ps.Rows*w, 1), e.randn(ps.Rows*w, 1), e.randn(ps.Rows*qw, 1)
			require.NoError(t, d.AppendKV(l, layer, e.up(k), e.up(v)), label)
			out := e.up(e.randn(ps.Rows*qw, 1)) // dirty: rows in no sequence must be zeroed
			require.NoError(t, d.PagedAttention(l, layer, a, out, e.up(q)), label)
			want := make([]float64, ps.Rows*qw)
			for i, p := range parts {
				s, sq := seqs[p.name], ps.Seqs[i]
				s.k[layer] = append(s.k[layer], k[sq.Q0*w:(sq.Q0+p.n)*w]...)
				s.v[layer] = append(s.v[layer], v[sq.Q0*w:(sq.Q0+p.n)*w]...)
				o, _ := refAttention(a, []backend.Span{{Q0: 0, QLen: p.n, K0: 0, KLen: sq.KLen}}, p.n, q[sq.Q0*qw:(sq.Q0+p.n)*qw], s.k[layer], s.v[layer])
				copy(want[sq.Q0*qw:], o)
			}
			e.close(fmt.Sprintf("%s layer %d", label, layer), e.down(out), want)
		}
	}
	newSeq("a", 3, 9)
	newSeq("b", 0, 5)
	step("prefill", 1, part{"a", 6}, part{"b", 3})
	newSeq("c", 11)
	step("mixed", 0, part{"a", 1}, part{"b", 5}, part{"c", 2})
	// d shares a's first block (positions 0–3) and gets a copy of a's
	// second block (positions 4–6, of which it keeps 4 and 5).
	require.NoError(t, d.CopyKVBlocks(c, []int32{9}, []int32{12}))
	newSeq("d", 3, 12)
	for layer := range spec.Layers {
		seqs["d"].k[layer] = slices.Clone(seqs["a"].k[layer][:6*w])
		seqs["d"].v[layer] = slices.Clone(seqs["a"].v[layer][:6*w])
	}
	step("shared", 0, part{"d", 2}, part{"a", 1})
}

// refSampling is SampleRow's rule by its definition in float64, with
// naive sorts: the kept tokens in increasing id order, their weights and
// total, the processed log-probability of each, and the raw log-softmax.
type refSampling struct {
	greedy int
	kept   []int
	w      []float64 // by token id
	total  float64
	lp     map[int]float64
	raw    []float64
}

func refSample(z []float64, r backend.SampleRow) refSampling {
	ref := refSampling{greedy: -1, lp: map[int]float64{}, raw: make([]float64, len(z)), w: make([]float64, len(z))}
	m := math.Inf(-1)
	for i, x := range z {
		if x > m {
			ref.greedy, m = i, x
		}
	}
	var sum float64
	for _, x := range z {
		sum += math.Exp(x - m)
	}
	for i, x := range z {
		ref.raw[i] = x - m - math.Log(sum)
	}
	if r.Greedy {
		return ref
	}
	invT := 1 / r.Temperature
	var cands []int
	for i, x := range z {
		ref.w[i] = math.Exp(x*invT - m*invT)
		if ref.w[i] > 0 && ref.w[i] >= r.MinP {
			cands = append(cands, i)
		}
	}
	// Decreasing logit, then increasing id.
	byLogit := func(ids []int) []int {
		s := slices.Clone(ids)
		slices.SortStableFunc(s, func(a, b int) int {
			switch {
			case z[a] > z[b]:
				return -1
			case z[a] < z[b]:
				return 1
			}
			return a - b
		})
		return s
	}
	if r.TopK > 0 && r.TopK < len(cands) {
		kth := z[byLogit(cands)[r.TopK-1]]
		var kept []int
		for _, i := range cands {
			if z[i] >= kth {
				kept = append(kept, i)
			}
		}
		cands = kept
	}
	if r.TopP > 0 && r.TopP < 1 {
		var total, before float64
		for _, i := range cands {
			total += ref.w[i]
		}
		var kept []int
		for _, i := range byLogit(cands) {
			if before >= r.TopP*total {
				break
			}
			kept = append(kept, i)
			before += ref.w[i]
		}
		slices.Sort(kept)
		cands = kept
	}
	ref.kept = cands
	for _, i := range cands {
		ref.total += ref.w[i]
	}
	for _, i := range cands {
		ref.lp[i] = math.Log(ref.w[i] / ref.total)
	}
	return ref
}

// tokens returns the token the rule picks for u and, when u·W lies within
// 1e-6·W of a boundary of the cumulative weights (where float32 sums may
// fall on either side), its neighbour across that boundary.
func (r refSampling) tokens(u float64) []int {
	target := u * r.total
	eps := 1e-6 * r.total
	var acc float64
	for j, i := range r.kept {
		prev := acc
		acc += r.w[i]
		if acc <= target {
			continue
		}
		ok := []int{i}
		if j+1 < len(r.kept) && acc-target < eps {
			ok = append(ok, r.kept[j+1])
		}
		if j > 0 && target-prev < eps {
			ok = append(ok, r.kept[j-1])
		}
		return ok
	}
	return []int{r.kept[len(r.kept)-1]}
}

// DecoderSampling checks SampleRows against refSample: greedy (ties go to
// the first maximal logit), temperature, min-p, top-k and top-p alone and
// combined, ties at the top-k and top-p boundaries, -Inf logits; each row
// drawn at 40 steps, every token equal to the reference's choice for the
// same SampleUniform number, and its log-probabilities within the
// tolerance. Then results must not depend on the other rows of the call
// (the same rows alone and reversed), invalid rows get Token −1 without
// disturbing the others, and the frequencies of 4,000 draws from one row
// pass a chi-square test against the processed distribution.
func DecoderSampling(t *testing.T, b backend.Backend, tol Tolerance) {
	d := b.(backend.Decoder)
	e := newEnv(t, b, tol, 150)
	cases := samplingCases(e)
	invalid := invalidSamplingLogits(e, cases[samplingValid].z)
	// Every case at every step, in one call: step s of case i is row
	// i·samplingSteps + s, with seed 1000 + i.
	var flat []float64
	var rows []backend.SampleRow
	for i, c := range cases {
		for s := range samplingSteps {
			r := c.r
			r.Seed, r.Step = uint64(1000+i), uint64(s)
			flat = append(flat, c.z...)
			rows = append(rows, r)
		}
	}
	got := sampleRows(t, d, e, flat, rows)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkSampled(t, c, rows[i*samplingSteps:(i+1)*samplingSteps], got[i*samplingSteps:(i+1)*samplingSteps], tol)
		})
	}
	t.Run("rows alone", func(t *testing.T) {
		for _, i := range []int{0, samplingSteps + 3, 7*samplingSteps + 1, len(rows) - 1} {
			alone := sampleRows(t, d, e, flat[i*samplingVocab:(i+1)*samplingVocab], rows[i:i+1])
			require.Equal(t, got[i], alone[0], "row %d alone", i)
		}
	})
	t.Run("rows reversed", func(t *testing.T) {
		n := len(rows)
		rz, rr := make([]float64, 0, len(flat)), make([]backend.SampleRow, 0, n)
		for i := n - 1; i >= 0; i-- {
			rz = append(rz, flat[i*samplingVocab:(i+1)*samplingVocab]...)
			rr = append(rr, rows[i])
		}
		for i, res := range sampleRows(t, d, e, rz, rr) {
			require.Equal(t, got[n-1-i], res, "row %d reversed", n-1-i)
		}
	})
	t.Run("invalid rows", func(t *testing.T) {
		// NaN, +Inf, a valid row (samplingValid at step 0), all −Inf.
		v := samplingValid * samplingSteps
		br := []backend.SampleRow{{Temperature: 1}, {Greedy: true}, rows[v], {Temperature: 0.5, TopK: 3}}
		res := sampleRows(t, d, e, invalid, br)
		require.Equal(t, []int32{-1, -1, got[v].Token, -1}, []int32{res[0].Token, res[1].Token, res[2].Token, res[3].Token})
	})
	t.Run("chi-square", func(t *testing.T) { chiSquare(t, d, e.in(t)) })
}

// samplingVocab and samplingSteps are the row width and the steps at
// which DecoderSampling draws each case.
const samplingVocab, samplingSteps = 40, 40

// samplingValid is the index in samplingCases of the valid row that
// DecoderSampling places between invalid ones ("t1").
const samplingValid = 3

// samplingCase is one row of DecoderSampling: its logits, its rule, and
// the reference's kept set where it is derived by hand (nil: not checked).
type samplingCase struct {
	name string
	z    []float64
	r    backend.SampleRow
	kept []int
}

// samplingCases returns DecoderSampling's rows, drawing their logits from
// e's generator in a fixed order.
func samplingCases(e *env) []samplingCase {
	randRow := func(scale float64) []float64 { return e.randn(samplingVocab, scale) }
	tiesMax := randRow(1)
	tiesMax[5], tiesMax[17] = 4, 4 // two maximal logits: greedy takes 5
	withInf := randRow(2)
	for _, i := range []int{0, 3, 9, 39} {
		withInf[i] = math.Inf(-1)
	}
	// Top-k ties: 7 is the largest, then four 6s; top-2 keeps all five.
	tieK := randRow(0.5)
	tieK[8] = 7
	for _, i := range []int{2, 11, 20, 33} {
		tieK[i] = 6
	}
	// Top-p ties: logit 2 at id 4 and 1 at ids 1, 6, 30; the rest at most
	// −1 (scaled normals below), temperature 1. With P·total = 1 + 1.5/e
	// the first two ties are kept (their preceding weights 1 and 1 + 1/e
	// are below it) and the third is not (1 + 2/e is above it).
	tieP := make([]float64, samplingVocab)
	for i := range tieP {
		tieP[i] = -1 - math.Abs(e.rng.NormFloat64())
	}
	tieP[4] = 2
	for _, i := range []int{1, 6, 30} {
		tieP[i] = 1
	}
	var tieTotal float64
	for _, x := range tieP {
		tieTotal += math.Exp(x - 2)
	}
	tiePP := (1 + 1.5/math.E) / tieTotal
	return []samplingCase{
		{"greedy", randRow(2), backend.SampleRow{Greedy: true}, nil},
		{"greedy ties", tiesMax, backend.SampleRow{Greedy: true}, nil},
		{"greedy -inf", withInf, backend.SampleRow{Greedy: true, TopK: 3}, nil},
		{"t1", randRow(1), backend.SampleRow{Temperature: 1}, nil},
		{"t0.6", randRow(1.5), backend.SampleRow{Temperature: 0.6}, nil},
		{"t1.7 -inf", withInf, backend.SampleRow{Temperature: 1.7}, nil},
		{"top-k 5", randRow(1), backend.SampleRow{Temperature: 0.8, TopK: 5}, nil},
		{"top-k 1", randRow(1), backend.SampleRow{Temperature: 1, TopK: 1}, nil},
		{"top-k ties", tieK, backend.SampleRow{Temperature: 1, TopK: 2}, []int{2, 8, 11, 20, 33}},
		{"top-p 0.6", randRow(1), backend.SampleRow{Temperature: 1.2, TopP: 0.6}, nil},
		{"top-p tiny", randRow(1), backend.SampleRow{Temperature: 1, TopP: 1e-9}, nil},
		{"top-p ties", tieP, backend.SampleRow{Temperature: 1, TopP: tiePP}, []int{1, 4, 6}},
		{"min-p 0.2", randRow(1), backend.SampleRow{Temperature: 1, MinP: 0.2}, nil},
		{"min-p 1", randRow(1), backend.SampleRow{Temperature: 0.9, MinP: 1}, nil},
		{"all", randRow(2), backend.SampleRow{Temperature: 0.7, TopK: 12, TopP: 0.8, MinP: 0.01}, nil},
		{"all hot", randRow(1), backend.SampleRow{Temperature: 2.5, TopK: 30, TopP: 0.95, MinP: 0.05}, nil},
	}
}

// invalidSamplingLogits returns four rows: one with a NaN, one with a
// +Inf, valid, and one all −Inf (drawing a random row for each invalid
// one from e's generator, after samplingCases).
func invalidSamplingLogits(e *env, valid []float64) []float64 {
	bad := make([]float64, 0, 4*samplingVocab)
	for _, v := range []float64{math.NaN(), math.Inf(1), 0, math.Inf(-1)} {
		z := e.randn(samplingVocab, 1)
		switch {
		case v == 0:
			z = valid
		case math.IsInf(v, -1):
			for j := range z {
				z[j] = v
			}
		default:
			z[samplingVocab/2] = v
		}
		bad = append(bad, z...)
	}
	return bad
}

// sampleRows runs SampleRows on the logits z, len(rs) rows of
// samplingVocab.
func sampleRows(t *testing.T, d backend.Decoder, e *env, z []float64, rs []backend.SampleRow) []backend.SampleResult {
	t.Helper()
	out := make([]backend.SampleResult, len(rs))
	require.NoError(t, d.SampleRows(e.in(t).up(z), samplingVocab, rs, out))
	return out
}

// checkSampled compares one case's results at its steps with the
// reference: a greedy row's token and log-prob 0; another row's token
// among the reference's choices for the step's SampleUniform number, and
// its processed log-prob; every row's raw log-prob.
func checkSampled(t *testing.T, c samplingCase, rows []backend.SampleRow, got []backend.SampleResult, tol Tolerance) {
	ref := refSample(c.z, c.r)
	if c.kept != nil {
		require.Equal(t, c.kept, ref.kept, "reference kept set (by hand)")
	}
	bound := func(want float64) float64 { return tol.Abs + tol.Rel*max(1, math.Abs(want)) }
	for s, res := range got {
		sr := rows[s]
		tok := int(res.Token)
		require.GreaterOrEqual(t, tok, 0, "step %d", sr.Step)
		if sr.Greedy {
			require.Equal(t, ref.greedy, tok)
			require.Zero(t, res.LogProb, "greedy log-prob is 0")
		} else {
			ok := ref.tokens(backend.SampleUniform(sr.Seed, sr.Step))
			require.Contains(t, ok, tok, "step %d: kept %v", sr.Step, ref.kept)
			require.InDelta(t, ref.lp[tok], float64(res.LogProb), bound(ref.lp[tok]), "step %d log-prob", sr.Step)
		}
		require.InDelta(t, ref.raw[tok], float64(res.RawLogProb), bound(ref.raw[tok]), "step %d raw log-prob", sr.Step)
	}
}

// DecoderTopLogprobs checks SampleResult.Top against refSample: the
// TopLogprobs tokens of largest logit (ties by increasing id: a tie at
// the boundary, two maximal logits; all of them, −Inf ones last, when
// TopLogprobs exceeds the vocabulary), each with the reference's raw
// log-probability and its processed one (−Inf outside the kept set, and
// for greedy rows 0 for the drawn token and −Inf for the others), within
// the tolerance. Asking for them changes nothing else of the result, and
// rows that do not ask get no list.
func DecoderTopLogprobs(t *testing.T, b backend.Backend, tol Tolerance) {
	d := b.(backend.Decoder)
	e := newEnv(t, b, tol, 155)
	const vocab = 40
	tiesMax := e.randn(vocab, 1)
	tiesMax[5], tiesMax[17] = 4, 4
	// A tie at the third place: 7 at id 8, then 6 at ids 2, 11, 20, 33.
	tieK := e.randn(vocab, 0.5)
	tieK[8] = 7
	for _, i := range []int{2, 11, 20, 33} {
		tieK[i] = 6
	}
	withInf := e.randn(vocab, 2)
	for _, i := range []int{0, 3, 9, 39} {
		withInf[i] = math.Inf(-1)
	}
	rows := []struct {
		name string
		z    []float64
		r    backend.SampleRow
	}{
		{"greedy ties", tiesMax, backend.SampleRow{Greedy: true, TopLogprobs: 3}},
		{"t1", e.randn(vocab, 1), backend.SampleRow{Temperature: 1, TopLogprobs: 5}},
		{"top-k 3 of 6", e.randn(vocab, 1.5), backend.SampleRow{Temperature: 0.7, TopK: 3, TopLogprobs: 6}},
		{"top-p and min-p", e.randn(vocab, 1), backend.SampleRow{Temperature: 1.3, TopP: 0.7, MinP: 0.05, TopLogprobs: 8}},
		{"tie at the boundary", tieK, backend.SampleRow{Temperature: 1, TopLogprobs: 3}},
		{"all, -inf last", withInf, backend.SampleRow{Temperature: 0.9, TopK: 10, TopLogprobs: 50}},
		{"none asked", e.randn(vocab, 1), backend.SampleRow{Temperature: 1}},
	}
	var flat []float64
	rs := make([]backend.SampleRow, len(rows))
	plain := make([]backend.SampleRow, len(rows))
	for i, r := range rows {
		flat = append(flat, r.z...)
		rs[i] = r.r
		rs[i].Seed, rs[i].Step = uint64(500+i), 7
		plain[i] = rs[i]
		plain[i].TopLogprobs = 0
	}
	got := make([]backend.SampleResult, len(rs))
	require.NoError(t, d.SampleRows(e.up(flat), vocab, rs, got))
	without := make([]backend.SampleResult, len(rs))
	require.NoError(t, d.SampleRows(e.up(flat), vocab, plain, without))
	bound := func(want float64) float64 { return tol.Abs + tol.Rel*max(1, math.Abs(want)) }
	near := func(want float64, got float32, what string) {
		if math.IsInf(want, -1) {
			require.True(t, math.IsInf(float64(got), -1), "%s: %v, want -Inf", what, got)
			return
		}
		require.InDelta(t, want, float64(got), bound(want), what)
	}
	for i, row := range rows {
		res := got[i]
		w := without[i]
		require.Equal(t, w.Token, res.Token, "%s: asking for the top changes the draw", row.name)
		require.Equal(t, w.LogProb, res.LogProb, row.name)
		require.Equal(t, w.RawLogProb, res.RawLogProb, row.name)
		require.Nil(t, w.Top, row.name)
		if row.r.TopLogprobs == 0 {
			require.Nil(t, res.Top, row.name)
			continue
		}
		ref := refSample(row.z, row.r)
		order := make([]int, vocab)
		for j := range order {
			order[j] = j
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case row.z[a] > row.z[b]:
				return -1
			case row.z[a] < row.z[b]:
				return 1
			}
			return a - b
		})
		want := order[:min(row.r.TopLogprobs, vocab)]
		ids := make([]int, len(res.Top))
		for j, tp := range res.Top {
			ids[j] = int(tp.Token)
		}
		require.Equal(t, want, ids, "%s: the most likely tokens", row.name)
		for _, tp := range res.Top {
			id := int(tp.Token)
			what := fmt.Sprintf("%s token %d", row.name, id)
			near(ref.raw[id], tp.RawLogProb, what+" raw log-prob")
			lp, kept := ref.lp[id]
			switch {
			case row.r.Greedy && id == int(res.Token):
				lp = 0
			case row.r.Greedy || !kept:
				lp = math.Inf(-1)
			}
			near(lp, tp.LogProb, what+" log-prob")
			if id == int(res.Token) {
				near(float64(res.LogProb), tp.LogProb, what+" is the drawn token")
				near(float64(res.RawLogProb), tp.RawLogProb, what+" is the drawn token")
			}
		}
	}
	wantTie := []int32{8, 2, 11}
	require.Equal(t, wantTie, []int32{got[4].Top[0].Token, got[4].Top[1].Token, got[4].Top[2].Token}, "by hand")
	require.Equal(t, int32(5), got[0].Top[0].Token, "greedy's first maximal logit")
}

// chiSquare draws 4,000 tokens from one row of 12 logits (temperature
// 0.8, top-k 9, top-p 0.9, min-p 0.02), one per step, and compares the
// counts with the reference's kept probabilities: Pearson's X² over the
// kept tokens, with |kept|−1 degrees of freedom, must stay below its
// 1−10⁻⁶ quantile (Wilson–Hilferty: df·(1 − 2/(9df) + z·√(2/(9df)))³,
// z = 4.7534 the standard normal's 1−10⁻⁶ quantile), and no token outside
// the kept set may appear. Every expected count is at least 5.
func chiSquare(t *testing.T, d backend.Decoder, e *env) {
	const vocab, n = 12, 4000
	z := []float64{2.1, 1.7, 1.5, 1.4, 0.9, 0.8, 0.5, 0.2, 0.1, -0.4, -1.6, -3}
	r := backend.SampleRow{Temperature: 0.8, TopK: 9, TopP: 0.9, MinP: 0.02, Seed: 77}
	ref := refSample(z, r)
	require.Greater(t, len(ref.kept), 4)
	flat := make([]float64, 0, n*vocab)
	rs := make([]backend.SampleRow, n)
	for i := range rs {
		flat = append(flat, z...)
		rs[i] = r
		rs[i].Step = uint64(i)
	}
	out := make([]backend.SampleResult, n)
	require.NoError(t, d.SampleRows(e.up(flat), vocab, rs, out))
	counts := make([]int, vocab)
	for _, o := range out {
		counts[o.Token]++
	}
	var x2 float64
	kept := map[int]bool{}
	for _, i := range ref.kept {
		kept[i] = true
		want := n * ref.w[i] / ref.total
		require.GreaterOrEqual(t, want, 5.0, "expected count of token %d", i)
		x2 += (float64(counts[i]) - want) * (float64(counts[i]) - want) / want
	}
	for i, c := range counts {
		if !kept[i] {
			require.Zero(t, c, "token %d is not kept but was drawn", i)
		}
	}
	df := float64(len(ref.kept) - 1)
	h := 2 / (9 * df)
	limit := df * math.Pow(1-h+4.7534*math.Sqrt(h), 3)
	t.Logf("chi-square %.2f with %v degrees of freedom, limit %.2f", x2, df, limit)
	require.Less(t, x2, limit)
}

// DecoderErrors checks that bad Decoder calls are errors, never panics.
func DecoderErrors(t *testing.T, b backend.Backend, tol Tolerance) {
	d := b.(backend.Decoder)
	e := newEnv(t, b, tol, 160)
	spec := backend.KVCacheSpec{Layers: 1, KVHeads: 1, HeadDim: 4, BlockSize: 2, Blocks: 4}
	_, err := d.NewKVCache(backend.KVCacheSpec{Layers: 1, KVHeads: 1, HeadDim: 4, BlockSize: 2})
	require.ErrorIs(t, err, backend.ErrShape)
	_, err = d.KVBlockBytes(backend.KVCacheSpec{})
	require.ErrorIs(t, err, backend.ErrShape)
	c, err := d.NewKVCache(spec)
	require.NoError(t, err)
	step := backend.PagedStep{Rows: 2, Seqs: []backend.PagedSeq{{Q0: 0, QLen: 2, KLen: 2, Blocks: []int32{1}}}}
	_, err = d.PrepareStep(c, backend.PagedStep{Rows: 1, Seqs: []backend.PagedSeq{{Q0: 0, QLen: 1, KLen: 1, Blocks: []int32{4}}}})
	require.ErrorIs(t, err, backend.ErrIndex)
	l, err := d.PrepareStep(c, step)
	require.NoError(t, err)
	a := backend.Attention{Heads: 2, KVHeads: 1, HeadDim: 4, Scale: 0.5}
	x8 := e.zeros(8)
	require.ErrorIs(t, d.AppendKV(l, 1, x8, x8), backend.ErrIndex, "layer out of range")
	require.ErrorIs(t, d.AppendKV(l, 0, e.zeros(4), x8), backend.ErrShape)
	require.ErrorIs(t, d.AppendKV(l, 0, nil, x8), backend.ErrBuffer)
	require.ErrorIs(t, d.AppendKV(l, 0, foreign{8}, x8), backend.ErrBuffer)
	require.NoError(t, d.AppendKV(l, 0, x8, x8))
	x16 := e.zeros(16)
	require.ErrorIs(t, d.PagedAttention(l, 0, backend.Attention{Heads: 2, KVHeads: 1, HeadDim: 2, Scale: 1}, x16, x16), backend.ErrShape)
	require.ErrorIs(t, d.PagedAttention(l, 0, a, x8, x16), backend.ErrShape)
	require.ErrorIs(t, d.PagedAttention(l, 0, backend.Attention{Heads: 2, KVHeads: 1, HeadDim: 4, Scale: float32(math.NaN())}, x16, x16), backend.ErrArg)
	require.NoError(t, d.PagedAttention(l, 0, a, x16, x16))
	require.ErrorIs(t, d.CopyKVBlocks(c, []int32{0}, []int32{9}), backend.ErrIndex)
	require.NoError(t, d.ReleaseStep(l))
	require.ErrorIs(t, d.AppendKV(l, 0, x8, x8), backend.ErrBuffer, "released layout")
	require.ErrorIs(t, d.SampleRows(x8, 4, []backend.SampleRow{{Temperature: -1}}, make([]backend.SampleResult, 1)), backend.ErrArg)
	require.ErrorIs(t, d.SampleRows(foreign{8}, 4, []backend.SampleRow{{Greedy: true}}, make([]backend.SampleResult, 1)), backend.ErrBuffer)
	require.NoError(t, d.FreeKVCache(c))
	_, err = d.PrepareStep(c, step)
	require.ErrorIs(t, err, backend.ErrBuffer, "freed cache")
	require.ErrorIs(t, d.FreeKVCache(c), backend.ErrBuffer)
	require.ErrorIs(t, d.FreeKVCache(foreignCache{}), backend.ErrBuffer)
}

// foreignCache is a KVCache no backend allocated.
type foreignCache struct{}

func (foreignCache) Spec() backend.KVCacheSpec { return backend.KVCacheSpec{} }
