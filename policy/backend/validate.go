package backend

import (
	"fmt"
	"math"
)

// The Check functions below validate the arguments of one kernel. Every
// Backend calls them before touching memory, so that all backends reject
// the same calls with the same errors and their kernels may assume valid
// shapes. They check lengths through Buffer.Len; whether a buffer belongs
// to the backend is the backend's own check.

func need(name string, b Buffer, n int) error {
	if b == nil {
		return fmt.Errorf("%w: %s is nil", ErrBuffer, name)
	}
	if b.Len() != n {
		return fmt.Errorf("%w: %s has %d elements, want %d", ErrShape, name, b.Len(), n)
	}
	return nil
}

// optional is need for buffers that may be nil.
func optional(name string, b Buffer, n int) error {
	if b == nil {
		return nil
	}
	return need(name, b, n)
}

func positive(what string, vals ...int) error {
	for _, v := range vals {
		if v < 0 {
			return fmt.Errorf("%w: %s has a negative size %v", ErrShape, what, vals)
		}
	}
	return nil
}

func finite(name string, v float32) error {
	if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return fmt.Errorf("%w: %s is %v", ErrArg, name, v)
	}
	return nil
}

// CheckGemm validates Backend.Gemm.
func CheckGemm(g Gemm, a, b, c Buffer) error {
	if err := positive("gemm", g.M, g.N, g.K, g.Batch, g.StrideA, g.StrideB, g.StrideC); err != nil {
		return err
	}
	if err := finite("gemm alpha", g.Alpha); err != nil {
		return err
	}
	if err := finite("gemm beta", g.Beta); err != nil {
		return err
	}
	batch := max(g.Batch, 1)
	if batch > 1 && g.M*g.N > 0 && g.StrideC < g.M*g.N {
		return fmt.Errorf("%w: gemm C stride %d is smaller than one %d×%d matrix: batched outputs would overlap", ErrShape, g.StrideC, g.M, g.N)
	}
	for _, m := range []struct {
		name         string
		buf          Buffer
		size, stride int
	}{{"gemm A", a, g.M * g.K, g.StrideA}, {"gemm B", b, g.K * g.N, g.StrideB}, {"gemm C", c, g.M * g.N, g.StrideC}} {
		if m.buf == nil {
			return fmt.Errorf("%w: %s is nil", ErrBuffer, m.name)
		}
		// Inputs may share a matrix across the batch (stride 0).
		if need := (batch-1)*m.stride + m.size; m.buf.Len() < need {
			return fmt.Errorf("%w: %s has %d elements; %d matrices of %d at stride %d need %d", ErrShape, m.name, m.buf.Len(), batch, m.size, m.stride, need)
		}
	}
	return nil
}

// CheckLinear validates LinearForward (dx, dw, db nil) and LinearBackward.
func CheckLinear(s Linear, y, x, w, bias Buffer) error {
	if err := positive("linear", s.Rows, s.In, s.Out); err != nil {
		return err
	}
	if err := need("linear y/dy", y, s.Rows*s.Out); err != nil {
		return err
	}
	if err := need("linear x", x, s.Rows*s.In); err != nil {
		return err
	}
	if err := need("linear W", w, s.Out*s.In); err != nil {
		return err
	}
	return optional("linear bias", bias, s.Out)
}

// CheckLinearGrads validates the gradient buffers of LinearBackward.
func CheckLinearGrads(s Linear, dx, dw, db Buffer) error {
	if err := optional("linear dx", dx, s.Rows*s.In); err != nil {
		return err
	}
	if err := optional("linear dW", dw, s.Out*s.In); err != nil {
		return err
	}
	return optional("linear db", db, s.Out)
}

// CheckEmbedding validates the embedding kernels: table [V, dim] with V ≥ 1,
// out [len(ids), dim], 0 ≤ ids[t] < V.
func CheckEmbedding(out, table Buffer, ids []int32, dim int) error {
	if dim <= 0 {
		return fmt.Errorf("%w: embedding dim %d", ErrShape, dim)
	}
	if table == nil {
		return fmt.Errorf("%w: embedding table is nil", ErrBuffer)
	}
	if table.Len()%dim != 0 || table.Len() == 0 {
		return fmt.Errorf("%w: embedding table has %d elements, not a positive multiple of dim %d", ErrShape, table.Len(), dim)
	}
	if err := need("embedding out", out, len(ids)*dim); err != nil {
		return err
	}
	v := table.Len() / dim
	for t, id := range ids {
		if id < 0 || int(id) >= v {
			return fmt.Errorf("%w: embedding ids[%d] = %d outside [0, %d)", ErrIndex, t, id, v)
		}
	}
	return nil
}

// CheckRMSNorm validates the RMSNorm kernels (eps checked only when
// forward is true).
func CheckRMSNorm(rows, dim int, eps float32, forward bool, out, rstd, x, w Buffer) error {
	if err := positive("rmsnorm", rows, dim); err != nil {
		return err
	}
	if dim == 0 {
		return fmt.Errorf("%w: rmsnorm dim is 0", ErrShape)
	}
	if forward && (!(eps > 0) || math.IsInf(float64(eps), 0)) {
		return fmt.Errorf("%w: rmsnorm eps %v must be positive and finite", ErrArg, eps)
	}
	if err := need("rmsnorm out/dout", out, rows*dim); err != nil {
		return err
	}
	if err := need("rmsnorm x", x, rows*dim); err != nil {
		return err
	}
	if err := need("rmsnorm weight", w, dim); err != nil {
		return err
	}
	if forward {
		return optional("rmsnorm rstd", rstd, rows)
	}
	return need("rmsnorm rstd", rstd, rows)
}

// CheckRoPE validates the RoPE kernels on the rows of layout l.
func CheckRoPE(heads, headDim int, l *RowLayout, freqs []float32, out, x Buffer) error {
	if heads <= 0 || headDim <= 0 || headDim%2 != 0 {
		return fmt.Errorf("%w: rope heads %d, head dim %d (must be positive and even)", ErrShape, heads, headDim)
	}
	if len(freqs) != headDim/2 {
		return fmt.Errorf("%w: rope has %d frequencies, head dim %d needs %d", ErrShape, len(freqs), headDim, headDim/2)
	}
	for i, f := range freqs {
		if err := finite(fmt.Sprintf("rope freqs[%d]", i), f); err != nil {
			return err
		}
	}
	n := l.Len() * heads * headDim
	if err := need("rope out/dx", out, n); err != nil {
		return err
	}
	return need("rope x/dout", x, n)
}

// CheckAttention validates the attention kernels on the rows of layout
// l: q and out [l.Len(), Heads, D], k and v [Tk, KVHeads, D] with the
// spans' keys inside Tk, lse [l.Len(), Heads] (nil allowed when
// lseOptional), and — for backward — key rows of different spans not
// overlapping. The spans themselves were checked by NewRowLayout, so
// the cost does not grow with the rows.
func CheckAttention(a Attention, l *RowLayout, out, lse, q, k, v Buffer, lseOptional, backward bool) error {
	if a.Heads <= 0 || a.KVHeads <= 0 || a.HeadDim <= 0 || a.Heads%a.KVHeads != 0 {
		return fmt.Errorf("%w: attention heads %d, kv heads %d, head dim %d (heads must be a positive multiple of kv heads)", ErrShape, a.Heads, a.KVHeads, a.HeadDim)
	}
	if err := finite("attention scale", a.Scale); err != nil {
		return err
	}
	if q == nil || k == nil || v == nil || out == nil {
		return fmt.Errorf("%w: attention q, k, v and out must not be nil", ErrBuffer)
	}
	qRow, kRow := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	tq := l.Len()
	if err := need("attention q", q, tq*qRow); err != nil {
		return err
	}
	if k.Len()%kRow != 0 {
		return fmt.Errorf("%w: attention k has %d elements, not a multiple of kv heads·head dim %d", ErrShape, k.Len(), kRow)
	}
	tk := k.Len() / kRow
	if err := need("attention v", v, k.Len()); err != nil {
		return err
	}
	if err := need("attention out/dout", out, q.Len()); err != nil {
		return err
	}
	if lseOptional {
		if err := optional("attention lse", lse, tq*a.Heads); err != nil {
			return err
		}
	} else if err := need("attention lse", lse, tq*a.Heads); err != nil {
		return err
	}
	if l.KRows > tk {
		return fmt.Errorf("%w: attention spans reach key row %d, k has %d rows", ErrShape, l.KRows-1, tk)
	}
	if backward && !l.KeysDisjoint {
		return fmt.Errorf("%w: attention backward needs spans whose key rows do not overlap", ErrShape)
	}
	return nil
}

// CheckAttentionGrads validates the gradient buffers of AttentionBackward.
func CheckAttentionGrads(q, k Buffer, dq, dk, dv Buffer) error {
	if err := optional("attention dq", dq, q.Len()); err != nil {
		return err
	}
	if err := optional("attention dk", dk, k.Len()); err != nil {
		return err
	}
	return optional("attention dv", dv, k.Len())
}

// CheckSameLen checks that non-nil buffers have the length of the first
// (which must not be nil); names label them in the error.
func CheckSameLen(names []string, bufs ...Buffer) error {
	if bufs[0] == nil {
		return fmt.Errorf("%w: %s is nil", ErrBuffer, names[0])
	}
	n := bufs[0].Len()
	for i, b := range bufs[1:] {
		if b != nil && b.Len() != n {
			return fmt.Errorf("%w: %s has %d elements, %s has %d", ErrShape, names[i+1], b.Len(), names[0], n)
		}
	}
	return nil
}

// CheckLMHead validates LogProbEntropy and its backward: h [Rows, Dim],
// W [Vocab, Dim], targets of length Rows in [−1, Vocab) (negative: no
// target), and the per-row buffers given in rowBufs (nil allowed).
func CheckLMHead(s LMHead, targets []int32, h, w Buffer, rowNames []string, rowBufs ...Buffer) error {
	if s.Rows < 0 || s.Dim <= 0 || s.Vocab <= 0 {
		return fmt.Errorf("%w: lm head rows %d, dim %d, vocab %d", ErrShape, s.Rows, s.Dim, s.Vocab)
	}
	if err := finite("lm head inverse temperature", s.InvTemp); err != nil {
		return err
	}
	if err := need("lm head h", h, s.Rows*s.Dim); err != nil {
		return err
	}
	if err := need("lm head W", w, s.Vocab*s.Dim); err != nil {
		return err
	}
	if targets != nil && len(targets) != s.Rows {
		return fmt.Errorf("%w: lm head has %d targets for %d rows", ErrShape, len(targets), s.Rows)
	}
	for t, id := range targets {
		if int(id) >= s.Vocab {
			return fmt.Errorf("%w: lm head targets[%d] = %d ≥ vocab %d", ErrIndex, t, id, s.Vocab)
		}
	}
	for i, b := range rowBufs {
		if err := optional(rowNames[i], b, s.Rows); err != nil {
			return err
		}
	}
	return nil
}

// CheckLogits validates Logits: rows index h's rows, out [len(rows), Vocab].
func CheckLogits(s LMHead, rows []int32, out, h, w Buffer) error {
	if s.Dim <= 0 || s.Vocab <= 0 || s.Rows < 0 {
		return fmt.Errorf("%w: logits rows %d, dim %d, vocab %d", ErrShape, s.Rows, s.Dim, s.Vocab)
	}
	if err := finite("logits inverse temperature", s.InvTemp); err != nil {
		return err
	}
	if err := need("logits h", h, s.Rows*s.Dim); err != nil {
		return err
	}
	if err := need("logits W", w, s.Vocab*s.Dim); err != nil {
		return err
	}
	if err := need("logits out", out, len(rows)*s.Vocab); err != nil {
		return err
	}
	for i, r := range rows {
		if r < 0 || int(r) >= s.Rows {
			return fmt.Errorf("%w: logits rows[%d] = %d outside [0, %d)", ErrIndex, i, r, s.Rows)
		}
	}
	return nil
}
