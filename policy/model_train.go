package policy

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
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
	if err := m.w.sync(); err != nil {
		return nil, err
	}
	n := len(ids)
	tok, pos := make([]int32, n), make([]int32, n)
	for i, id := range ids {
		tok[i], pos[i] = int32(id), int32(i)
	}
	tp := m.newPass(false)
	defer tp.free()
	r := tp.newRows(pos, backend.PackedSpans([]int{n}))
	hf := m.net.hidden(tp, tok, r, &hiddenSaved{})
	out := m.net.head.logits(tp, hf, n, pos) // every row: pos is 0…n−1
	if !tp.ok() {
		return nil, tp.err
	}
	data := make([]float32, n*m.cfg.VocabSize)
	if err := m.be.Download(data, out, 0); err != nil {
		return nil, err
	}
	return tensor.New(tensor.WithShape(n, m.cfg.VocabSize), tensor.WithBacking(data)), nil
}

// newPass returns a tape over the model's backend; LoRA adapters take
// part when one is attached and not merged. The caller holds m.mu.
func (m *Model) newPass(train bool) *pass {
	tp := newPass(m.be, train, m.lora != nil && !m.lora.merged)
	tp.checkpoint = train && m.checkpoint
	return tp
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
	tp     *pass // the forward's tape: its buffers hold the activations
	pb     *packedBatch
	r      *rows
	hidden hiddenSaved
	head   headSaved
	once   sync.Once
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
		// No token, no gradient; a rank of a sharded job still takes its
		// part in the reductions of the backward (zeros).
		return stats, func(ctx context.Context, _, _ [][]float32) error { return m.emptyBackward(ctx) }, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if withGrad && m.lora != nil && m.lora.merged {
		return lm.TokenStats{}, nil, fmt.Errorf("%w: the LoRA adapter is merged into the base weights; UnmergeLoRA before training", ErrLoRA)
	}
	if err := m.w.sync(); err != nil {
		return lm.TokenStats{}, nil, err
	}
	tp := m.newPass(withGrad)
	tp.ctx = ctx
	st := &trainState{tp: tp, pb: pb, loraEpoch: m.loraEpoch, r: tp.newRows(pb.pos, backend.PackedSpans(pb.lens))}
	ok := false
	defer func() {
		if !ok {
			tp.free()
		}
	}()
	t := pb.t
	hf := m.net.hidden(tp, pb.ids, st.r, &st.hidden)
	if err := ctx.Err(); err != nil {
		return lm.TokenStats{}, nil, err
	}
	logp, ent := m.net.head.logProbs(tp, hf, pb.targets, pb.invTemp, &st.head)
	if !tp.ok() {
		return lm.TokenStats{}, nil, tp.err
	}
	if withGrad {
		m.noteActivations(tp.maxElems)
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
			defer st.tp.free()
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
	if m.w.closed() {
		return fmt.Errorf("%w: the model is closed", ErrInput)
	}
	if st.loraEpoch != m.loraEpoch {
		return fmt.Errorf("%w: the adapter was attached, merged or unmerged between this forward and its backward", ErrLoRA)
	}
	if m.w.onBackend {
		// The gradients accumulate on the backend until the optimizer's
		// ZeroGrad; the uploads of handed-out host slices come first.
		if err := m.w.sync(); err != nil {
			return err
		}
	}
	if err := m.w.prepareGrads(); err != nil {
		return err
	}
	tp := m.newPass(false)
	tp.ctx = ctx
	defer tp.free()
	if sink := m.gradSink(); sink != nil {
		// Stage 2 of a sharded optimizer: each layer's gradients leave
		// the model as soon as they are final (gradFlow).
		flow, err := newGradFlow(ctx, m.be, sink, m.devOpt.shard.groups)
		if flow == nil {
			return err
		}
		tp.grads = flow
		if err != nil {
			return flow.finish(err)
		}
	}
	t, h := pb.t, m.cfg.HiddenSize
	dlogp, dentB := tp.alloc(t), tp.allocIf(dent != nil, t)
	tp.do("upload", func() error {
		if err := m.be.Upload(dlogp, 0, dlp); err != nil {
			return err
		}
		if dentB != nil {
			return m.be.Upload(dentB, 0, dent)
		}
		return nil
	})
	dh := tp.zeros(t * h)
	m.net.head.logProbsBackward(tp, &st.head, dh, dlogp, dentB, pb.targets, pb.invTemp)
	m.net.hiddenBackward(tp, &st.hidden, dh, pb.ids, st.r)
	m.noteActivations(st.tp.elems + tp.maxElems)
	if tp.grads != nil {
		if err := tp.grads.finish(tp.err); err != nil {
			return err
		}
	}
	if !tp.ok() {
		return tp.err
	}
	return m.w.finishGrads()
}

// emptyBackward is the backward of a forward over no token: nothing to
// do, except in a sharded job at stage 2, whose ranks all take part in
// every reduction of a backward: zero gradients are handed over.
func (m *Model) emptyBackward(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sink := m.gradSink()
	if sink == nil {
		return nil
	}
	g := m.devOpt.shard.groups
	flow, err := newGradFlow(ctx, m.be, sink, g)
	if flow == nil {
		return err
	}
	if err == nil {
		err = flow.done(g.head)
	}
	for i := len(g.layers) - 1; i >= 0 && err == nil; i-- {
		if err = flow.alloc(g.layers[i]); err == nil {
			err = flow.done(g.layers[i])
		}
	}
	return flow.finish(err)
}

// gradSink is the sink of the backward's gradients when they are
// streamed (a ShardedAdamW at stage 2), nil otherwise. The caller holds
// m.mu.
func (m *Model) gradSink() gradSink {
	if m.devOpt == nil || m.devOpt.shard == nil || m.devOpt.shard.stage < 2 {
		return nil
	}
	return m.devOpt.shard.stream
}

// noteActivations records that a training pass held n floats of
// activations at once (the most, for the optimizer's Memory). The
// caller holds m.mu.
func (m *Model) noteActivations(n int64) {
	if m.devOpt != nil {
		m.devOpt.actPeak = max(m.devOpt.actPeak, 4*n)
	}
}

// gradGroups sorts the trainable tensors by the point of the backward at
// which their gradients are final (see pass.headGradsDone): decoder
// layer i's are those named "…layers.i.…" (Hugging Face's and PEFT's
// names), the final norm and an untied LM head the head's, the rest (the
// embedding table) the end's. The caller holds m.mu.
func (m *Model) gradGroups() *gradGroups {
	g := &gradGroups{layers: make([][]*param, len(m.net.layers))}
	for _, p := range m.w.trainable() {
		switch i, ok := layerOf(p.spec.Name); {
		case ok && i < len(g.layers):
			g.layers[i] = append(g.layers[i], p)
		case p == m.net.norm.w || (p == m.net.head.w && p != m.net.embed.w):
			g.head = append(g.head, p)
		default:
			g.rest = append(g.rest, p)
		}
	}
	return g
}

// layerOf parses the layer index of a tensor name "…layers.<i>.…".
func layerOf(name string) (int, bool) {
	const key = "layers."
	for at := 0; ; {
		k := strings.Index(name[at:], key)
		if k < 0 {
			return 0, false
		}
		start := at + k
		at = start + len(key)
		if start > 0 && name[start-1] != '.' {
			continue
		}
		end := at
		for end < len(name) && name[end] >= '0' && name[end] <= '9' {
			end++
		}
		if end == at || end == len(name) || name[end] != '.' {
			continue
		}
		i, err := strconv.Atoi(name[at:end])
		return i, err == nil
	}
}
