//go:build agentrl_cuda && cgo

package gpu

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/agentrl/agentrl/policy/backend"
)

// backend.Decoder on the device: the paged KV cache in one device
// allocation (bfloat16 in BF16 precision, float32 otherwise), appends and
// attention over its pages, and sampling on the logits, with the kernels
// of kernels/decode.cu. Per forward step the host sends the step's layout
// once (PrepareStep) and the sampling parameters once, and reads back 12
// bytes per sampled sequence; per layer it launches one append, and one
// or two attention kernels (split-K decode and its merge) plus one for
// prefill chunks when the step has them — independent of the batch size.

var _ backend.Decoder = (*Backend)(nil)

// kvCacheGPU is a paged KV cache in device memory: per layer, the keys of
// every block, then their values.
type kvCacheGPU struct {
	owner *Backend
	spec  backend.KVCacheSpec
	ptr   devPtr
	bf16  bool
	freed atomic.Bool
}

// Spec is the cache's shape.
func (c *kvCacheGPU) Spec() backend.KVCacheSpec { return c.spec }

// elem is the bytes of one cached value.
func (c *kvCacheGPU) elem() int64 {
	if c.bf16 {
		return 2
	}
	return 4
}

// layer returns the addresses of layer's keys and values.
func (c *kvCacheGPU) layer(l int) (k, v devPtr) {
	half := int64(c.spec.Blocks) * int64(c.spec.BlockSize) * int64(c.spec.Width()) * c.elem()
	k = c.ptr + devPtr(2*int64(l)*half)
	return k, k + devPtr(half)
}

// suffix names the kernels of the cache's type.
func (c *kvCacheGPU) suffix() string {
	if c.bf16 {
		return "bf16"
	}
	return "f32"
}

// pagedLayoutGPU is a step prepared on the device: its layout uploaded
// (meta), the split-K plan, and the split-K scratch its layers reuse.
type pagedLayoutGPU struct {
	cache         *kvCacheGPU
	step          backend.PagedStep
	plan          pagedPlan
	meta          *staged // the plan's ints, uploaded with the round trip's staged data
	splits, chunk int
	ml, pacc      devPtr // allocated by the first PagedAttention with decode rows
	scratchHeads  int    // heads·head dim ml and pacc were sized for
	released      atomic.Bool
}

func (l *pagedLayoutGPU) Step() backend.PagedStep { return l.step }
func (l *pagedLayoutGPU) Cache() backend.KVCache  { return l.cache }

func (be *Backend) kvCache(c backend.KVCache) (*kvCacheGPU, error) {
	kc, ok := c.(*kvCacheGPU)
	if !ok || kc == nil || kc.owner != be {
		return nil, fmt.Errorf("%w: the KV cache was not allocated by this backend", backend.ErrBuffer)
	}
	if kc.freed.Load() {
		return nil, fmt.Errorf("%w: the KV cache has been freed", backend.ErrBuffer)
	}
	return kc, nil
}

func (be *Backend) pagedLayout(l backend.PagedLayout) (*pagedLayoutGPU, error) {
	pl, ok := l.(*pagedLayoutGPU)
	if !ok || pl == nil {
		return nil, fmt.Errorf("%w: the step layout was not prepared by this backend", backend.ErrBuffer)
	}
	if pl.released.Load() {
		return nil, fmt.Errorf("%w: the step layout has been released", backend.ErrBuffer)
	}
	if _, err := be.kvCache(pl.cache); err != nil {
		return nil, err
	}
	return pl, nil
}

// MemoryInfo reports the device's memory: free is what the driver has
// free plus what the caching allocator keeps for reuse (it returns those
// blocks when an allocation would fail).
func (be *Backend) MemoryInfo() (backend.MemoryInfo, error) {
	var info backend.MemoryInfo
	err := be.run(func() error {
		f, t, err := be.memInfo()
		info = backend.MemoryInfo{Free: int64(f + be.cache.stats.Cached), Total: int64(t)}
		return err
	})
	return info, err
}

// KVBlockBytes is a block's keys and values in every layer: bfloat16 in
// BF16 precision, float32 otherwise.
func (be *Backend) KVBlockBytes(s backend.KVCacheSpec) (int64, error) {
	if err := s.Check(); err != nil {
		return 0, err
	}
	s.Blocks = 1
	return kvCacheBytes(s, be.cfg.precision == BF16), nil
}

// NewKVCache allocates the cache in one cuMemAlloc (outside the caching
// allocator, whose cached blocks it returns to the device first if the
// device is short).
func (be *Backend) NewKVCache(s backend.KVCacheSpec) (backend.KVCache, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	c := &kvCacheGPU{owner: be, spec: s, bf16: be.cfg.precision == BF16}
	bytes := uint64(kvCacheBytes(s, c.bf16))
	err := be.run(func() error {
		p, err := rawDevice{be}.alloc(bytes)
		if errors.Is(err, errOutOfMemory) && be.cache.stats.Cached > 0 {
			if terr := be.cache.trim(); terr != nil {
				return fmt.Errorf("%w (releasing the cache: %v)", err, terr)
			}
			p, err = rawDevice{be}.alloc(bytes)
		}
		c.ptr = p
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: allocating a KV cache of %d bytes: %w", bytes, err)
	}
	return c, nil
}

// FreeKVCache returns the cache's memory to the device.
func (be *Backend) FreeKVCache(c backend.KVCache) error {
	kc, err := be.kvCache(c)
	if err != nil {
		return err
	}
	if kc.freed.Swap(true) {
		return fmt.Errorf("%w: the KV cache has been freed", backend.ErrBuffer)
	}
	return be.run(func() error { return rawDevice{be}.free(kc.ptr) })
}

// CopyKVBlocks copies whole blocks in every layer with one launch.
func (be *Backend) CopyKVBlocks(c backend.KVCache, src, dst []int32) error {
	kc, err := be.kvCache(c)
	if err != nil {
		return err
	}
	if err := backend.CheckBlockCopy(kc.spec, src, dst); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	pairs := make([]int32, 0, 2*len(src))
	for i := range src {
		pairs = append(pairs, src[i], dst[i])
	}
	blockWords := int64(kc.spec.BlockSize) * int64(kc.spec.Width()) * kc.elem() / 4
	halfWords := blockWords * int64(kc.spec.Blocks)
	total := int64(len(src)) * int64(kc.spec.Layers) * 2 * blockWords
	st := be.stageInts(pairs)
	return be.enqueue(nil, func() error {
		defer func() { _ = be.unstage(st) }()
		return be.elementwise("kv_copy_blocks", total, kc.ptr, st.addr(), int32(len(src)), blockWords, halfWords, int32(kc.spec.Layers))
	})
}

// PrepareStep checks the step, lays it out (planPaged) and stages it: it
// goes to the device with the round trip's other staged data, before the
// step's first launch.
func (be *Backend) PrepareStep(c backend.KVCache, s backend.PagedStep) (backend.PagedLayout, error) {
	kc, err := be.kvCache(c)
	if err != nil {
		return nil, err
	}
	slots, err := backend.CheckPagedStep(kc.spec, s)
	if err != nil {
		return nil, err
	}
	if be == nil || be.w == nil || be.closed.Load() {
		return nil, ErrClosed
	}
	l := &pagedLayoutGPU{cache: kc, step: s, plan: planPaged(kc.spec, s, slots)}
	l.splits, l.chunk = decodeSplits(l.plan.nDecode, kc.spec.KVHeads, decodeBucket(l.plan.maxDecode))
	l.meta = be.stageInts(l.plan.ints)
	return l, nil
}

// ReleaseStep returns the layout's device memory to the caching allocator
// (in stream order: later users of the blocks run after its kernels).
func (be *Backend) ReleaseStep(l backend.PagedLayout) error {
	pl, ok := l.(*pagedLayoutGPU)
	if !ok || pl == nil || pl.released.Swap(true) {
		return fmt.Errorf("%w: not a live step layout of this backend", backend.ErrBuffer)
	}
	return be.enqueue(nil, func() error {
		return errors.Join(be.unstage(pl.meta), be.cache.put(pl.ml), be.cache.put(pl.pacc))
	})
}

// AppendKV writes the step's new keys and values into the cache (one
// launch).
func (be *Backend) AppendKV(l backend.PagedLayout, layer int, k, v backend.Buffer) error {
	pl, err := be.pagedLayout(l)
	if err != nil {
		return err
	}
	spec := pl.cache.spec
	if layer < 0 || layer >= spec.Layers {
		return fmt.Errorf("%w: layer %d of a cache of %d layers", backend.ErrIndex, layer, spec.Layers)
	}
	w, rows := spec.Width(), pl.step.Rows
	if err := backend.CheckKVRows("append keys", k, rows, w); err != nil {
		return err
	}
	if err := backend.CheckKVRows("append values", v, rows, w); err != nil {
		return err
	}
	vs, err := resolveAll(be, "append", k, v)
	if err != nil {
		return err
	}
	kp, vp := pl.cache.layer(layer)
	return be.enqueue(nil, func() error {
		return be.elementwise("kv_append_"+pl.cache.suffix(), int64(rows)*int64(w), kp, vp, vs[0].ptr, vs[1].ptr, pl.meta.addr(), int32(rows), int32(w))
	})
}

// PagedAttention zeroes out, then runs the split-K decode kernel and its
// merge over the step's decode rows and the prefill kernel over its
// prefill tiles.
func (be *Backend) PagedAttention(l backend.PagedLayout, layer int, a backend.Attention, out, q backend.Buffer) error {
	pl, err := be.pagedLayout(l)
	if err != nil {
		return err
	}
	spec := pl.cache.spec
	if err := backend.CheckPagedAttention(spec, pl.step.Rows, layer, a, out, q); err != nil {
		return err
	}
	name, maxg, ngrp, hdMax, err := decodeKernel(pl.cache.bf16, a.Heads, a.KVHeads, a.HeadDim)
	if err != nil {
		return err
	}
	vs, err := resolveAll(be, "paged attention", out, q)
	if err != nil {
		return err
	}
	kp, vp := pl.cache.layer(layer)
	hd, bs, p := a.HeadDim, int32(spec.BlockSize), pl.plan
	return be.enqueue([]*buffer{vs[0]}, func() error {
		if err := be.memset(vs[0].ptr, 0, vs[0].n); err != nil {
			return err
		}
		meta := pl.meta.addr()
		tabs := meta + devPtr(4*p.tabsOff)
		if p.nDecode > 0 {
			slots := p.nDecode * a.Heads * pl.splits
			if pl.ml == 0 || pl.scratchHeads != a.Heads*hd {
				_ = be.cache.put(pl.ml)
				_ = be.cache.put(pl.pacc)
				pl.ml, pl.pacc = 0, 0
				ml, err := be.cache.get(uint64(4 * 2 * slots))
				if err != nil {
					return err
				}
				pl.ml = ml
				pacc, err := be.cache.get(uint64(4 * slots * hd))
				if err != nil {
					return err
				}
				pl.pacc, pl.scratchHeads = pacc, a.Heads*hd
			}
			rows := meta + devPtr(4*p.rowsOff)
			grid := [3]uint32{uint32(p.nDecode), uint32(a.KVHeads * ngrp), uint32(pl.splits)}
			if err := be.launch(name, grid, [3]uint32{32, 1, 1}, decodeSmem(pl.cache.bf16, maxg, hdMax),
				pl.ml, pl.pacc, vs[1].ptr, kp, vp, rows, tabs, int32(a.Heads), int32(a.KVHeads), int32(hd), bs, a.Scale, int32(pl.chunk), int32(ngrp)); err != nil {
				return err
			}
			if err := be.launch("paged_combine", [3]uint32{uint32(p.nDecode), uint32(a.Heads), 1}, [3]uint32{32, 1, 1}, 0,
				vs[0].ptr, pl.ml, pl.pacc, rows, int32(a.Heads), int32(hd), int32(pl.splits)); err != nil {
				return err
			}
		}
		if p.nTiles > 0 {
			tiles := meta + devPtr(4*p.tilesOff)
			return be.launch("paged_prefill_"+pl.cache.suffix(), [3]uint32{uint32(p.nTiles), uint32(a.Heads), 1}, [3]uint32{prefillThreads, 1, 1},
				prefillSmem(hd), vs[0].ptr, vs[1].ptr, kp, vp, tiles, tabs, int32(a.Heads), int32(a.KVHeads), int32(hd), bs, a.Scale)
		}
		return nil
	})
}

// SampleRows stages the rows' parameters (uploaded with the step's other
// staged data, before its first launch), launches sample_rows (a block
// per row) and downloads three 32-bit words per row: the step's one
// round trip to the worker.
func (be *Backend) SampleRows(logits backend.Buffer, vocab int, rows []backend.SampleRow, out []backend.SampleResult) error {
	lb, err := resolve(be, "sample logits", logits)
	if err != nil {
		return err
	}
	if err := backend.CheckSampleRows(logits, vocab, rows, out); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	raw := make([]float32, 3*len(rows))
	params := be.stageInts(packSampleParams(rows))
	err = be.run(func() error {
		sc := &scratch{be: be}
		defer sc.done()
		defer func() { _ = be.unstage(params) }()
		pp := params.addr()
		op, err := sc.get(4 * len(raw))
		if err != nil {
			return err
		}
		if err := be.launch("sample_rows", [3]uint32{uint32(len(rows)), 1, 1}, [3]uint32{uint32(sampleThreads(vocab)), 1, 1}, 0,
			lb.ptr, int32(vocab), pp, op); err != nil {
			return err
		}
		return be.dtoh(raw, op)
	})
	if err != nil {
		return fmt.Errorf("gpu: sampling: %w", err)
	}
	unpackSampleResults(raw, out)
	return be.topLogprobs(logits, vocab, rows, out)
}

// topLogprobs lists the most likely tokens of the rows that ask for them
// (SampleRow.TopLogprobs): it downloads those rows' logits and lets
// backend.HostSampler list them, as the CPU backend does. Rows that do
// not ask cost nothing; the token drawn stays the device's.
func (be *Backend) topLogprobs(logits backend.Buffer, vocab int, rows []backend.SampleRow, out []backend.SampleResult) error {
	var hs backend.HostSampler
	var z []float32
	for i, r := range rows {
		if r.TopLogprobs == 0 || out[i].Token < 0 {
			continue
		}
		if z == nil {
			z = make([]float32, vocab)
		}
		if err := be.Download(z, logits, i*vocab); err != nil {
			return fmt.Errorf("gpu: top log-probabilities: %w", err)
		}
		out[i].Top = hs.Sample(z, r).Top
	}
	return nil
}
