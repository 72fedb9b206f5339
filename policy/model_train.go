package policy

import (
	"context"
	"fmt"
	"math"
	"sync"

	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

var _ lm.Trainable = (*Model)(nil)

// Logits returns the logits of every position of one sequence,
// [len(ids), vocab] float32: row t is the distribution of the token after
// ids[:t+1] at temperature 1.
func (m *Model) Logits(ids []int) (*tensor.Dense, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: Logits of an empty sequence", ErrInput)
	}
	if len(ids) > m.cfg.MaxPositionEmbeddings {
		return nil, fmt.Errorf("%w: sequence of %d tokens exceeds max_position_embeddings %d", ErrInput, len(ids), m.cfg.MaxPositionEmbeddings)
	}
	if err := m.checkIDs(0, ids); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.syncWeights(); err != nil {
		return nil, err
	}
	a := &arena{be: m.be}
	defer a.free()
	n := len(ids)
	tok, pos := make([]int32, n), make([]int32, n)
	rows := make([]int32, n)
	for i, id := range ids {
		tok[i], pos[i], rows[i] = int32(id), int32(i), int32(i)
	}
	x, err := m.embedTokens(a, tok)
	if err != nil {
		return nil, err
	}
	if _, x, err = m.layersForward(a, x, n, pos, backend.PackedSpans([]int{n}), nil, false); err != nil {
		return nil, err
	}
	hf, _, err := m.finalNorm(a, x, n, false)
	if err != nil {
		return nil, err
	}
	v := m.cfg.VocabSize
	out := a.alloc(n * v)
	if a.err != nil {
		return nil, a.err
	}
	if err := m.be.Logits(backend.LMHead{Rows: n, Dim: m.cfg.HiddenSize, Vocab: v, InvTemp: 1}, rows, out, hf, m.head.w); err != nil {
		return nil, fmt.Errorf("policy: lm_head: %w", err)
	}
	data := make([]float32, n*v)
	if err := m.be.Download(data, out, 0); err != nil {
		return nil, err
	}
	return tensor.New(tensor.WithShape(n, v), tensor.WithBacking(data)), nil
}

// packedBatch is a TokenBatch laid out as one packed sequence of rows.
type packedBatch struct {
	lens    []int
	offs    []int
	ids     []int32
	pos     []int32
	targets []int32 // row r predicts targets[r]; −1: no target (last token, masked)
	invTemp float32
	t       int
}

func (m *Model) pack(batch lm.TokenBatch) (*packedBatch, error) {
	temp := batch.Temperature
	if temp == 0 {
		temp = 1
	}
	if !(temp > 0) || math.IsInf(temp, 0) {
		return nil, fmt.Errorf("%w: temperature %g, want a finite value > 0", ErrInput, batch.Temperature)
	}
	if batch.Mask != nil && len(batch.Mask) != len(batch.Tokens) {
		return nil, fmt.Errorf("%w: mask has %d rows for %d sequences", ErrInput, len(batch.Mask), len(batch.Tokens))
	}
	pb := &packedBatch{invTemp: float32(1 / temp)}
	for b, seq := range batch.Tokens {
		if len(seq) > m.cfg.MaxPositionEmbeddings {
			return nil, fmt.Errorf("%w: sequence %d has %d tokens, more than max_position_embeddings %d", ErrInput, b, len(seq), m.cfg.MaxPositionEmbeddings)
		}
		if err := m.checkIDs(b, seq); err != nil {
			return nil, err
		}
		if batch.Mask != nil && len(batch.Mask[b]) != len(seq) {
			return nil, fmt.Errorf("%w: mask row %d has %d values for %d tokens", ErrInput, b, len(batch.Mask[b]), len(seq))
		}
		pb.offs = append(pb.offs, pb.t)
		pb.lens = append(pb.lens, len(seq))
		for i, id := range seq {
			pb.ids = append(pb.ids, int32(id))
			pb.pos = append(pb.pos, int32(i))
			tgt := int32(-1)
			if i+1 < len(seq) && (batch.Mask == nil || batch.Mask[b][i+1] != 0) {
				tgt = int32(seq[i+1])
			}
			pb.targets = append(pb.targets, tgt)
		}
		pb.t += len(seq)
	}
	return pb, nil
}

// trainState is what a forward with gradients keeps for its backward.
type trainState struct {
	a        *arena
	pb       *packedBatch
	x0       backend.Buffer
	acts     []*layerActs
	xLast    backend.Buffer
	hf, rstd backend.Buffer
	lse, ent backend.Buffer
	once     sync.Once
	// loraEpoch is the model's at the forward: an adapter attached,
	// merged or unmerged before the backward makes it fail.
	loraEpoch uint64
}

// Forward computes per-token log-probabilities and entropies of the next
// tokens for sequences of different lengths, packed into one batch of rows
// with per-sequence causal attention (backend.PackedSpans). The
// log-softmax, gather and entropy run over vocabulary chunks
// (backend.Kernels.LogProbEntropy): no [tokens, vocab] logits tensor is
// ever formed. With withGrad the activations are kept for the returned
// BackwardFunc, which frees them; call it (or drop it and let the garbage
// collector reclaim CPU memory).
func (m *Model) Forward(ctx context.Context, batch lm.TokenBatch, withGrad bool) (lm.TokenStats, lm.BackwardFunc, error) {
	if err := ctx.Err(); err != nil {
		return lm.TokenStats{}, nil, err
	}
	pb, err := m.pack(batch)
	if err != nil {
		return lm.TokenStats{}, nil, err
	}
	stats := lm.TokenStats{LogProbs: make([][]float32, len(pb.lens)), Entropy: make([][]float32, len(pb.lens))}
	for b, n := range pb.lens {
		stats.LogProbs[b], stats.Entropy[b] = make([]float32, n), make([]float32, n)
	}
	if pb.t == 0 {
		if !withGrad {
			return stats, nil, nil
		}
		return stats, func(context.Context, [][]float32, [][]float32) error { return nil }, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if withGrad && m.lora != nil && m.lora.merged {
		return lm.TokenStats{}, nil, fmt.Errorf("%w: the LoRA adapter is merged into the base weights; UnmergeLoRA before training", ErrLoRA)
	}
	if err := m.syncWeights(); err != nil {
		return lm.TokenStats{}, nil, err
	}
	st := &trainState{a: &arena{be: m.be}, pb: pb, loraEpoch: m.loraEpoch}
	ok := false
	defer func() {
		if !ok {
			st.a.free()
		}
	}()
	a, t := st.a, pb.t
	if st.x0, err = m.embedTokens(a, pb.ids); err != nil {
		return lm.TokenStats{}, nil, err
	}
	// In training the layers keep x0 (the first layer's input); otherwise
	// they update it in place.
	if st.acts, st.xLast, err = m.layersForward(a, st.x0, t, pb.pos, backend.PackedSpans(pb.lens), nil, withGrad); err != nil {
		return lm.TokenStats{}, nil, err
	}
	if err := ctx.Err(); err != nil {
		return lm.TokenStats{}, nil, err
	}
	if st.hf, st.rstd, err = m.finalNorm(a, st.xLast, t, withGrad); err != nil {
		return lm.TokenStats{}, nil, err
	}
	logp, ent, lse := a.alloc(t), a.alloc(t), a.alloc(t)
	if a.err != nil {
		return lm.TokenStats{}, nil, a.err
	}
	st.lse, st.ent = lse, ent
	head := backend.LMHead{Rows: t, Dim: m.cfg.HiddenSize, Vocab: m.cfg.VocabSize, InvTemp: pb.invTemp}
	if err := m.be.LogProbEntropy(head, pb.targets, logp, ent, lse, st.hf, m.head.w); err != nil {
		return lm.TokenStats{}, nil, fmt.Errorf("policy: log-probs: %w", err)
	}
	lp, en := make([]float32, t), make([]float32, t)
	if err := m.be.Download(lp, logp, 0); err != nil {
		return lm.TokenStats{}, nil, err
	}
	if err := m.be.Download(en, ent, 0); err != nil {
		return lm.TokenStats{}, nil, err
	}
	for b, n := range pb.lens {
		off := pb.offs[b]
		for i := 0; i+1 < n; i++ {
			if pb.targets[off+i] < 0 {
				continue // masked out: reported as 0
			}
			stats.LogProbs[b][i+1] = lp[off+i]
			stats.Entropy[b][i+1] = en[off+i]
		}
	}
	if !withGrad {
		return stats, nil, nil
	}
	ok = true
	backward := func(ctx context.Context, gradLogProbs, gradEntropy [][]float32) error {
		err := fmt.Errorf("%w: lm.BackwardFunc called twice", ErrInput)
		st.once.Do(func() {
			defer st.a.free()
			err = m.backward(ctx, st, gradLogProbs, gradEntropy)
		})
		return err
	}
	return stats, backward, nil
}

// rowGrads maps per-token gradients [b][t] onto the packed rows that
// predict token t (row off+t−1); masked and position-0 entries are dropped.
func rowGrads(pb *packedBatch, g [][]float32, what string) ([]float32, error) {
	if len(g) != len(pb.lens) {
		return nil, fmt.Errorf("%w: %s has %d sequences, the forward had %d", ErrInput, what, len(g), len(pb.lens))
	}
	out := make([]float32, pb.t)
	for b, n := range pb.lens {
		if len(g[b]) != n {
			return nil, fmt.Errorf("%w: %s[%d] has %d values for %d tokens", ErrInput, what, b, len(g[b]), n)
		}
		off := pb.offs[b]
		for i := 1; i < n; i++ {
			v := g[b][i]
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%w: %s[%d][%d] = %v", ErrInput, what, b, i, v)
			}
			if pb.targets[off+i-1] >= 0 {
				out[off+i-1] = v
			}
		}
	}
	return out, nil
}

// backward propagates dL/dlogp and dL/dH through the LM head, the final
// norm, every layer in reverse and the embedding, accumulating each
// parameter's gradient on the device, then adds them to the host Grad.
func (m *Model) backward(ctx context.Context, st *trainState, gradLogProbs, gradEntropy [][]float32) error {
	pb := st.pb
	dlp, err := rowGrads(pb, gradLogProbs, "gradLogProbs")
	if err != nil {
		return err
	}
	var dent []float32
	if gradEntropy != nil {
		if dent, err = rowGrads(pb, gradEntropy, "gradEntropy"); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.params[0].w == nil {
		return fmt.Errorf("%w: the model is closed", ErrInput)
	}
	if st.loraEpoch != m.loraEpoch {
		return fmt.Errorf("%w: the adapter was attached, merged or unmerged between this forward and its backward", ErrLoRA)
	}
	be, d, t := m.be, m.dims(), pb.t
	if m.resident {
		// The gradients accumulate on the backend until the optimizer's
		// ZeroGrad; the uploads of handed-out host slices come first.
		if err := m.syncWeights(); err != nil {
			return err
		}
	}
	for _, p := range m.allParams() {
		if p.frozen {
			continue // dw stays nil: the kernels skip a nil gradient
		}
		fresh := p.dw == nil
		if err := m.gradBuffer(p); err != nil {
			return err
		}
		if !m.resident && !fresh {
			// The host accumulates; the backend's gradient is this pass's.
			if err := be.Fill(p.dw, 0); err != nil {
				return err
			}
		}
	}
	a := &arena{be: be}
	defer a.free()
	dlogp, dentB := a.alloc(t), backend.Buffer(nil)
	if dent != nil {
		dentB = a.alloc(t)
	}
	dhf, dx, dxn := a.alloc(t*d.h), a.alloc(t*d.h), a.alloc(t*d.h)
	dact, dgate, dup := a.alloc(t*d.inter), a.alloc(t*d.inter), a.alloc(t*d.inter)
	datt, dq, dqRot, dqRaw := a.alloc(t*d.q), a.alloc(t*d.q), a.alloc(t*d.q), a.alloc(t*d.q)
	dk, dkRot, dkRaw, dv := a.alloc(t*d.kv), a.alloc(t*d.kv), a.alloc(t*d.kv), a.alloc(t*d.kv)
	var du backend.Buffer // scratch of the adapters' backward
	if r := m.loraRank(); r > 0 {
		du = a.alloc(t * r)
	}
	if a.err != nil {
		return a.err
	}
	if err := be.Upload(dlogp, 0, dlp); err != nil {
		return err
	}
	if dentB != nil {
		if err := be.Upload(dentB, 0, dent); err != nil {
			return err
		}
	}
	head := backend.LMHead{Rows: t, Dim: d.h, Vocab: m.cfg.VocabSize, InvTemp: pb.invTemp}
	if err := be.LogProbEntropyBackward(head, pb.targets, dhf, m.head.dw, dlogp, dentB, st.hf, m.head.w, st.lse, st.ent); err != nil {
		return fmt.Errorf("policy: lm_head backward: %w", err)
	}
	if err := be.RMSNormBackward(t, d.h, dx, m.norm.dw, dhf, st.xLast, m.norm.w, st.rstd); err != nil {
		return fmt.Errorf("policy: final norm backward: %w", err)
	}
	zero := func(bufs ...backend.Buffer) error {
		for _, b := range bufs {
			if err := be.Fill(b, 0); err != nil {
				return err
			}
		}
		return nil
	}
	att := m.attention()
	spans := backend.PackedSpans(pb.lens)
	for l := len(m.layers) - 1; l >= 0; l-- {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, la := m.layers[l], st.acts[l]
		wrap := func(op string, err error) error {
			if err != nil {
				return fmt.Errorf("policy: layer %d %s backward: %w", l, op, err)
			}
			return nil
		}
		// MLP: x_out = x_mid + down(silu(gate(xn2)) ⊙ up(xn2)), xn2 = norm(x_mid).
		if err := zero(dact, dgate, dup, dxn); err != nil {
			return err
		}
		if err := wrap("down_proj", be.LinearBackward(backend.Linear{Rows: t, In: d.inter, Out: d.h}, dact, p.down.dw, gradOrNil(p.db), dx, la.act, p.down.w)); err != nil {
			return err
		}
		if err := wrap("lora", m.loraBackward(l, slotDown, t, dact, dx, la.act, la.lora[slotDown], du)); err != nil {
			return err
		}
		if err := wrap("swiglu", be.SwiGLUBackward(dgate, dup, dact, la.gate, la.up)); err != nil {
			return err
		}
		mlp := backend.Linear{Rows: t, In: d.h, Out: d.inter}
		if err := wrap("gate_proj", be.LinearBackward(mlp, dxn, p.gate.dw, gradOrNil(p.gb), dgate, la.xn2, p.gate.w)); err != nil {
			return err
		}
		if err := wrap("up_proj", be.LinearBackward(mlp, dxn, p.up.dw, gradOrNil(p.ub), dup, la.xn2, p.up.w)); err != nil {
			return err
		}
		if err := wrap("lora", m.loraBackward(l, slotGate, t, dxn, dgate, la.xn2, la.lora[slotGate], du)); err != nil {
			return err
		}
		if err := wrap("lora", m.loraBackward(l, slotUp, t, dxn, dup, la.xn2, la.lora[slotUp], du)); err != nil {
			return err
		}
		// dx holds dL/dx_out, the residual path's share of dL/dx_mid; the
		// norm's backward adds the MLP path's share.
		if err := wrap("post_attention_layernorm", be.RMSNormBackward(t, d.h, dx, p.postNorm.dw, dxn, la.xMid, p.postNorm.w, la.rstd2)); err != nil {
			return err
		}
		// Attention: x_mid = x_in + o(attn(rope(norm(q(xn1))), …)), xn1 = norm(x_in).
		if err := zero(datt, dq, dk, dv, dqRot, dkRot, dqRaw, dkRaw, dxn); err != nil {
			return err
		}
		if err := wrap("o_proj", be.LinearBackward(backend.Linear{Rows: t, In: d.q, Out: d.h}, datt, p.o.dw, gradOrNil(p.ob), dx, la.att, p.o.w)); err != nil {
			return err
		}
		if err := wrap("lora", m.loraBackward(l, slotO, t, datt, dx, la.att, la.lora[slotO], du)); err != nil {
			return err
		}
		if err := wrap("attention", be.AttentionBackward(att, spans, dq, dk, dv, datt, la.q, la.k, la.v, la.att, la.lse)); err != nil {
			return err
		}
		for _, pr := range []struct {
			name                  string
			slot                  int
			w, b, norm            *param
			dOut, dRot, dRaw, raw backend.Buffer
			rstd                  backend.Buffer
			width, heads          int
		}{
			{"q", slotQ, p.q, p.qb, p.qNorm, dq, dqRot, dqRaw, la.qRaw, la.rstdQ, d.q, d.heads},
			{"k", slotK, p.k, p.kb, p.kNorm, dk, dkRot, dkRaw, la.kRaw, la.rstdK, d.kv, d.kvHeads},
		} {
			dPre := pr.dRaw
			if pr.norm != nil {
				dPre = pr.dRot
			}
			if err := wrap(pr.name+" rope", be.RoPEBackward(pr.heads, d.hd, pb.pos, m.freqs, dPre, pr.dOut)); err != nil {
				return err
			}
			if pr.norm != nil {
				if err := wrap(pr.name+"_norm", be.RMSNormBackward(t*pr.heads, d.hd, pr.dRaw, pr.norm.dw, pr.dRot, pr.raw, pr.norm.w, pr.rstd)); err != nil {
					return err
				}
			}
			if err := wrap(pr.name+"_proj", be.LinearBackward(backend.Linear{Rows: t, In: d.h, Out: pr.width}, dxn, pr.w.dw, gradOrNil(pr.b), pr.dRaw, la.xn1, pr.w.w)); err != nil {
				return err
			}
			if err := wrap("lora", m.loraBackward(l, pr.slot, t, dxn, pr.dRaw, la.xn1, la.lora[pr.slot], du)); err != nil {
				return err
			}
		}
		if err := wrap("v_proj", be.LinearBackward(backend.Linear{Rows: t, In: d.h, Out: d.kv}, dxn, p.v.dw, gradOrNil(p.vb), dv, la.xn1, p.v.w)); err != nil {
			return err
		}
		if err := wrap("lora", m.loraBackward(l, slotV, t, dxn, dv, la.xn1, la.lora[slotV], du)); err != nil {
			return err
		}
		if err := wrap("input_layernorm", be.RMSNormBackward(t, d.h, dx, p.inputNorm.dw, dxn, la.xIn, p.inputNorm.w, la.rstd1)); err != nil {
			return err
		}
	}
	// Tied embeddings: the LM head's gradient is already in embed.dw, and
	// the embedding's scatter-add accumulates onto it.
	if !m.embed.frozen {
		if err := be.EmbeddingBackward(m.embed.dw, dx, pb.ids, d.h); err != nil {
			return fmt.Errorf("policy: embedding backward: %w", err)
		}
	}
	if m.resident {
		m.gradsStale = true
		return nil
	}
	var host []float32
	for _, p := range m.allParams() {
		if p.frozen {
			continue
		}
		if cap(host) < len(p.data) {
			host = make([]float32, len(p.data))
		}
		host = host[:len(p.data)]
		if err := be.Download(host, p.dw, 0); err != nil {
			return err
		}
		for i, v := range host {
			p.grad[i] += v
		}
	}
	return nil
}
