//go:build agentrl_cuda && cgo

package gpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/agentrl/agentrl/policy/backend"
)

// The optimizer's per-tensor calls — AdamW, the gradient clip's Scale and
// ZeroGrad's Fill with 0 — are gathered into one pass (optPending) and
// run as one launch of opt_pass over a table of the tensors, whatever
// their number, when any other call comes (every call but these three
// runs the pending pass first, on the worker thread, so nothing can read
// a tensor before its update). A step's clip, update and zeroing thus
// cost one launch, and AdamW writes each weight's bf16 copy (the weight
// cache's) in the same pass instead of a conversion per weight at its
// next product. The pass's table is kept on the device (deviceTables),
// so a step that repeats the previous one's tensors copies nothing to
// the device. The results are bit for bit those of the calls made one by
// one. A failure of the pass's launch is reported by the call that ran it.

// optPending is the pass being gathered: its tensors, each buffer's
// entry, the Scale factor all its scaled entries share and the AdamW
// step all its AdamW entries share.
type optPending struct {
	entries []optPendingEntry
	byBuf   map[*buffer]int // every buffer of the pass → its entry
	gscale  float32
	scaled  bool // gscale is set
	k       backend.AdamWScalars
	adam    bool // k is set
}

// optPendingEntry is one tensor of the pass: its gradient (every entry),
// the AdamW state when it has an update, the weight copy the update
// rewrites, and its operations (optScale, optAdam, optZero).
type optPendingEntry struct {
	p, g, m, v *buffer
	wb         *weightCopy
	flags      int32
}

// runOpt is enqueue for the calls that may join the pending pass: it
// does not run the pass first; f decides (flushOpt) when the call
// conflicts with it. With the launch queue on it joins the queue like
// any call that needs no answer, so that a step's Scale, AdamW and Fill
// calls cost no round trip to the worker each.
func (be *Backend) runOpt(outs []*buffer, f func() error) error {
	g := func() error {
		be.weights.wrote(outs...)
		return f()
	}
	if be.cfg.queue {
		return be.queueOp(g)
	}
	return be.do(false, g)
}

// flushOpt launches the pending pass, if any, and empties it (worker
// thread).
func (be *Backend) flushOpt() error {
	op := &be.opt
	if len(op.entries) == 0 {
		return nil
	}
	ts := make([]optTensor, len(op.entries))
	for i, e := range op.entries {
		t := optTensor{g: e.g.ptr, n: int64(e.g.n), flags: e.flags}
		if e.flags&optAdam != 0 {
			t.p, t.m, t.v = e.p.ptr, e.m.ptr, e.v.ptr
		}
		if e.wb != nil {
			t.wb = e.wb.ptr
		}
		ts[i] = t
	}
	k, gscale := op.k, op.gscale
	entries := op.entries
	op.entries = op.entries[:0]
	clear(op.byBuf)
	op.scaled, op.adam = false, false
	err := be.optLaunch("opt_pass", ts, func(table devPtr, n int, blocks int64) error {
		return be.launch("opt_pass", [3]uint32{uint32(blocks), 1, 1}, [3]uint32{optThreads, 1, 1}, 0,
			table, int32(n), gscale, k.Decay, b2i(k.UseDecay), k.B1, k.OB1, k.B2, k.OB2, k.NegStep, k.BC2Sqrt, k.Eps)
	})
	for _, e := range entries {
		if e.wb == nil {
			continue
		}
		// The pass wrote the copy from the updated weight: current as of
		// the weight's generation now (every later write flushed first).
		if err == nil {
			e.wb.gen, e.wb.valid = e.p.gen, true
			be.weights.conversions++
		} else {
			e.wb.valid = false
		}
	}
	return err
}

// optLaunch packs ts into a table, finds or uploads its device copy and
// calls launch with it, its entry count and the grid's blocks (nothing
// when the tensors are empty).
func (be *Backend) optLaunch(kernel string, ts []optTensor, launch func(table devPtr, entries int, blocks int64) error) error {
	table, blocks := optTable(ts)
	if blocks == 0 {
		return nil
	}
	if blocks > math.MaxInt32 {
		return fmt.Errorf("gpu: %s over %d blocks of %d elements: more than a grid holds", kernel, blocks, optChunk)
	}
	// The tables live outside the caching allocator: made once and kept,
	// they must not take a block that a later step's activations reuse.
	raw := rawDevice{be}
	p, err := be.tables.get(table, raw.alloc,
		func(dst devPtr, b []byte) error { return be.htod(dst, unsafe.Pointer(&b[0]), len(b)) },
		raw.free)
	if err != nil {
		return err
	}
	return launch(p, len(table)/optEntrySize, blocks)
}

// AdamW applies one torch.optim.AdamW step to param from grad, updating
// the float32 moments m and v in place, operation for operation as
// backend.AdamWUpdate (the results agree bit for bit). All four buffers
// must have the same length. The update joins the pending optimizer pass
// (see optPending): a step's AdamW calls over all the model's tensors
// run as one launch, at the next call that is not AdamW, Scale or Fill.
// With GradNorm and Scale it implements backend.Optimizer.
func (be *Backend) AdamW(step AdamWStep, param, grad, m, v backend.Buffer) error {
	k, err := step.Scalars()
	if err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	vs, err := resolveAll(be, "adamw", param, grad, m, v)
	if err != nil {
		return err
	}
	if grad == nil || m == nil || v == nil {
		return fmt.Errorf("%w: adamw needs param, grad, m and v", backend.ErrBuffer)
	}
	if err := backend.CheckSameLen([]string{"adamw param", "adamw grad", "adamw m", "adamw v"}, param, grad, m, v); err != nil {
		return err
	}
	p, g, mb, vb := vs[0], vs[1], vs[2], vs[3]
	if p.n == 0 {
		return nil
	}
	return be.runOpt([]*buffer{p, mb, vb}, func() error {
		op := &be.opt
		i, joined := op.byBuf[g]
		joined = joined && op.entries[i].g == g && op.entries[i].flags == optScale
		_, pIn := op.byBuf[p]
		_, mIn := op.byBuf[mb]
		_, vIn := op.byBuf[vb]
		_, gIn := op.byBuf[g]
		alias := p == g || p == mb || p == vb || g == mb || g == vb || mb == vb
		if pIn || mIn || vIn || (gIn && !joined) || (op.adam && op.k != k) || alias {
			if err := be.flushOpt(); err != nil {
				return err
			}
			joined = false
		}
		if !joined {
			i = be.optAdd(optPendingEntry{g: g})
		}
		e := &op.entries[i]
		e.p, e.m, e.v = p, mb, vb
		e.flags |= optAdam
		op.byBuf[p], op.byBuf[mb], op.byBuf[vb] = i, i, i
		op.k, op.adam = k, true
		// The weight's bf16 copy, if the cache has one, is rewritten by
		// the pass (cuBLAS's bf16 copies; the fallback's rounded float32
		// ones are made again at their next product).
		if c := be.weights.copies[p]; c != nil && be.blas != nil && c.bytes == 2*uint64(p.n) {
			c.valid = false
			e.wb = c
		}
		if alias {
			// One buffer in two roles: the pass's kernel reads each
			// element of all four before it writes any, as the calls one
			// by one would, but only within an entry of its own.
			return be.flushOpt()
		}
		return nil
	})
}

// optAdd appends an entry to the pending pass and returns its index.
func (be *Backend) optAdd(e optPendingEntry) int {
	op := &be.opt
	if op.byBuf == nil {
		op.byBuf = map[*buffer]int{}
	}
	op.entries = append(op.entries, e)
	i := len(op.entries) - 1
	op.byBuf[e.g] = i
	return i
}

// Scale multiplies every element of x by alpha (gradient clipping). It
// joins the pending optimizer pass (see AdamW) when the pass has not
// touched x yet and scales by the same alpha.
func (be *Backend) Scale(alpha float32, x backend.Buffer) error {
	gb, err := resolve(be, "scale", x)
	if err != nil {
		return err
	}
	if gb == nil {
		return fmt.Errorf("%w: scale of a nil buffer", backend.ErrBuffer)
	}
	if math.IsNaN(float64(alpha)) || math.IsInf(float64(alpha), 0) {
		return fmt.Errorf("%w: scale factor %v", backend.ErrArg, alpha)
	}
	if gb.n == 0 {
		return nil
	}
	return be.runOpt([]*buffer{gb}, func() error {
		op := &be.opt
		if _, in := op.byBuf[gb]; in || (op.scaled && op.gscale != alpha) {
			if err := be.flushOpt(); err != nil {
				return err
			}
		}
		be.optAdd(optPendingEntry{g: gb, flags: optScale})
		op.gscale, op.scaled = alpha, true
		return nil
	})
}

// Fill sets every element of b to val. Filling with 0 a gradient that
// the pending optimizer pass scales or updates (ZeroGrad after a step)
// joins the pass; any other fill is a cuMemsetD32Async.
func (be *Backend) Fill(b backend.Buffer, val float32) error {
	gb, err := resolveAny(be, "fill", b)
	if err != nil {
		return err
	}
	if gb == nil {
		return fmt.Errorf("%w: fill of a nil buffer", backend.ErrBuffer)
	}
	if gb.half {
		return be.enqueue([]*buffer{gb}, func() error { return be.fillHalf(gb, val) })
	}
	return be.runOpt([]*buffer{gb}, func() error {
		op := &be.opt
		if i, in := op.byBuf[gb]; in && math.Float32bits(val) == 0 && op.entries[i].g == gb && op.entries[i].flags&optZero == 0 {
			op.entries[i].flags |= optZero
			return nil
		}
		if err := be.flushOpt(); err != nil {
			return err
		}
		return be.memset(gb.ptr, val, gb.n)
	})
}

// GradNorm returns the L2 norm of all the buffers taken together, with
// float64 accumulation (policy.GradNorm's definition): a two-stage
// reduction over a table of the buffers — float64 partial sums of chunks
// of optChunk elements, then one block adding them in a fixed order —
// so the result is the same on every run, and one download of 8 bytes.
// A NaN or infinite gradient gives a NaN or infinite norm.
func (be *Backend) GradNorm(grads ...backend.Buffer) (float64, error) {
	vs, err := resolveAll(be, "grad norm", grads...)
	if err != nil {
		return 0, err
	}
	for i, g := range vs {
		if g == nil {
			return 0, fmt.Errorf("%w: grad norm buffer %d is nil", backend.ErrBuffer, i)
		}
	}
	var sum float64
	err = be.run(func() error {
		ts := make([]optTensor, len(vs))
		for i, g := range vs {
			ts[i] = optTensor{g: g.ptr, n: int64(g.n)}
		}
		sc := &scratch{be: be}
		defer sc.done()
		return be.optLaunch("grad_sumsq_partial", ts, func(table devPtr, entries int, blocks int64) error {
			part, err := sc.get(8 * int(blocks))
			if err != nil {
				return err
			}
			acc, err := sc.get(8)
			if err != nil {
				return err
			}
			if err := be.launch("grad_sumsq_partial", [3]uint32{uint32(blocks), 1, 1}, [3]uint32{optThreads, 1, 1}, 0, part, table, int32(entries)); err != nil {
				return err
			}
			if err := be.launch("grad_sumsq_finish", [3]uint32{1, 1, 1}, [3]uint32{1024, 1, 1}, 0, acc, part, blocks); err != nil {
				return err
			}
			var host [2]float32
			if err := be.dtoh(host[:], acc); err != nil {
				return err
			}
			sum = math.Float64frombits(uint64(math.Float32bits(host[0])) | uint64(math.Float32bits(host[1]))<<32)
			return nil
		})
	})
	return math.Sqrt(sum), err
}
