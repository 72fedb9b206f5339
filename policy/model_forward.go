package policy

import (
	"fmt"
	"math"

	"github.com/agentrl/agentrl/policy/backend"
)

// arena tracks the device buffers of one computation so that they are
// freed together; the first allocation error sticks.
type arena struct {
	be   backend.Backend
	bufs []backend.Buffer
	err  error
}

func (a *arena) alloc(n int) backend.Buffer {
	if a.err != nil {
		return nil
	}
	b, err := a.be.Alloc(n)
	if err != nil {
		a.err = fmt.Errorf("policy: allocating %d floats: %w", n, err)
		return nil
	}
	a.bufs = append(a.bufs, b)
	return b
}

func (a *arena) free() {
	for _, b := range a.bufs {
		_ = a.be.Free(b)
	}
	a.bufs = nil
}

// layerActs are one decoder layer's activations over T rows: what the
// forward computes and, in training, what the backward reads.
type layerActs struct {
	xIn, rstd1, xn1           backend.Buffer
	qRaw, rstdQ, q            backend.Buffer // q: after q_norm and RoPE
	kRaw, rstdK, k, v         backend.Buffer // k: after k_norm and RoPE
	att, lse, xMid            backend.Buffer
	rstd2, xn2, gate, up, act backend.Buffer
	// lora holds each adapted projection's x·Aᵀ [T, rank] in training;
	// without gradients one scratch buffer serves every projection.
	lora [numLoRASlots]backend.Buffer
}

// dims are the sizes the layer kernels use.
type dims struct{ h, q, kv, inter, heads, kvHeads, hd int }

func (m *Model) dims() dims {
	c := m.cfg
	return dims{c.HiddenSize, c.NumAttentionHeads * c.HeadDim, c.NumKeyValueHeads * c.HeadDim,
		c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim}
}

func (m *Model) attention() backend.Attention {
	return backend.Attention{Heads: m.cfg.NumAttentionHeads, KVHeads: m.cfg.NumKeyValueHeads,
		HeadDim: m.cfg.HeadDim, Scale: float32(1 / math.Sqrt(float64(m.cfg.HeadDim)))}
}

// allocActs allocates one layer's activation buffers for t rows; rstd
// and lse buffers only when train is set (backward needs them).
func (m *Model) allocActs(a *arena, t int, train bool) *layerActs {
	d := m.dims()
	la := &layerActs{
		xn1: a.alloc(t * d.h), qRaw: a.alloc(t * d.q), q: a.alloc(t * d.q),
		kRaw: a.alloc(t * d.kv), k: a.alloc(t * d.kv), v: a.alloc(t * d.kv),
		att: a.alloc(t * d.q), xn2: a.alloc(t * d.h),
		gate: a.alloc(t * d.inter), up: a.alloc(t * d.inter), act: a.alloc(t * d.inter),
	}
	if r := m.loraRank(); r > 0 {
		for slot := range la.lora {
			switch {
			case !train && slot > 0:
				la.lora[slot] = la.lora[0]
			case train && !m.lora.layers[0][slot].on():
			default:
				la.lora[slot] = a.alloc(t * r)
			}
		}
	}
	if train {
		la.rstd1, la.rstd2, la.lse = a.alloc(t), a.alloc(t), a.alloc(t*d.heads)
		la.xMid = a.alloc(t * d.h)
		if m.cfg.QKNorm() {
			la.rstdQ, la.rstdK = a.alloc(t*d.heads), a.alloc(t*d.kvHeads)
		}
	}
	return la
}

// kvStore receives each layer's keys (after norm and RoPE) and values of
// the new rows and returns the buffers attention reads them from, for a
// KV cache; nil means attention reads the new rows themselves.
type kvStore func(layer int, k, v backend.Buffer) (ck, cv backend.Buffer, err error)

// layersForward runs the decoder layers over x [t, hidden] at positions
// pos with attention spans spans. With train, every layer gets its own
// activations (returned, for backward) and x is not modified; otherwise
// one set of scratch buffers is reused and x is updated in place. It
// returns the last layer's output.
func (m *Model) layersForward(a *arena, x backend.Buffer, t int, pos []int32, spans []backend.Span, store kvStore, train bool) ([]*layerActs, backend.Buffer, error) {
	be, d, eps := m.be, m.dims(), float32(m.cfg.RMSNormEps)
	var acts []*layerActs
	var scratch *layerActs
	tmp := a.alloc(t * d.h)
	if a.err != nil {
		return nil, nil, a.err
	}
	for l, p := range m.layers {
		la := scratch
		if train || la == nil {
			la = m.allocActs(a, t, train)
			if a.err != nil {
				return nil, nil, a.err
			}
			scratch = la
		}
		la.xIn = x
		wrap := func(op string, err error) error {
			if err != nil {
				return fmt.Errorf("policy: layer %d %s: %w", l, op, err)
			}
			return nil
		}
		if err := wrap("input_layernorm", be.RMSNormForward(t, d.h, eps, la.xn1, la.rstd1, x, p.inputNorm.w)); err != nil {
			return nil, nil, err
		}
		for _, pr := range []struct {
			name           string
			slot           int
			w, b, norm     *param
			raw, rstd, out backend.Buffer
			width, heads   int
		}{
			{"q", slotQ, p.q, p.qb, p.qNorm, la.qRaw, la.rstdQ, la.q, d.q, d.heads},
			{"k", slotK, p.k, p.kb, p.kNorm, la.kRaw, la.rstdK, la.k, d.kv, d.kvHeads},
		} {
			if err := wrap(pr.name+"_proj", be.LinearForward(backend.Linear{Rows: t, In: d.h, Out: pr.width}, pr.raw, la.xn1, pr.w.w, bufOrNil(pr.b))); err != nil {
				return nil, nil, err
			}
			if err := wrap("lora", m.loraForward(l, pr.slot, t, pr.raw, la.xn1, la.lora[pr.slot])); err != nil {
				return nil, nil, err
			}
			src := pr.raw
			if pr.norm != nil {
				if err := wrap(pr.name+"_norm", be.RMSNormForward(t*pr.heads, d.hd, eps, pr.out, pr.rstd, pr.raw, pr.norm.w)); err != nil {
					return nil, nil, err
				}
				src = pr.out
			}
			if err := wrap(pr.name+" rope", be.RoPEForward(pr.heads, d.hd, pos, m.freqs, pr.out, src)); err != nil {
				return nil, nil, err
			}
		}
		if err := wrap("v_proj", be.LinearForward(backend.Linear{Rows: t, In: d.h, Out: d.kv}, la.v, la.xn1, p.v.w, bufOrNil(p.vb))); err != nil {
			return nil, nil, err
		}
		if err := wrap("lora", m.loraForward(l, slotV, t, la.v, la.xn1, la.lora[slotV])); err != nil {
			return nil, nil, err
		}
		ck, cv := la.k, la.v
		if store != nil {
			var err error
			if ck, cv, err = store(l, la.k, la.v); err != nil {
				return nil, nil, wrap("kv cache", err)
			}
		}
		if err := wrap("attention", be.AttentionForward(m.attention(), spans, la.att, la.lse, la.q, ck, cv)); err != nil {
			return nil, nil, err
		}
		if err := wrap("o_proj", be.LinearForward(backend.Linear{Rows: t, In: d.q, Out: d.h}, tmp, la.att, p.o.w, bufOrNil(p.ob))); err != nil {
			return nil, nil, err
		}
		if err := wrap("lora", m.loraForward(l, slotO, t, tmp, la.att, la.lora[slotO])); err != nil {
			return nil, nil, err
		}
		xMid := x
		if train {
			xMid = la.xMid
		}
		if err := wrap("residual", be.Add(xMid, x, tmp)); err != nil {
			return nil, nil, err
		}
		if err := wrap("post_attention_layernorm", be.RMSNormForward(t, d.h, eps, la.xn2, la.rstd2, xMid, p.postNorm.w)); err != nil {
			return nil, nil, err
		}
		mlp := backend.Linear{Rows: t, In: d.h, Out: d.inter}
		if err := wrap("gate_proj", be.LinearForward(mlp, la.gate, la.xn2, p.gate.w, bufOrNil(p.gb))); err != nil {
			return nil, nil, err
		}
		if err := wrap("up_proj", be.LinearForward(mlp, la.up, la.xn2, p.up.w, bufOrNil(p.ub))); err != nil {
			return nil, nil, err
		}
		if err := wrap("lora", m.loraForward(l, slotGate, t, la.gate, la.xn2, la.lora[slotGate])); err != nil {
			return nil, nil, err
		}
		if err := wrap("lora", m.loraForward(l, slotUp, t, la.up, la.xn2, la.lora[slotUp])); err != nil {
			return nil, nil, err
		}
		if err := wrap("swiglu", be.SwiGLUForward(la.act, la.gate, la.up)); err != nil {
			return nil, nil, err
		}
		if err := wrap("down_proj", be.LinearForward(backend.Linear{Rows: t, In: d.inter, Out: d.h}, tmp, la.act, p.down.w, bufOrNil(p.db))); err != nil {
			return nil, nil, err
		}
		if err := wrap("lora", m.loraForward(l, slotDown, t, tmp, la.act, la.lora[slotDown])); err != nil {
			return nil, nil, err
		}
		xOut := x
		if train {
			if xOut = a.alloc(t * d.h); a.err != nil {
				return nil, nil, a.err
			}
		}
		if err := wrap("residual", be.Add(xOut, xMid, tmp)); err != nil {
			return nil, nil, err
		}
		if train {
			acts = append(acts, la)
		}
		x = xOut
	}
	return acts, x, nil
}

// embed gathers the embeddings of ids into a new [len(ids), hidden] buffer.
func (m *Model) embedTokens(a *arena, ids []int32) (backend.Buffer, error) {
	x := a.alloc(len(ids) * m.cfg.HiddenSize)
	if a.err != nil {
		return nil, a.err
	}
	if err := m.be.EmbeddingForward(x, m.embed.w, ids, m.cfg.HiddenSize); err != nil {
		return nil, fmt.Errorf("policy: embedding: %w", err)
	}
	return x, nil
}

// finalNorm applies model.norm to x [t, hidden] into a new buffer; rstd is
// allocated and filled when train is set.
func (m *Model) finalNorm(a *arena, x backend.Buffer, t int, train bool) (hf, rstd backend.Buffer, err error) {
	hf = a.alloc(t * m.cfg.HiddenSize)
	if train {
		rstd = a.alloc(t)
	}
	if a.err != nil {
		return nil, nil, a.err
	}
	if err := m.be.RMSNormForward(t, m.cfg.HiddenSize, float32(m.cfg.RMSNormEps), hf, rstd, x, m.norm.w); err != nil {
		return nil, nil, fmt.Errorf("policy: final norm: %w", err)
	}
	return hf, rstd, nil
}
