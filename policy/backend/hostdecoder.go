package backend

import (
	"errors"
	"fmt"
)

// HostDecoder is a Decoder for any Backend, made of its Memory and
// Kernels, which gives backends without a Decoder of their own
// generation's paged KV cache and sampling: the cache is one key and one
// value buffer per layer, grown (by doubling, up to the spec's blocks) as
// blocks are touched; appends and attention move rows with Copy (one call
// per run of consecutive cache rows), the attention gathers each
// sequence's rows into contiguous scratch for AttentionForward, and
// sampling downloads the sampled rows' logits and runs HostSampler. It is
// the slow path that keeps every backend working; the CPU and CUDA
// backends implement Decoder themselves. Like every Decoder, it is used
// from one goroutine at a time.
type HostDecoder struct {
	be      Backend
	sampler HostSampler
}

var _ Decoder = (*HostDecoder)(nil)

// NewHostDecoder returns the Decoder that runs on be's Memory and Kernels.
func NewHostDecoder(be Backend) *HostDecoder { return &HostDecoder{be: be} }

// hostKVInitial is the blocks a HostDecoder cache starts with.
const hostKVInitial = 16

// hostKV is a HostDecoder cache: per layer, keys and values of capBlocks
// blocks.
type hostKV struct {
	spec      KVCacheSpec
	k, v      []Buffer
	capBlocks int
	freed     bool
}

func (c *hostKV) Spec() KVCacheSpec { return c.spec }

// hostLayout is a step prepared by a HostDecoder: the step, each new
// row's cache row, and the gather scratch its layers reuse.
type hostLayout struct {
	cache    *hostKV
	step     PagedStep
	slots    []int32
	gk, gv   Buffer
	spans    []Span
	rows     Rows // the step's rows over the gathered keys, made with gk
	released bool
}

func (l *hostLayout) Step() PagedStep { return l.step }
func (l *hostLayout) Cache() KVCache  { return l.cache }

func (d *HostDecoder) kv(c KVCache) (*hostKV, error) {
	kc, ok := c.(*hostKV)
	if !ok || kc == nil || kc.freed {
		return nil, fmt.Errorf("%w: not a live KV cache of this decoder", ErrBuffer)
	}
	return kc, nil
}

func (d *HostDecoder) layout(l PagedLayout) (*hostLayout, error) {
	hl, ok := l.(*hostLayout)
	if !ok || hl == nil || hl.released {
		return nil, fmt.Errorf("%w: not a live step layout of this decoder", ErrBuffer)
	}
	if _, err := d.kv(hl.cache); err != nil {
		return nil, err
	}
	return hl, nil
}

// MemoryInfo is an error wrapping errors.ErrUnsupported: a generic
// backend does not report its memory.
func (d *HostDecoder) MemoryInfo() (MemoryInfo, error) {
	return MemoryInfo{}, fmt.Errorf("%w: backend %s does not report its memory", errors.ErrUnsupported, d.be.Name())
}

// KVBlockBytes counts float32 rows.
func (d *HostDecoder) KVBlockBytes(s KVCacheSpec) (int64, error) {
	if err := s.Check(); err != nil {
		return 0, err
	}
	return 2 * 4 * int64(s.Layers) * int64(s.BlockSize) * int64(s.Width()), nil
}

// NewKVCache allocates the first hostKVInitial blocks of every layer.
func (d *HostDecoder) NewKVCache(s KVCacheSpec) (KVCache, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	c := &hostKV{spec: s}
	if err := d.grow(c, min(s.Blocks, hostKVInitial)); err != nil {
		return nil, err
	}
	return c, nil
}

// grow reallocates c's buffers for at least blocks blocks (doubling, up
// to the spec), copying what they hold; on failure c is unchanged.
func (d *HostDecoder) grow(c *hostKV, blocks int) error {
	if blocks <= c.capBlocks {
		return nil
	}
	blocks = min(max(blocks, 2*c.capBlocks), c.spec.Blocks)
	rows := c.spec.BlockSize * c.spec.Width()
	var k, v []Buffer
	undo := func() {
		for _, b := range append(k, v...) {
			_ = d.be.Free(b)
		}
	}
	for l := range c.spec.Layers {
		for _, dst := range []*[]Buffer{&k, &v} {
			b, err := d.be.Alloc(blocks * rows)
			if err != nil {
				undo()
				return fmt.Errorf("allocating %d KV blocks of layer %d: %w", blocks, l, err)
			}
			*dst = append(*dst, b)
		}
	}
	if c.capBlocks > 0 {
		for l := range c.spec.Layers {
			if err := d.be.Copy(k[l], 0, c.k[l], 0, c.capBlocks*rows); err != nil {
				undo()
				return err
			}
			if err := d.be.Copy(v[l], 0, c.v[l], 0, c.capBlocks*rows); err != nil {
				undo()
				return err
			}
		}
	}
	d.freeBuffers(c)
	c.k, c.v, c.capBlocks = k, v, blocks
	return nil
}

func (d *HostDecoder) freeBuffers(c *hostKV) {
	for _, b := range append(c.k, c.v...) {
		_ = d.be.Free(b)
	}
	c.k, c.v = nil, nil
}

// FreeKVCache frees the buffers.
func (d *HostDecoder) FreeKVCache(c KVCache) error {
	kc, err := d.kv(c)
	if err != nil {
		return err
	}
	d.freeBuffers(kc)
	kc.freed = true
	return nil
}

// CopyKVBlocks copies block by block, layer by layer.
func (d *HostDecoder) CopyKVBlocks(c KVCache, src, dst []int32) error {
	kc, err := d.kv(c)
	if err != nil {
		return err
	}
	if err := CheckBlockCopy(kc.spec, src, dst); err != nil {
		return err
	}
	top := 0
	for i := range src {
		top = max(top, int(src[i])+1, int(dst[i])+1)
	}
	if err := d.grow(kc, top); err != nil {
		return err
	}
	n := kc.spec.BlockSize * kc.spec.Width()
	for i := range src {
		for l := range kc.spec.Layers {
			if err := d.be.Copy(kc.k[l], int(dst[i])*n, kc.k[l], int(src[i])*n, n); err != nil {
				return err
			}
			if err := d.be.Copy(kc.v[l], int(dst[i])*n, kc.v[l], int(src[i])*n, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// PrepareStep checks the step and grows the cache over every block it
// names.
func (d *HostDecoder) PrepareStep(c KVCache, s PagedStep) (PagedLayout, error) {
	kc, err := d.kv(c)
	if err != nil {
		return nil, err
	}
	slots, err := CheckPagedStep(kc.spec, s)
	if err != nil {
		return nil, err
	}
	top := 0
	for _, q := range s.Seqs {
		for _, b := range q.Blocks[:(q.KLen+kc.spec.BlockSize-1)/kc.spec.BlockSize] {
			top = max(top, int(b)+1)
		}
	}
	if err := d.grow(kc, top); err != nil {
		return nil, err
	}
	return &hostLayout{cache: kc, step: s, slots: slots}, nil
}

// ReleaseStep frees the gather scratch.
func (d *HostDecoder) ReleaseStep(l PagedLayout) error {
	hl, err := d.layout(l)
	if err != nil {
		return err
	}
	for _, b := range []Buffer{hl.gk, hl.gv} {
		if b != nil {
			_ = d.be.Free(b)
		}
	}
	if hl.rows != nil {
		_ = d.be.FreeRows(hl.rows)
	}
	hl.gk, hl.gv, hl.rows, hl.released = nil, nil, nil, true
	return nil
}

// AppendKV copies runs of rows that go to consecutive cache rows.
func (d *HostDecoder) AppendKV(l PagedLayout, layer int, k, v Buffer) error {
	hl, err := d.layout(l)
	if err != nil {
		return err
	}
	spec := hl.cache.spec
	if layer < 0 || layer >= spec.Layers {
		return fmt.Errorf("%w: layer %d of a cache of %d layers", ErrIndex, layer, spec.Layers)
	}
	w := spec.Width()
	if err := CheckKVRows("append keys", k, hl.step.Rows, w); err != nil {
		return err
	}
	if err := CheckKVRows("append values", v, hl.step.Rows, w); err != nil {
		return err
	}
	s := hl.slots
	for r := 0; r < len(s); {
		if s[r] < 0 {
			r++
			continue
		}
		n := 1
		for r+n < len(s) && s[r+n] == s[r]+int32(n) {
			n++
		}
		if err := d.be.Copy(hl.cache.k[layer], int(s[r])*w, k, r*w, n*w); err != nil {
			return err
		}
		if err := d.be.Copy(hl.cache.v[layer], int(s[r])*w, v, r*w, n*w); err != nil {
			return err
		}
		r += n
	}
	return nil
}

// PagedAttention gathers every sequence's keys and values of layer into
// contiguous scratch, sequence after sequence, and runs AttentionForward
// over it.
func (d *HostDecoder) PagedAttention(l PagedLayout, layer int, a Attention, out, q Buffer) error {
	hl, err := d.layout(l)
	if err != nil {
		return err
	}
	spec := hl.cache.spec
	if err := CheckPagedAttention(spec, hl.step.Rows, layer, a, out, q); err != nil {
		return err
	}
	w, bs := spec.Width(), spec.BlockSize
	if hl.gk == nil {
		total := 0
		pos := make([]int32, hl.step.Rows) // rows in no sequence: position 0
		var spans []Span
		for _, s := range hl.step.Seqs {
			if s.QLen == 0 {
				continue
			}
			spans = append(spans, Span{Q0: s.Q0, QLen: s.QLen, K0: total, KLen: s.KLen})
			for i := range s.QLen {
				pos[s.Q0+i] = int32(s.KLen - s.QLen + i)
			}
			total += s.KLen
		}
		rows, err := d.be.NewRows(pos, spans)
		if err != nil {
			return err
		}
		gk, err := d.be.Alloc(total * w)
		if err != nil {
			_ = d.be.FreeRows(rows)
			return err
		}
		gv, err := d.be.Alloc(total * w)
		if err != nil {
			_ = d.be.FreeRows(rows)
			_ = d.be.Free(gk)
			return err
		}
		hl.spans, hl.rows, hl.gk, hl.gv = spans, rows, gk, gv
	}
	i := 0
	for _, s := range hl.step.Seqs {
		if s.QLen == 0 {
			continue
		}
		k0 := hl.spans[i].K0
		i++
		for blk := 0; blk*bs < s.KLen; blk++ {
			n := min(bs, s.KLen-blk*bs) * w
			src := int(s.Blocks[blk]) * bs * w
			if err := d.be.Copy(hl.gk, (k0+blk*bs)*w, hl.cache.k[layer], src, n); err != nil {
				return err
			}
			if err := d.be.Copy(hl.gv, (k0+blk*bs)*w, hl.cache.v[layer], src, n); err != nil {
				return err
			}
		}
	}
	return d.be.AttentionForward(a, hl.rows, out, nil, q, hl.gk, hl.gv)
}

// SampleRows downloads the logits and samples on the host.
func (d *HostDecoder) SampleRows(logits Buffer, vocab int, rows []SampleRow, out []SampleResult) error {
	if err := CheckSampleRows(logits, vocab, rows, out); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	z := make([]float32, len(rows)*vocab)
	if err := d.be.Download(z, logits, 0); err != nil {
		return err
	}
	for i, r := range rows {
		out[i] = d.sampler.Sample(z[i*vocab:(i+1)*vocab], r)
	}
	return nil
}
