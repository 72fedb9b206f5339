package policy

import (
	"context"
	"fmt"

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
}
