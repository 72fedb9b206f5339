package policy

import (
	"github.com/agentrl/agentrl/policy/backend"
)

// The modules of the transformer. Each is a forward and a backward over
// the backend's paired kernels, written next to each other in the style
// of llm.c: the forward records in a *Saved struct what the backward
// reads, and the backward mirrors the forward in reverse. Every backward
// accumulates into the input gradient it is given (dx += …), as the
// kernels do, so that the branches of a residual block add their shares
// into one buffer. Forward outputs are new buffers of the pass; errors
// stick in the pass (see pass).

// rows is where a pass's rows sit: n rows at positions pos (for RoPE),
// grouped into attention spans — the backend's Rows, made once per pass
// (pass.newRows) and shared by every layer; in generation, attend
// replaces the attention over spans with one over the paged KV cache.
type rows struct {
	n      int
	dev    backend.Rows
	attend attendFunc
}

// attendFunc stores a layer's keys (after norm and RoPE) and values of the
// new rows in the KV cache and writes the attention of the queries q over
// the cache into out.
type attendFunc func(layer int, a backend.Attention, out, q, k, v backend.Buffer) error

// bufOf returns p's backend weights, nil when p is absent (no bias).
func bufOf(p *param) backend.Buffer {
	if p == nil {
		return nil
	}
	return p.w
}

// gradOf returns p's backend gradient, nil when p is absent or frozen
// (the kernels skip a nil gradient).
func gradOf(p *param) backend.Buffer {
	if p == nil {
		return nil
	}
	return p.dw
}

// linear is torch.nn.Linear, y = x·Wᵀ + b with W [out, in], and when a
// LoRA adapter is attached (Hu et al., 2021) y += scale·(x·Aᵀ)·Bᵀ with A
// [r, in] and B [out, r].
type linear struct {
	name    string // the module's name in its block, "q_proj"
	path    string // its Hugging Face path, "model.layers.3.self_attn.q_proj"
	in, out int
	w, b    *param // b is nil without a bias
	lora    *loraPair
}

// linearSaved is what a linear's backward reads: its input, and with an
// adapter u = x·Aᵀ.
type linearSaved struct{ x, u backend.Buffer }

// adapter returns the projection's adapter when it takes part in the
// pass (attached and not merged).
func (l *linear) adapter(tp *pass) *loraPair {
	if !tp.lora {
		return nil
	}
	return l.lora
}

func (l *linear) forward(tp *pass, x backend.Buffer, n int, s *linearSaved) backend.Buffer {
	y := tp.alloc(n * l.out)
	tp.do(l.name, func() error {
		return tp.be.LinearForward(backend.Linear{Rows: n, In: l.in, Out: l.out}, y, x, l.w.w, bufOf(l.b))
	})
	s.x = x
	if a := l.adapter(tp); a != nil {
		r := a.rank()
		u := tp.alloc(n * r)
		tp.do(l.name+" lora_A", func() error {
			return tp.be.LinearForward(backend.Linear{Rows: n, In: l.in, Out: r}, u, x, a.a.w, nil)
		})
		tp.do(l.name+" lora_B", func() error {
			return tp.be.Gemm(backend.Gemm{TransB: true, M: n, N: l.out, K: r, Alpha: a.scale, Beta: 1}, u, a.b.w, y)
		})
		s.u = u
	}
	return y
}

// backward accumulates dx += dy·W, dW += dyᵀ·x, db += Σ dy, and with an
// adapter dB += scale·dyᵀ·u, du = scale·dy·B, dA += duᵀ·x, dx += du·A.
func (l *linear) backward(tp *pass, s *linearSaved, dx, dy backend.Buffer, n int) {
	tp.do(l.name, func() error {
		return tp.be.LinearBackward(backend.Linear{Rows: n, In: l.in, Out: l.out}, dx, gradOf(l.w), gradOf(l.b), dy, s.x, l.w.w)
	})
	a := l.adapter(tp)
	if a == nil {
		return
	}
	r := a.rank()
	du := tp.alloc(n * r) // overwritten: Beta 0
	tp.do(l.name+" lora_B", func() error {
		if err := tp.be.Gemm(backend.Gemm{TransA: true, M: l.out, N: r, K: n, Alpha: a.scale, Beta: 1}, dy, s.u, a.b.dw); err != nil {
			return err
		}
		return tp.be.Gemm(backend.Gemm{M: n, N: r, K: l.out, Alpha: a.scale}, dy, a.b.w, du)
	})
	tp.do(l.name+" lora_A", func() error {
		return tp.be.LinearBackward(backend.Linear{Rows: n, In: l.in, Out: r}, dx, a.a.dw, nil, du, s.x, a.a.w)
	})
}

// rmsNorm is transformers' Qwen3RMSNorm / LlamaRMSNorm over rows of dim
// values: out = w ⊙ x / √(mean(x²) + eps).
type rmsNorm struct {
	name string
	dim  int
	eps  float32
	w    *param
}

// normSaved is what a norm's backward reads: its input and the
// reciprocal RMS of each row.
type normSaved struct{ x, rstd backend.Buffer }

func (m *rmsNorm) forward(tp *pass, x backend.Buffer, n int, s *normSaved) backend.Buffer {
	out := tp.alloc(n * m.dim)
	rstd := tp.allocIf(tp.train, n)
	tp.do(m.name, func() error { return tp.be.RMSNormForward(n, m.dim, m.eps, out, rstd, x, m.w.w) })
	s.x, s.rstd = x, rstd
	return out
}

func (m *rmsNorm) backward(tp *pass, s *normSaved, dx, dout backend.Buffer, n int) {
	tp.do(m.name, func() error { return tp.be.RMSNormBackward(n, m.dim, dx, gradOf(m.w), dout, s.x, m.w.w, s.rstd) })
}

// rope rotates heads of dim values by position (transformers'
// apply_rotary_pos_emb, rotate_half layout).
type rope struct {
	heads, dim int
	freqs      []float32
}

// forward rotates x in place.
func (p *rope) forward(tp *pass, name string, x backend.Buffer, r *rows) {
	tp.do(name+" rope", func() error { return tp.be.RoPEForward(p.heads, p.dim, r.dev, p.freqs, x, x) })
}

func (p *rope) backward(tp *pass, name string, dx, dout backend.Buffer, r *rows) {
	tp.do(name+" rope", func() error { return tp.be.RoPEBackward(p.heads, p.dim, r.dev, p.freqs, dx, dout) })
}

// attention is the self-attention block: q/k/v projections, Qwen3's
// per-head norm of queries and keys (nil elsewhere), RoPE, causal
// grouped-query attention within spans, and the output projection.
type attention struct {
	layer        int // the KV cache's layer index
	q, k, v, o   linear
	qNorm, kNorm *rmsNorm
	qRope, kRope rope
	shape        backend.Attention
}

// attnSaved is what the attention block's backward reads.
type attnSaved struct {
	q, k, v, o   linearSaved
	qNorm, kNorm normSaved
	// qr, kr are the rotated queries and keys, vv the values and out the
	// attention's output; lse its log-sum-exp per row and head.
	qr, kr, vv, out, lse backend.Buffer
}

func (a *attention) forward(tp *pass, x backend.Buffer, r *rows, s *attnSaved) backend.Buffer {
	q := a.project(tp, &a.q, a.qNorm, &a.qRope, x, r, &s.q, &s.qNorm)
	k := a.project(tp, &a.k, a.kNorm, &a.kRope, x, r, &s.k, &s.kNorm)
	v := a.v.forward(tp, x, r.n, &s.v)
	out := tp.alloc(r.n * a.o.in)
	lse := tp.allocIf(tp.train, r.n*a.shape.Heads)
	if r.attend != nil {
		tp.do("paged attention", func() error { return r.attend(a.layer, a.shape, out, q, k, v) })
	} else {
		tp.do("attention", func() error { return tp.be.AttentionForward(a.shape, r.dev, out, lse, q, k, v) })
	}
	s.qr, s.kr, s.vv, s.out, s.lse = q, k, v, out, lse
	return a.o.forward(tp, out, r.n, &s.o)
}

// project computes queries or keys: the projection, the per-head norm
// when there is one, and RoPE in place.
func (a *attention) project(tp *pass, lin *linear, norm *rmsNorm, rot *rope, x backend.Buffer, r *rows, ls *linearSaved, ns *normSaved) backend.Buffer {
	h := lin.forward(tp, x, r.n, ls)
	if norm != nil {
		h = norm.forward(tp, h, r.n*rot.heads, ns)
	}
	rot.forward(tp, lin.name, h, r)
	return h
}

func (a *attention) backward(tp *pass, s *attnSaved, dx, dy backend.Buffer, r *rows) {
	datt := tp.zeros(r.n * a.o.in)
	a.o.backward(tp, &s.o, datt, dy, r.n)
	dq, dk, dv := tp.zeros(r.n*a.q.out), tp.zeros(r.n*a.k.out), tp.zeros(r.n*a.v.out)
	tp.do("attention", func() error {
		return tp.be.AttentionBackward(a.shape, r.dev, dq, dk, dv, datt, s.qr, s.kr, s.vv, s.out, s.lse)
	})
	a.projectBackward(tp, &a.q, a.qNorm, &a.qRope, dx, dq, r, &s.q, &s.qNorm)
	a.projectBackward(tp, &a.k, a.kNorm, &a.kRope, dx, dk, r, &s.k, &s.kNorm)
	a.v.backward(tp, &s.v, dx, dv, r.n)
}

func (a *attention) projectBackward(tp *pass, lin *linear, norm *rmsNorm, rot *rope, dx, dout backend.Buffer, r *rows, ls *linearSaved, ns *normSaved) {
	dh := tp.zeros(r.n * lin.out)
	rot.backward(tp, lin.name, dh, dout, r)
	if norm != nil {
		dRaw := tp.zeros(r.n * lin.out)
		norm.backward(tp, ns, dRaw, dh, r.n*rot.heads)
		dh = dRaw
	}
	lin.backward(tp, ls, dx, dh, r.n)
}

// mlp is the SwiGLU feed-forward block: down(silu(gate(x)) ⊙ up(x)).
type mlp struct {
	gate, up, down linear
}

// mlpSaved is what the MLP's backward reads.
type mlpSaved struct {
	gate, up, down linearSaved
	g, u           backend.Buffer // the gate and up projections
}

func (f *mlp) forward(tp *pass, x backend.Buffer, n int, s *mlpSaved) backend.Buffer {
	s.g = f.gate.forward(tp, x, n, &s.gate)
	s.u = f.up.forward(tp, x, n, &s.up)
	act := tp.alloc(n * f.gate.out)
	tp.do("swiglu", func() error { return tp.be.SwiGLUForward(act, s.g, s.u) })
	return f.down.forward(tp, act, n, &s.down)
}

func (f *mlp) backward(tp *pass, s *mlpSaved, dx, dy backend.Buffer, n int) {
	dact := tp.zeros(n * f.down.in)
	f.down.backward(tp, &s.down, dact, dy, n)
	dg, du := tp.zeros(n*f.gate.out), tp.zeros(n*f.up.out)
	tp.do("swiglu", func() error { return tp.be.SwiGLUBackward(dg, du, dact, s.g, s.u) })
	f.gate.backward(tp, &s.gate, dx, dg, n)
	f.up.backward(tp, &s.up, dx, du, n)
}

// decoderLayer is one pre-norm transformer block (transformers'
// Qwen3DecoderLayer / LlamaDecoderLayer):
//
//	h = x + attn(input_layernorm(x));  out = h + mlp(post_attention_layernorm(h))
type decoderLayer struct {
	where               string // "layer 3", for errors
	inputNorm, postNorm rmsNorm
	attn                attention
	mlp                 mlp
}

// layerSaved is what a layer's backward reads.
type layerSaved struct {
	norm1 normSaved
	attn  attnSaved
	norm2 normSaved
	mlp   mlpSaved
}

func (l *decoderLayer) forward(tp *pass, x backend.Buffer, r *rows, s *layerSaved) backend.Buffer {
	h := l.inputNorm.forward(tp, x, r.n, &s.norm1)
	h = l.attn.forward(tp, h, r, &s.attn)
	x = tp.residual(x, h)
	h = l.postNorm.forward(tp, x, r.n, &s.norm2)
	h = l.mlp.forward(tp, h, r.n, &s.mlp)
	return tp.residual(x, h)
}

// backward turns dx from dL/d(out) into dL/d(x): the residual paths
// carry it through unchanged and each branch adds its share.
func (l *decoderLayer) backward(tp *pass, s *layerSaved, dx backend.Buffer, r *rows) {
	dh := tp.zeros(dx.Len())
	l.mlp.backward(tp, &s.mlp, dh, dx, r.n)
	l.postNorm.backward(tp, &s.norm2, dx, dh, r.n)
	dh = tp.zeros(dx.Len())
	l.attn.backward(tp, &s.attn, dh, dx, r)
	l.inputNorm.backward(tp, &s.norm1, dx, dh, r.n)
}

// projection returns the layer's linear of a LoRA slot (q, k, v, o,
// gate, up, down).
func (l *decoderLayer) projection(slot int) *linear {
	return [numLoRASlots]*linear{&l.attn.q, &l.attn.k, &l.attn.v, &l.attn.o, &l.mlp.gate, &l.mlp.up, &l.mlp.down}[slot]
}

// residual adds a branch's output h to the residual stream x, in place:
// into x when the pass keeps nothing, else into h (the backward reads x,
// the input of the block's norm, but never a branch's output — the
// output projections save their inputs, not their outputs), so that no
// buffer is allocated for the sum.
func (tp *pass) residual(x, h backend.Buffer) backend.Buffer {
	out := x
	if tp.train {
		out = h
	}
	tp.do("residual", func() error { return tp.be.Add(out, x, h) })
	return out
}

// embedding is the token embedding table [vocab, hidden].
type embedding struct {
	dim int
	w   *param
}

func (e *embedding) forward(tp *pass, ids []int32) backend.Buffer {
	x := tp.alloc(len(ids) * e.dim)
	tp.do("embedding", func() error { return tp.be.EmbeddingForward(x, e.w.w, ids, e.dim) })
	return x
}

func (e *embedding) backward(tp *pass, dx backend.Buffer, ids []int32) {
	if e.w.frozen {
		return
	}
	tp.do("embedding", func() error { return tp.be.EmbeddingBackward(e.w.dw, dx, ids, e.dim) })
}

// lmHead projects final hidden states onto the vocabulary; w is the
// embedding table when the embeddings are tied.
type lmHead struct {
	dim, vocab int
	w          *param
}

// headSaved is what the log-probabilities' backward reads.
type headSaved struct{ h, lse, ent backend.Buffer }

// logProbs computes per row the log-probability of its target and the
// entropy of its distribution at 1/invTemp, over vocabulary chunks
// (backend.Kernels.LogProbEntropy): no [rows, vocab] logits are formed.
func (hd *lmHead) logProbs(tp *pass, h backend.Buffer, targets []int32, invTemp float32, s *headSaved) (logp, ent backend.Buffer) {
	n := len(targets)
	logp, ent, lse := tp.alloc(n), tp.alloc(n), tp.alloc(n)
	spec := backend.LMHead{Rows: n, Dim: hd.dim, Vocab: hd.vocab, InvTemp: invTemp}
	tp.do("log-probs", func() error { return tp.be.LogProbEntropy(spec, targets, logp, ent, lse, h, hd.w.w) })
	s.h, s.lse, s.ent = h, lse, ent
	return logp, ent
}

// logProbsBackward accumulates dh and the head's gradient from the
// gradients of the log-probabilities and (when not nil) the entropies.
func (hd *lmHead) logProbsBackward(tp *pass, s *headSaved, dh, dlogp, dent backend.Buffer, targets []int32, invTemp float32) {
	spec := backend.LMHead{Rows: len(targets), Dim: hd.dim, Vocab: hd.vocab, InvTemp: invTemp}
	tp.do("lm_head", func() error {
		return tp.be.LogProbEntropyBackward(spec, targets, dh, gradOf(hd.w), dlogp, dent, s.h, hd.w.w, s.lse, s.ent)
	})
}

// logits computes the logits of the selected rows of h at temperature 1,
// [len(which), vocab].
func (hd *lmHead) logits(tp *pass, h backend.Buffer, n int, which []int32) backend.Buffer {
	out := tp.alloc(len(which) * hd.vocab)
	spec := backend.LMHead{Rows: n, Dim: hd.dim, Vocab: hd.vocab, InvTemp: 1}
	tp.do("lm_head", func() error { return tp.be.Logits(spec, which, out, h, hd.w.w) })
	return out
}

// transformer is the whole decoder: embedding, layers, final norm and
// LM head.
type transformer struct {
	embed  embedding
	layers []decoderLayer
	norm   rmsNorm
	head   lmHead
}

// hiddenSaved is what the decoder's backward reads: every layer's saved
// activations, or with activation checkpointing every layer's input only
// (inputs), from which the backward recomputes the rest.
type hiddenSaved struct {
	layers []layerSaved
	inputs []backend.Buffer
	norm   normSaved
}

// hidden runs the embedding, every layer and the final norm over ids and
// returns the final hidden states [len(ids), hidden]. A pass that keeps
// nothing recycles each layer's buffers for the next.
func (t *transformer) hidden(tp *pass, ids []int32, r *rows, s *hiddenSaved) backend.Buffer {
	x := t.embed.forward(tp, ids)
	var scratch layerSaved
	keep := tp.train && !tp.checkpoint // every layer's activations stay for the backward
	switch {
	case keep:
		s.layers = make([]layerSaved, len(t.layers))
	case tp.train:
		s.inputs = make([]backend.Buffer, len(t.layers))
	}
	for i := range t.layers {
		l := &t.layers[i]
		ls := &scratch
		if keep {
			ls = &s.layers[i]
		} else if tp.train {
			s.inputs[i] = x
			scratch = layerSaved{}
		}
		tp.checkCtx()
		mark := tp.mark()
		tp.where = l.where
		x = l.forward(tp, x, r, ls)
		if !keep {
			// The layer's buffers serve the next one; a checkpointed
			// pass keeps the output, the next layer's input.
			tp.recycle(mark, x)
		}
	}
	tp.where = ""
	if tp.train && !keep {
		tp.releaseSpare() // the recycled layer buffers: the backward makes its own
	}
	return t.norm.forward(tp, x, r.n, &s.norm)
}

// hiddenBackward propagates dh = dL/d(final hidden states) through the
// final norm, the layers in reverse and the embedding.
func (t *transformer) hiddenBackward(tp *pass, s *hiddenSaved, dh backend.Buffer, ids []int32, r *rows) {
	dx := tp.zeros(dh.Len())
	t.norm.backward(tp, &s.norm, dx, dh, r.n)
	tp.headGradsDone()
	for i := len(t.layers) - 1; i >= 0; i-- {
		l := &t.layers[i]
		tp.checkCtx()
		mark := tp.mark()
		tp.where = l.where
		tp.layerGradsStart(i)
		ls := &layerSaved{}
		if s.inputs != nil {
			// Activation checkpointing: the layer's forward again, from
			// its saved input, keeping what its backward reads.
			train := tp.train
			tp.train = true
			l.forward(tp, s.inputs[i], r, ls)
			tp.train = train
		} else {
			ls = &s.layers[i]
		}
		l.backward(tp, ls, dx, r)
		tp.layerGradsDone(i)
		tp.recycle(mark)
	}
	tp.where = ""
	// Tied embeddings: the LM head's gradient is already in the table's,
	// and the scatter-add accumulates onto it.
	t.embed.backward(tp, dx, ids)
}
