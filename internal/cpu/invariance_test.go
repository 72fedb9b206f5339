package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// Batch invariance of the CPU kernels: a row's result is the same bits
// whether the row is computed alone or among others (batches of 1, 3 and
// 17 at various positions), with one worker or two, and — for attention
// — whether it comes from the training kernel over packed sequences or
// from the paged decode kernel, with any cache block size and any
// chunking of the prefill. This is the property behind the sampler's
// log-probabilities being the trainer's (policy tests it end to end).
// It is the CPU backend's, by construction; backendtest does not ask it
// of every backend.

// bits returns the IEEE bit patterns of x, so that require.Equal compares
// bit for bit (−0 ≠ +0, NaN = NaN).
func bits(x []float32) []uint32 {
	out := make([]uint32, len(x))
	for i, v := range x {
		out[i] = math.Float32bits(v)
	}
	return out
}

type invEnv struct {
	t  *testing.T
	be *Backend
	r  *rand.Rand
}

func (e invEnv) up(x []float32) backend.Buffer {
	b, err := e.be.Alloc(len(x))
	require.NoError(e.t, err)
	require.NoError(e.t, e.be.Upload(b, 0, x))
	return b
}

func (e invEnv) zeros(n int) backend.Buffer {
	b, err := e.be.Alloc(n)
	require.NoError(e.t, err)
	return b
}

func (e invEnv) down(b backend.Buffer) []float32 {
	x := make([]float32, b.Len())
	require.NoError(e.t, e.be.Download(x, b, 0))
	return x
}

func (e invEnv) randn(n int, std float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(std * e.r.NormFloat64())
	}
	return x
}

// batchings are the ways a set of n rows is cut into calls: every row
// alone, then batches of 3, 17 and all of them.
func batchings(n int) []int { return []int{1, 3, 17, n} }

// invBackends are the backends whose rows must not depend on the batch:
// the default kernel on one and on two workers, and the pure-Go kernel.
func invBackends() map[string]*Backend {
	return map[string]*Backend{
		"workers=1":   New(WithWorkers(1)),
		"workers=2":   New(WithWorkers(2)),
		"generic/w=2": New(WithGenericGemm(), WithWorkers(2)),
	}
}

// rowOf is row i of each of outs (each n rows), concatenated, as bits.
func rowOf(outs [][]float32, n, i int) []uint32 {
	var row []float32
	for _, o := range outs {
		w := len(o) / n
		row = append(row, o[i*w:(i+1)*w]...)
	}
	return bits(row)
}

// rowKernels are row-wise kernels run on n rows x of in values, with
// weights w: each returns its outputs, n rows each.
var rowKernels = []struct {
	name string
	in   int
	w    func(e invEnv) []float32
	run  func(e invEnv, x []float32, n int, w []float32) [][]float32
}{
	{"linear 128→384", 128, func(e invEnv) []float32 { return e.randn(384*128+384, 0.1) },
		func(e invEnv, x []float32, n int, w []float32) [][]float32 {
			y := e.zeros(n * 384)
			require.NoError(e.t, e.be.LinearForward(backend.Linear{Rows: n, In: 128, Out: 384}, y, e.up(x), e.up(w[:384*128]), e.up(w[384*128:])))
			return [][]float32{e.down(y)}
		}},
	{"linear 384→128", 384, func(e invEnv) []float32 { return e.randn(384*128, 0.1) },
		func(e invEnv, x []float32, n int, w []float32) [][]float32 {
			y := e.zeros(n * 128)
			require.NoError(e.t, e.be.LinearForward(backend.Linear{Rows: n, In: 384, Out: 128}, y, e.up(x), e.up(w), nil))
			return [][]float32{e.down(y)}
		}},
	{"rmsnorm", 96, func(e invEnv) []float32 { return e.randn(96, 1) },
		func(e invEnv, x []float32, n int, w []float32) [][]float32 {
			out, rstd := e.zeros(n*96), e.zeros(n)
			require.NoError(e.t, e.be.RMSNormForward(n, 96, 1e-6, out, rstd, e.up(x), e.up(w)))
			return [][]float32{e.down(out), e.down(rstd)}
		}},
	{"logprob T=0.7 vocab 5000", 64, func(e invEnv) []float32 { return e.randn(5000*64, 0.2) },
		func(e invEnv, x []float32, n int, w []float32) [][]float32 {
			lp, ent, lse := e.zeros(n), e.zeros(n), e.zeros(n)
			targets := make([]int32, n)
			for i := range targets {
				targets[i] = rowTarget(x[i*64:(i+1)*64], 5000)
			}
			s := backend.LMHead{Rows: n, Dim: 64, Vocab: 5000, InvTemp: float32(1 / 0.7)}
			require.NoError(e.t, e.be.LogProbEntropy(s, targets, lp, ent, lse, e.up(x), e.up(w)))
			return [][]float32{e.down(lp), e.down(ent), e.down(lse)}
		}},
}

// rowTarget is a target token that depends on the row alone.
func rowTarget(row []float32, vocab int) int32 {
	return int32(math.Float32bits(row[0]) % uint32(vocab))
}

func TestRowKernelsAreBatchInvariant(t *testing.T) {
	const rows = 40
	for name, be := range invBackends() {
		for _, k := range rowKernels {
			t.Run(name+"/"+k.name, func(t *testing.T) {
				e := invEnv{t, be, rand.New(rand.NewPCG(1, 2))}
				x, w := e.randn(rows*k.in, 1), k.w(e)
				var alone [][]uint32
				for _, bs := range batchings(rows) {
					for r0 := 0; r0 < rows; r0 += bs {
						n := min(bs, rows-r0)
						outs := k.run(e, x[r0*k.in:(r0+n)*k.in], n, w)
						for i := range n {
							if bs == 1 {
								alone = append(alone, rowOf(outs, n, i))
								continue
							}
							require.Equal(t, alone[r0+i], rowOf(outs, n, i), "row %d in a batch of %d at %d", r0+i, n, r0)
						}
					}
				}
			})
		}
	}
}

// TestSampledLogProbsAreLogProbEntropys: SampleRows on rows of Logits
// records, for the token it draws, the log-probability LogProbEntropy
// computes for that token from the same hidden state, bit for bit — at
// temperature 1 (RawLogProb and LogProb) and 0.7 (LogProb) — whatever
// the rows sampled together and the rows scored together. A vocabulary
// of 5000 takes two chunks of the log-sum-exp.
func TestSampledLogProbsAreLogProbEntropys(t *testing.T) {
	const rows, dim, vocab = 20, 64, 5000
	for name, be := range invBackends() {
		for _, temp := range []float64{1, 0.7} {
			t.Run(fmt.Sprintf("%s/T=%v", name, temp), func(t *testing.T) {
				e := invEnv{t, be, rand.New(rand.NewPCG(3, 4))}
				h, w := e.randn(rows*dim, 1), e.randn(vocab*dim, 0.3)
				hb, wb := e.up(h), e.up(w)
				invT := float32(1 / temp)
				// Sample every row, in calls of bs rows.
				for _, bs := range batchings(rows) {
					toks := make([]int32, rows)
					raw, lp := make([]float32, rows), make([]float32, rows)
					for r0 := 0; r0 < rows; r0 += bs {
						n := min(bs, rows-r0)
						sel := make([]int32, n)
						srows := make([]backend.SampleRow, n)
						for i := range sel {
							sel[i] = int32(r0 + i)
							srows[i] = backend.SampleRow{Temperature: temp, Seed: 7, Step: uint64(r0 + i)}
						}
						logits := e.zeros(n * vocab)
						require.NoError(t, be.Logits(backend.LMHead{Rows: rows, Dim: dim, Vocab: vocab, InvTemp: 1}, sel, logits, hb, wb))
						res := make([]backend.SampleResult, n)
						require.NoError(t, be.SampleRows(logits, vocab, srows, res))
						for i, r := range res {
							require.GreaterOrEqual(t, r.Token, int32(0))
							toks[r0+i], raw[r0+i], lp[r0+i] = r.Token, r.RawLogProb, r.LogProb
						}
					}
					// Score the sampled tokens in calls of 1, 3, 17 and all rows.
					for _, sb := range batchings(rows) {
						for r0 := 0; r0 < rows; r0 += sb {
							n := min(sb, rows-r0)
							score := func(inv float32) []float32 {
								out, lse := e.zeros(n), e.zeros(n)
								s := backend.LMHead{Rows: n, Dim: dim, Vocab: vocab, InvTemp: inv}
								require.NoError(t, be.LogProbEntropy(s, toks[r0:r0+n], out, nil, lse, e.up(h[r0*dim:(r0+n)*dim]), wb))
								return e.down(out)
							}
							require.Equal(t, bits(raw[r0:r0+n]), bits(score(1)), "raw log-probs, sampled %d, scored %d at a time, rows from %d", bs, sb, r0)
							require.Equal(t, bits(lp[r0:r0+n]), bits(score(invT)), "log-probs, sampled %d, scored %d at a time, rows from %d", bs, sb, r0)
						}
					}
				}
			})
		}
	}
}

// attnSeq is one sequence's queries, keys and values, row by row.
type attnSeq struct {
	n       int
	q, k, v []float32
}

func (e invEnv) attnSeq(a backend.Attention, n int) attnSeq {
	return attnSeq{n: n, q: e.randn(n*a.Heads*a.HeadDim, 1), k: e.randn(n*a.KVHeads*a.HeadDim, 1), v: e.randn(n*a.KVHeads*a.HeadDim, 1)}
}

// trainAttention runs AttentionForward over seqs packed one after the
// other and returns each sequence's output rows.
func (e invEnv) trainAttention(a backend.Attention, seqs []attnSeq) [][]float32 {
	var q, k, v []float32
	var lens []int
	var pos []int32
	for _, s := range seqs {
		q, k, v = append(q, s.q...), append(k, s.k...), append(v, s.v...)
		lens = append(lens, s.n)
		for i := range s.n {
			pos = append(pos, int32(i))
		}
	}
	r, err := e.be.NewRows(pos, backend.PackedSpans(lens))
	require.NoError(e.t, err)
	defer func() { require.NoError(e.t, e.be.FreeRows(r)) }()
	out, lse := e.zeros(len(q)), e.zeros(len(pos)*a.Heads)
	require.NoError(e.t, e.be.AttentionForward(a, r, out, lse, e.up(q), e.up(k), e.up(v)))
	o := e.down(out)
	res := make([][]float32, len(seqs))
	row := a.Heads * a.HeadDim
	off := 0
	for i, s := range seqs {
		res[i] = o[off*row : (off+s.n)*row]
		off += s.n
	}
	return res
}

// pagedAttention feeds seqs through a paged KV cache of blockSize rows,
// each sequence chunk rows per step (all of them side by side in every
// step until they are done), and returns each sequence's output rows.
func (e invEnv) pagedAttention(a backend.Attention, seqs []attnSeq, blockSize int, chunk []int) [][]float32 {
	spec := backend.KVCacheSpec{Layers: 1, KVHeads: a.KVHeads, HeadDim: a.HeadDim, BlockSize: blockSize}
	tables := make([][]int32, len(seqs))
	for i, s := range seqs {
		for range (s.n + blockSize - 1) / blockSize {
			tables[i] = append(tables[i], int32(spec.Blocks))
			spec.Blocks++
		}
	}
	c, err := e.be.NewKVCache(spec)
	require.NoError(e.t, err)
	defer func() { require.NoError(e.t, e.be.FreeKVCache(c)) }()
	qRow, kRow := a.Heads*a.HeadDim, spec.Width()
	res := make([][]float32, len(seqs))
	done := make([]int, len(seqs))
	for {
		var step backend.PagedStep
		var q, k, v []float32
		for i, s := range seqs {
			n := min(chunk[i], s.n-done[i])
			if n == 0 {
				continue
			}
			step.Seqs = append(step.Seqs, backend.PagedSeq{Q0: step.Rows, QLen: n, KLen: done[i] + n, Blocks: tables[i]})
			step.Rows += n
			q = append(q, s.q[done[i]*qRow:(done[i]+n)*qRow]...)
			k = append(k, s.k[done[i]*kRow:(done[i]+n)*kRow]...)
			v = append(v, s.v[done[i]*kRow:(done[i]+n)*kRow]...)
		}
		if step.Rows == 0 {
			return res
		}
		l, err := e.be.PrepareStep(c, step)
		require.NoError(e.t, err)
		require.NoError(e.t, e.be.AppendKV(l, 0, e.up(k), e.up(v)))
		out := e.zeros(len(q))
		require.NoError(e.t, e.be.PagedAttention(l, 0, a, out, e.up(q)))
		require.NoError(e.t, e.be.ReleaseStep(l))
		o := e.down(out)
		j := 0
		for i, s := range seqs {
			n := min(chunk[i], s.n-done[i])
			if n == 0 {
				continue
			}
			sq := step.Seqs[j]
			res[i] = append(res[i], o[sq.Q0*qRow:(sq.Q0+n)*qRow]...)
			done[i] += n
			j++
		}
	}
}

// TestAttentionIsBatchInvariant: the attention output of a sequence of
// 75 tokens (two query blocks of the training kernel) is the same bits
// from the training kernel alone, among 3 or 17 packed sequences, and
// from the paged decode kernel with cache blocks of 1, 5 or 16 rows,
// prefilled whole, in chunks of 7 or token by token, alone or beside 2
// or 16 other sequences.
func TestAttentionIsBatchInvariant(t *testing.T) {
	a := backend.Attention{Heads: 4, KVHeads: 2, HeadDim: 32, Scale: float32(1 / math.Sqrt(32))}
	for name, be := range invBackends() {
		t.Run(name, func(t *testing.T) {
			e := invEnv{t, be, rand.New(rand.NewPCG(5, 6))}
			target := e.attnSeq(a, 75)
			want := bits(e.trainAttention(a, []attnSeq{target})[0])
			others := func(n int) []attnSeq {
				var s []attnSeq
				for i := range n {
					s = append(s, e.attnSeq(a, 1+(i*37)%90))
				}
				return s
			}
			for _, nb := range []int{3, 17} {
				seqs := others(nb - 1)
				at := nb / 2
				seqs = append(seqs[:at], append([]attnSeq{target}, seqs[at:]...)...)
				require.Equal(t, want, bits(e.trainAttention(a, seqs)[at]), "training, %d sequences", nb)
			}
			for _, bs := range []int{1, 5, 16} {
				for _, ch := range []int{75, 7, 1} {
					for _, nb := range []int{1, 3, 17} {
						seqs := append([]attnSeq{target}, others(nb-1)...)
						chunk := make([]int, nb)
						for i := range chunk {
							chunk[i] = ch
							if i > 0 {
								chunk[i] = 1 + i%9 // the others in chunks of their own
							}
						}
						got := e.pagedAttention(a, seqs, bs, chunk)[0]
						require.Equal(t, want, bits(got), "paged: blocks of %d, chunks of %d, %d sequences", bs, ch, nb)
					}
				}
			}
		})
	}
}

// TestGradientsDoNotDependOnWorkers: the backward kernels and the
// gradient norm give the same bits on 1, 2 and 3 workers (their sums
// over rows are split by the shape, never by the workers).
func TestGradientsDoNotDependOnWorkers(t *testing.T) {
	const rows, dim, out, vocab = 300, 64, 96, 300
	a := backend.Attention{Heads: 4, KVHeads: 2, HeadDim: 16, Scale: 0.25}
	r := rand.New(rand.NewPCG(7, 8))
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	x, w, g, nw := rnd(rows*dim), rnd(out*dim), rnd(rows*out), rnd(dim)
	q, k, v, dout := rnd(rows*a.Heads*a.HeadDim), rnd(rows*a.KVHeads*a.HeadDim), rnd(rows*a.KVHeads*a.HeadDim), rnd(rows*a.Heads*a.HeadDim)
	hw, gl, ge := rnd(vocab*dim), rnd(rows), rnd(rows)
	big := rnd(5*gradNormChunk + 123)
	targets := make([]int32, rows)
	for i := range targets {
		targets[i] = int32(i * 7 % vocab)
	}
	lens := []int{100, 37, 163}
	grads := func(be *Backend) [][]float32 {
		e := invEnv{t, be, nil}
		var res [][]float32
		// Linear: dx, dW, db.
		dx, dw, db := e.zeros(rows*dim), e.zeros(out*dim), e.zeros(out)
		require.NoError(t, be.LinearBackward(backend.Linear{Rows: rows, In: dim, Out: out}, dx, dw, db, e.up(g), e.up(x), e.up(w)))
		res = append(res, e.down(dx), e.down(dw), e.down(db))
		// RMSNorm: dx, dw.
		y, rstd := e.zeros(rows*dim), e.zeros(rows)
		require.NoError(t, be.RMSNormForward(rows, dim, 1e-6, y, rstd, e.up(x), e.up(nw)))
		dxn, dwn := e.zeros(rows*dim), e.zeros(dim)
		require.NoError(t, be.RMSNormBackward(rows, dim, dxn, dwn, e.up(x), e.up(x), e.up(nw), rstd))
		res = append(res, e.down(dxn), e.down(dwn))
		// Attention over three packed sequences: dq, dk, dv.
		pos := make([]int32, 0, rows)
		for _, n := range lens {
			for i := range n {
				pos = append(pos, int32(i))
			}
		}
		rs, err := be.NewRows(pos, backend.PackedSpans(lens))
		require.NoError(t, err)
		qb, kb, vb := e.up(q), e.up(k), e.up(v)
		o, lse := e.zeros(len(q)), e.zeros(rows*a.Heads)
		require.NoError(t, be.AttentionForward(a, rs, o, lse, qb, kb, vb))
		dq, dk, dv := e.zeros(len(q)), e.zeros(len(k)), e.zeros(len(v))
		require.NoError(t, be.AttentionBackward(a, rs, dq, dk, dv, e.up(dout), qb, kb, vb, o, lse))
		res = append(res, e.down(dq), e.down(dk), e.down(dv))
		// LM head: dh, dW.
		s := backend.LMHead{Rows: rows, Dim: dim, Vocab: vocab, InvTemp: 1.25}
		hb, wb := e.up(x), e.up(hw)
		lp, ent, l := e.zeros(rows), e.zeros(rows), e.zeros(rows)
		require.NoError(t, be.LogProbEntropy(s, targets, lp, ent, l, hb, wb))
		dh, dhw := e.zeros(rows*dim), e.zeros(vocab*dim)
		require.NoError(t, be.LogProbEntropyBackward(s, targets, dh, dhw, e.up(gl), e.up(ge), hb, wb, l, ent))
		res = append(res, e.down(dh), e.down(dhw))
		// The norm of all of them and of a buffer of several chunks, its
		// float64 bits as two float32 patterns.
		norm, err := be.GradNorm(dx, dw, dxn, dq, dhw, e.up(big))
		require.NoError(t, err)
		nb := math.Float64bits(norm)
		return append(res, []float32{math.Float32frombits(uint32(nb >> 32)), math.Float32frombits(uint32(nb))})
	}
	want := grads(New(WithWorkers(1)))
	for _, workers := range []int{2, 3} {
		for i, got := range grads(New(WithWorkers(workers))) {
			require.Equal(t, bits(want[i]), bits(got), "gradient %d on %d workers", i, workers)
		}
	}
}
