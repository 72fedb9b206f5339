package backend

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Sentinel errors; a Backend wraps one of them with the argument at fault.
var (
	// ErrShape: sizes that do not match each other or the buffers' lengths.
	ErrShape = errors.New("backend: shape mismatch")
	// ErrIndex: a token id, target or position outside its valid range.
	ErrIndex = errors.New("backend: index out of range")
	// ErrBuffer: a nil or freed buffer, or one allocated by another backend.
	ErrBuffer = errors.New("backend: invalid buffer")
	// ErrArg: a scalar argument out of its domain (eps ≤ 0, NaN scale, …).
	ErrArg = errors.New("backend: invalid argument")
)

// Buffer is a block of float32 memory owned by the Backend that allocated
// it (host memory for the CPU backend, device memory for CUDA). Its
// contents are reached only through the Backend's Upload and Download.
type Buffer interface {
	// Len is the number of float32 elements.
	Len() int
}

// Memory allocates buffers and moves data between them and the host.
type Memory interface {
	// Alloc returns a zeroed buffer of n elements (n ≥ 0).
	Alloc(n int) (Buffer, error)
	// Free releases b; using b afterwards is an ErrBuffer error.
	Free(b Buffer) error
	// Upload copies src into dst starting at element off.
	Upload(dst Buffer, off int, src []float32) error
	// Download copies len(dst) elements of src starting at element off.
	Download(dst []float32, src Buffer, off int) error
	// Copy copies n elements from src[srcOff:] to dst[dstOff:]; the two
	// ranges must not overlap when src and dst are the same buffer. It is
	// how new K/V rows are appended to a KV cache.
	Copy(dst Buffer, dstOff int, src Buffer, srcOff, n int) error
	// Fill sets every element of b to v (Fill(b, 0) zeroes a gradient).
	Fill(b Buffer, v float32) error
}

// Gemm describes C = Alpha·op(A)·op(B) + Beta·C on row-major matrices
// (BLAS sgemm): op(A) is M×K (A stored K×M when TransA), op(B) is K×N
// (B stored N×K when TransB), C is M×N, all contiguous. With Batch > 1
// the product is repeated Batch times, matrix i starting at i·StrideA,
// i·StrideB and i·StrideC elements (cuBLAS SgemmStridedBatched; an input
// stride of 0 reuses one matrix). Buffers may be longer than the matrices
// need. Beta = 0 overwrites C without reading it.
type Gemm struct {
	TransA, TransB            bool
	M, N, K                   int
	Alpha, Beta               float32
	Batch                     int // 0 and 1 both mean a single product
	StrideA, StrideB, StrideC int
}

// Linear is the shape of y = x·Wᵀ + b: x [Rows, In], W [Out, In] (the
// PyTorch nn.Linear layout, as stored in safetensors), b [Out], y [Rows, Out].
type Linear struct{ Rows, In, Out int }

// Attention is the head layout of causal grouped-query attention:
// q [Tq, Heads, HeadDim], k and v [Tk, KVHeads, HeadDim], query head h
// reading key/value head h/(Heads/KVHeads) (transformers' repeat_kv).
// Scale multiplies q·k; 1/√HeadDim in Qwen and Llama.
type Attention struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32
}

// Span is one sequence of an attention call: query rows
// [Q0, Q0+QLen) attend to key/value rows [K0, K0+KLen). The queries are
// the last QLen positions of the KLen keys, so query i (0-based) sees keys
// K0 … K0+KLen−QLen+i: causal attention when the keys are the queries'
// own rows (training, Q0 = K0, QLen = KLen), and decode against a KV
// cache when KLen − QLen rows of earlier keys precede them. Query rows of
// different spans must not overlap; rows in no span get zero output.
type Span struct{ Q0, QLen, K0, KLen int }

// PackedSpans returns the spans of sequences packed back to back in one
// [ΣL, …] tensor, for training (queries and keys are the same rows).
func PackedSpans(lengths []int) []Span {
	spans := make([]Span, 0, len(lengths))
	off := 0
	for _, l := range lengths {
		spans = append(spans, Span{Q0: off, QLen: l, K0: off, KLen: l})
		off += l
	}
	return spans
}

// PaddedSpans returns the spans of a [B, T] batch, right-padded: sequence
// b holds rows [b·T, b·T+lengths[b]); padded rows belong to no span.
func PaddedSpans(t int, lengths []int) []Span {
	spans := make([]Span, 0, len(lengths))
	for b, l := range lengths {
		spans = append(spans, Span{Q0: b * t, QLen: l, K0: b * t, KLen: l})
	}
	return spans
}

// Rows is the layout of a pass's token rows on a backend: the position of
// each row (RoPE's angle is position × frequency) and the attention spans
// that group the rows into sequences. Kernels.NewRows makes it once per
// batch and every layer's RoPE and attention calls share it, so that a
// device backend copies positions, spans and the tiles derived from them
// to the device once per batch instead of once per call (on a GPU each
// such copy waits for the queued kernels: once per layer it would leave
// the device idle once per layer), and checks them once. The backend that
// made it owns it; Kernels.FreeRows releases it.
type Rows interface {
	// Len is the number of rows: the length of the positions, the rows of
	// the q, k-projection and v-projection buffers of the pass.
	Len() int
}

// RowLayout is the validated content of a Rows, for backends: private
// copies of the positions and spans, and what the attention checks need
// of them, computed once.
type RowLayout struct {
	Pos   []int32
	Spans []Span
	// QRows and KRows are the query and key rows the spans reach
	// (max Q0+QLen and K0+KLen); KeysDisjoint says that no key row
	// belongs to two spans with queries (what a backward needs).
	QRows, KRows int
	KeysDisjoint bool
}

// NewRowLayout validates and copies the layout of len(pos) rows: every
// position ≥ 0 (ErrIndex), every span with QLen, KLen ≥ 0, KLen ≥ QLen,
// Q0, K0 ≥ 0 and its query rows inside [0, len(pos)), no query row in
// two spans (ErrShape). Key rows are checked against the k buffer by
// CheckAttention.
func NewRowLayout(pos []int32, spans []Span) (RowLayout, error) {
	for t, p := range pos {
		if p < 0 {
			return RowLayout{}, fmt.Errorf("%w: rows pos[%d] = %d is negative", ErrIndex, t, p)
		}
	}
	l := RowLayout{Pos: slices.Clone(pos), Spans: slices.Clone(spans), KeysDisjoint: true}
	n := len(pos)
	qUsed := make([]bool, n)
	type keyRange struct{ lo, hi int }
	var keys []keyRange
	for i, s := range spans {
		if s.Q0 < 0 || s.QLen < 0 || s.K0 < 0 || s.KLen < s.QLen || s.Q0+s.QLen > n {
			return RowLayout{}, fmt.Errorf("%w: rows spans[%d] = %+v outside rows [0,%d), or a negative offset, or KLen < QLen", ErrShape, i, s, n)
		}
		for r := s.Q0; r < s.Q0+s.QLen; r++ {
			if qUsed[r] {
				return RowLayout{}, fmt.Errorf("%w: rows spans[%d] query row %d already belongs to another span", ErrShape, i, r)
			}
			qUsed[r] = true
		}
		l.QRows = max(l.QRows, s.Q0+s.QLen)
		l.KRows = max(l.KRows, s.K0+s.KLen)
		if s.QLen > 0 && s.KLen > 0 {
			keys = append(keys, keyRange{s.K0, s.K0 + s.KLen})
		}
	}
	slices.SortFunc(keys, func(a, b keyRange) int { return a.lo - b.lo })
	for i := 1; i < len(keys); i++ {
		if keys[i].lo < keys[i-1].hi {
			l.KeysDisjoint = false
		}
	}
	return l, nil
}

// Len is the number of rows.
func (l *RowLayout) Len() int { return len(l.Pos) }

// LMHead is the shape of the vocabulary projection: final hidden states
// h [Rows, Dim], LM-head weight W [Vocab, Dim]; logits z = InvTemp·h·Wᵀ
// (InvTemp = 1/temperature, verl's logits.div_(temperature); 0 means 1).
type LMHead struct {
	Rows, Dim, Vocab int
	InvTemp          float32
}

// Scale returns InvTemp, or 1 when it is unset.
func (s LMHead) Scale() float32 {
	if s.InvTemp == 0 {
		return 1
	}
	return s.InvTemp
}

// RoPEFreqs returns the inverse frequencies of rotary embeddings,
// inv_freq[i] = theta^(−2i/dim) for i < dim/2, rounded to float32 as in
// transformers' _compute_default_rope_parameters. Variants (Llama 3
// scaling, NTK) rescale this table before passing it to the kernels.
func RoPEFreqs(theta float64, dim int) []float32 {
	if dim < 2 {
		return nil
	}
	f := make([]float32, dim/2)
	for i := range f {
		// transformers computes base ** (arange(0, dim, 2).float() / dim)
		// in float32 and inverts it.
		e := float32(2*i) / float32(dim)
		f[i] = float32(1 / float64(float32(math.Pow(theta, float64(e)))))
	}
	return f
}

// Kernels are the paired forward/backward operations of the transformer.
// Shapes are in the doc comment of each method; see the package doc for
// the conventions (accumulating backward, nil gradients, errors).
type Kernels interface {
	// Gemm computes the (batched) product described by g.
	Gemm(g Gemm, a, b, c Buffer) error

	// LinearForward computes y = x·Wᵀ (+ bias when bias is not nil).
	LinearForward(s Linear, y, x, w, bias Buffer) error
	// LinearBackward accumulates dx += dy·W, dW += dyᵀ·x, db += Σ_rows dy.
	LinearBackward(s Linear, dx, dw, db, dy, x, w Buffer) error

	// EmbeddingForward gathers out[t] = table[ids[t]]; table [V, dim],
	// out [len(ids), dim].
	EmbeddingForward(out, table Buffer, ids []int32, dim int) error
	// EmbeddingBackward scatter-adds dtable[ids[t]] += dout[t].
	EmbeddingBackward(dtable, dout Buffer, ids []int32, dim int) error

	// RMSNormForward computes out = w ⊙ x · rstd per row of x [rows, dim],
	// rstd = 1/√(mean(x²) + eps) (transformers' Qwen3RMSNorm / LlamaRMSNorm),
	// and stores rstd [rows] for backward when rstd is not nil. With
	// rows = T·heads and dim = head_dim it is Qwen3's per-head q_norm/k_norm.
	RMSNormForward(rows, dim int, eps float32, out, rstd, x, w Buffer) error
	// RMSNormBackward accumulates dx and dw (dw may be nil) from dout,
	// using x, w and the rstd saved by the forward.
	RMSNormBackward(rows, dim int, dx, dw, dout, x, w, rstd Buffer) error

	// NewRows returns the layout of len(pos) rows for the RoPE and
	// attention calls of a pass (see Rows): row t at position pos[t] ≥ 0,
	// grouped into spans (nil for a pass without attention), validated as
	// NewRowLayout says. The backend keeps its own copies; the caller may
	// reuse the slices.
	NewRows(pos []int32, spans []Span) (Rows, error)
	// FreeRows releases r; using r afterwards is an ErrBuffer error.
	FreeRows(r Rows) error

	// RoPEForward rotates x [r.Len(), heads, headDim] by the angles
	// pos[t]·freqs[i] of r's positions in transformers' rotate_half
	// layout: for i < headDim/2, out[i] = x[i]·cos − x[i+headDim/2]·sin and
	// out[i+headDim/2] = x[i+headDim/2]·cos + x[i]·sin. len(freqs) must be
	// headDim/2 (see RoPEFreqs). out may be x.
	RoPEForward(heads, headDim int, r Rows, freqs []float32, out, x Buffer) error
	// RoPEBackward accumulates dx += Rᵀ·dout (rotation by the opposite angle).
	RoPEBackward(heads, headDim int, r Rows, freqs []float32, dx, dout Buffer) error

	// AttentionForward computes, for each span of r and query head,
	// out = softmax(Scale·q·kᵀ, causal) · v with q [r.Len(), Heads,
	// HeadDim], k, v [Tk, KVHeads, HeadDim], out [r.Len(), Heads, HeadDim].
	// When lse [r.Len(), Heads] is not nil it receives each row's
	// log-sum-exp of the scaled scores, which AttentionBackward needs.
	AttentionForward(a Attention, r Rows, out, lse, q, k, v Buffer) error
	// AttentionBackward accumulates dq, dk, dv from dout, recomputing the
	// probabilities from q, k and the saved lse; out is the forward output.
	// Key ranges of different spans must not overlap.
	AttentionBackward(a Attention, r Rows, dq, dk, dv, dout, q, k, v, out, lse Buffer) error

	// SwiGLUForward computes out = silu(gate) ⊙ up, silu(g) = g·σ(g),
	// elementwise over equal-length buffers.
	SwiGLUForward(out, gate, up Buffer) error
	// SwiGLUBackward accumulates dgate += dout·up·σ(g)(1 + g(1−σ(g))) and
	// dup += dout·silu(g).
	SwiGLUBackward(dgate, dup, dout, gate, up Buffer) error

	// Add computes out = a + b elementwise; out may be a or b. Its backward
	// is Axpy of the output gradient into both inputs' gradients.
	Add(out, a, b Buffer) error
	// Axpy accumulates y += alpha·x elementwise.
	Axpy(alpha float32, x, y Buffer) error

	// LogProbEntropy computes, for rows of final hidden states h [Rows, Dim]
	// and LM-head weight W [Vocab, Dim], with logits z = InvTemp·h·Wᵀ and
	// p = softmax(z): logp[t] = log p[targets[t]] (0 when targets[t] < 0),
	// entropy[t] = −Σ_j p_j log p_j, and lse[t] = log Σ_j exp z_j. It
	// works over chunks of the vocabulary with an online log-sum-exp, so
	// the [Rows, Vocab] logits are never held at once (verl's
	// logprobs_from_logits and entropy_from_logits, fused). entropy may be
	// nil when not needed.
	LogProbEntropy(s LMHead, targets []int32, logp, entropy, lse, h, w Buffer) error
	// LogProbEntropyBackward accumulates dh and dW (either may be nil) from
	// dlogp [Rows] and dentropy [Rows] (nil: no entropy term), recomputing
	// logits chunk by chunk: dz_j = dlogp·(1[j = target] − p_j)
	// − dentropy·p_j·(log p_j + H), times InvTemp. entropy and lse are the
	// forward's outputs (entropy may be nil when dentropy is nil).
	LogProbEntropyBackward(s LMHead, targets []int32, dh, dw, dlogp, dentropy, h, w, lse, entropy Buffer) error

	// Logits computes out[i] = InvTemp·h[rows[i]]·Wᵀ, out [len(rows), Vocab]:
	// the logits of selected positions (the last of each sequence when
	// sampling) without projecting the others.
	Logits(s LMHead, rows []int32, out, h, w Buffer) error
}

// Backend is a device that runs the transformer: memory plus kernels.
// Implementations are safe for concurrent use on distinct buffers.
type Backend interface {
	// Name identifies the backend and its kernel choice, e.g.
	// "cpu(avx2-fma-6x16, 2 workers)".
	Name() string
	Memory
	Kernels
}
