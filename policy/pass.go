package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentrl/agentrl/policy/backend"
)

// pass is the tape of one computation over the backend: it allocates the
// buffers the computation needs and frees them together, keeps the first
// error (every later operation is skipped, so module code reads as
// straight-line math and checks once at the end), and says whether the
// modules must keep what their backward reads (train) and whether LoRA
// adapters take part (lora).
//
// Between layers of a computation that keeps nothing (scoring without
// gradients, generation, the backward's scratch) the buffers of a layer
// are recycled for the next: every layer asks for the same sizes in the
// same order, so after the first layer nothing is allocated.
type pass struct {
	ctx   context.Context // checked between layers; nil: never cancelled
	be    backend.Backend
	train bool
	lora  bool
	// checkpoint (with train): the decoder keeps each layer's input only;
	// the backward recomputes the layer (activation checkpointing).
	checkpoint bool
	bufs       []backend.Buffer
	err        error
	where      string // prefixed to errors, e.g. "layer 3"
	// spare holds recycled buffers by length; zeroed records the
	// buffers known to hold zeros (fresh from Alloc).
	spare  map[int][]backend.Buffer
	zeroed map[backend.Buffer]bool
	// layouts are the backend Rows of the pass, freed with its buffers.
	layouts []backend.Rows
	// elems counts the floats of the buffers the tape holds (its own and
	// its spares), maxElems the most it held at once: the activations of
	// a training pass, measured (Memory.Activations).
	elems, maxElems int64
	// grads, in a backward whose gradients are streamed to a sharded
	// optimizer (stage 2), gives each layer's trainable tensors their
	// gradient buffers when the layer's backward starts and hands them
	// over when it is done; nil otherwise.
	grads *gradFlow
}

// newPass returns a tape over be.
func newPass(be backend.Backend, train, lora bool) *pass {
	return &pass{be: be, train: train, lora: lora}
}

// checkCtx records the context's error, if it has ended.
func (tp *pass) checkCtx() {
	if tp.ctx != nil && tp.err == nil {
		tp.err = tp.ctx.Err()
	}
}

// ok reports whether no operation has failed.
func (tp *pass) ok() bool { return tp.err == nil }

// fail records err (the first one sticks).
func (tp *pass) fail(err error) {
	if tp.err == nil && err != nil {
		tp.err = err
	}
}

// do runs one operation unless an earlier one failed, wrapping its error
// with where it happened and what it was.
func (tp *pass) do(op string, f func() error) {
	if tp.err != nil {
		return
	}
	if err := f(); err != nil {
		if tp.where != "" {
			tp.err = fmt.Errorf("policy: %s %s: %w", tp.where, op, err)
		} else {
			tp.err = fmt.Errorf("policy: %s: %w", op, err)
		}
	}
}

// alloc returns a buffer of n floats whose contents the caller
// overwrites: a recycled one when there is one of that length.
func (tp *pass) alloc(n int) backend.Buffer {
	if tp.err != nil {
		return nil
	}
	if list := tp.spare[n]; len(list) > 0 {
		b := list[len(list)-1]
		tp.spare[n] = list[:len(list)-1]
		tp.bufs = append(tp.bufs, b)
		return b
	}
	b, err := tp.be.Alloc(n)
	if err != nil {
		tp.err = fmt.Errorf("policy: allocating %d floats: %w", n, err)
		return nil
	}
	tp.elems += int64(n)
	tp.maxElems = max(tp.maxElems, tp.elems)
	tp.bufs = append(tp.bufs, b)
	if tp.zeroed == nil {
		tp.zeroed = make(map[backend.Buffer]bool)
	}
	tp.zeroed[b] = true
	return b
}

// newRows returns the layout of a pass's n = len(pos) rows on the
// backend (positions and attention spans, uploaded once for every
// layer), freed with the tape; nil after an error.
func (tp *pass) newRows(pos []int32, spans []backend.Span) *rows {
	r := &rows{n: len(pos)}
	tp.do("rows", func() (err error) {
		r.dev, err = tp.be.NewRows(pos, spans)
		if err == nil {
			tp.layouts = append(tp.layouts, r.dev)
		}
		return err
	})
	return r
}

// zeros returns a buffer of n zeros, for a gradient the backward kernels
// accumulate into.
func (tp *pass) zeros(n int) backend.Buffer {
	b := tp.alloc(n)
	if b == nil || tp.zeroed[b] {
		delete(tp.zeroed, b)
		return b
	}
	tp.do("zero", func() error { return tp.be.Fill(b, 0) })
	return b
}

// allocIf returns alloc(n) when cond holds, else nil (an optional output
// such as the rstd only a backward reads).
func (tp *pass) allocIf(cond bool, n int) backend.Buffer {
	if !cond {
		return nil
	}
	return tp.alloc(n)
}

// mark is the position recycle returns to.
func (tp *pass) mark() int { return len(tp.bufs) }

// recycle makes the buffers allocated since mark available again to
// alloc, except keep (a layer's output).
func (tp *pass) recycle(mark int, keep ...backend.Buffer) {
	if tp.spare == nil {
		tp.spare = make(map[int][]backend.Buffer)
	}
	kept := tp.bufs[:mark]
outer:
	for _, b := range tp.bufs[mark:] {
		for _, k := range keep {
			if b == k {
				kept = append(kept, b)
				continue outer
			}
		}
		delete(tp.zeroed, b)
		tp.spare[b.Len()] = append(tp.spare[b.Len()], b)
	}
	tp.bufs = kept
}

// releaseSpare frees the recycled buffers no later operation of the tape
// will take (the layers of a checkpointed forward are done; its backward
// runs on a tape of its own).
func (tp *pass) releaseSpare() {
	for _, list := range tp.spare {
		for _, b := range list {
			tp.elems -= int64(b.Len())
			_ = tp.be.Free(b)
		}
	}
	tp.spare = nil
}

// free releases every buffer of the tape.
func (tp *pass) free() {
	for _, b := range tp.bufs {
		_ = tp.be.Free(b)
	}
	for _, list := range tp.spare {
		for _, b := range list {
			_ = tp.be.Free(b)
		}
	}
	for _, r := range tp.layouts {
		_ = tp.be.FreeRows(r)
	}
	tp.bufs, tp.spare, tp.zeroed, tp.layouts = nil, nil, nil, nil
	tp.elems = 0
}

// The gradient-ready points of a backward. The backward finishes the
// trainable tensors in the reverse of their order in Params: an untied
// LM head and the final norm first (headGradsDone), then each decoder
// layer from the last (layerGradsStart before its backward,
// layerGradsDone after it), then the embedding table, which a tied LM
// head also writes (at the end of Model.backward). At each point the
// tensors named are final for this backward. Without a gradFlow the
// calls do nothing.

// headGradsDone: the final norm's and an untied LM head's gradients are
// final.
func (tp *pass) headGradsDone() {
	if tp.grads != nil {
		tp.do("gradients of the head", func() error { return tp.grads.done(tp.grads.groups.head) })
	}
}

// layerGradsStart gives layer i's trainable tensors zeroed gradient
// buffers for its backward.
func (tp *pass) layerGradsStart(i int) {
	if tp.grads != nil && i < len(tp.grads.groups.layers) {
		tp.do("gradient buffers", func() error { return tp.grads.alloc(tp.grads.groups.layers[i]) })
	}
}

// layerGradsDone: layer i's gradients are final.
func (tp *pass) layerGradsDone(i int) {
	if tp.grads != nil && i < len(tp.grads.groups.layers) {
		tp.do("gradients", func() error { return tp.grads.done(tp.grads.groups.layers[i]) })
	}
}

// gradGroups are a model's trainable tensors by the point of the
// backward at which their gradients are final.
type gradGroups struct {
	head   []*param   // the final norm, an untied LM head
	layers [][]*param // decoder layer i's
	rest   []*param   // the embedding table, and any other: final at the end
}

// gradSink receives the gradients of a backward as they become final
// (ShardedAdamW at stage 2).
type gradSink interface {
	// begin starts a backward.
	begin(ctx context.Context) error
	// accept takes the final gradients of ps from their buffers p.dw;
	// it returns when it no longer reads those buffers.
	accept(ctx context.Context, ps []*param) error
	// end waits for the work begin started and returns its first error.
	end(ctx context.Context) error
	// meter counts the gradient floats held, the flow's buffers with the
	// sink's own.
	meter() *gradMeter
}

// gradMeter counts the floats of gradient buffers held (live) and the
// most held at once (peak). It is safe for concurrent use.
type gradMeter struct {
	mu         sync.Mutex
	live, peak int64
}

func (g *gradMeter) add(n int64) {
	g.mu.Lock()
	g.live += n
	g.peak = max(g.peak, g.live)
	g.mu.Unlock()
}

func (g *gradMeter) max() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}

// gradFlow is a backward's gradients streamed to a sink: the buffers of
// a group of tensors exist from the start of the group's backward until
// the sink has taken them, and serve the next group after (same shapes,
// layer after layer), so that no more than the head's, the embedding's
// and one layer's gradients are held at once.
type gradFlow struct {
	ctx    context.Context
	be     backend.Backend
	sink   gradSink
	groups *gradGroups
	spare  map[int][]backend.Buffer // released buffers by length
}

// newGradFlow starts a backward's flow: the head's and the rest's
// tensors get their gradient buffers at once (the LM head's backward
// writes them first).
func newGradFlow(ctx context.Context, be backend.Backend, sink gradSink, groups *gradGroups) (*gradFlow, error) {
	f := &gradFlow{ctx: ctx, be: be, sink: sink, groups: groups, spare: map[int][]backend.Buffer{}}
	if err := sink.begin(ctx); err != nil {
		return nil, err
	}
	if err := f.alloc(groups.head); err != nil {
		return f, err
	}
	return f, f.alloc(groups.rest)
}

// alloc gives each tensor of ps a zeroed gradient buffer.
func (f *gradFlow) alloc(ps []*param) error {
	for _, p := range ps {
		if p.dw != nil {
			continue
		}
		n := len(p.data)
		if list := f.spare[n]; len(list) > 0 {
			p.dw, f.spare[n] = list[len(list)-1], list[:len(list)-1]
			if err := f.be.Fill(p.dw, 0); err != nil {
				return err
			}
			continue
		}
		b, err := f.be.Alloc(n)
		if err != nil {
			return fmt.Errorf("policy: allocating the gradient of %s: %w", p.spec.Name, err)
		}
		p.dw = b
		f.sink.meter().add(int64(n))
	}
	return nil
}

// done hands the final gradients of ps to the sink and keeps their
// buffers for the next group.
func (f *gradFlow) done(ps []*param) error {
	if err := f.sink.accept(f.ctx, ps); err != nil {
		return err
	}
	for _, p := range ps {
		if p.dw != nil {
			f.spare[p.dw.Len()] = append(f.spare[p.dw.Len()], p.dw)
			p.dw = nil
		}
	}
	return nil
}

// finish hands over the rest (the embedding table), waits for the sink
// and frees every gradient buffer: between backward passes the model
// holds none. err is the backward's own failure, if any: the buffers are
// freed and the sink waited for all the same.
func (f *gradFlow) finish(err error) error {
	if err == nil {
		err = f.done(f.groups.rest)
	}
	err = errors.Join(err, f.sink.end(f.ctx))
	free := func(b backend.Buffer) {
		f.sink.meter().add(-int64(b.Len()))
		_ = f.be.Free(b)
	}
	for _, list := range f.spare {
		for _, b := range list {
			free(b)
		}
	}
	f.spare = nil
	for _, g := range append([][]*param{f.groups.head, f.groups.rest}, f.groups.layers...) {
		for _, p := range g {
			if p.dw != nil {
				free(p.dw)
				p.dw = nil
			}
		}
	}
	return err
}
