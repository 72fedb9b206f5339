package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/agentrl/agentrl/policy/backend"
)

// The CPU's backend.Decoder: a paged KV cache in Go memory, attention
// over its pages, and the host sampler (backend.HostSampler) run on the
// logits buffers in place.

var _ backend.Decoder = (*Backend)(nil)

// kvCache is the CPU's paged KV cache. A block's storage, every layer's
// keys and values ([layer][keys, values][BlockSize][Width]), is allocated
// when the block is first written, so that memory follows use rather than
// the cache's capacity.
type kvCache struct {
	owner  *Backend
	spec   backend.KVCacheSpec
	blocks [][]float32
	freed  atomic.Bool
}

// Spec is the cache's shape.
func (c *kvCache) Spec() backend.KVCacheSpec { return c.spec }

// rows returns layer's key and value rows of block b (allocating the
// block when alloc is set; nil when it has never been written otherwise).
func (c *kvCache) rows(b int32, layer int, alloc bool) (k, v []float32) {
	n := c.spec.BlockSize * c.spec.Width()
	blk := c.blocks[b]
	if blk == nil {
		if !alloc {
			return nil, nil
		}
		blk = make([]float32, 2*c.spec.Layers*n)
		c.blocks[b] = blk
	}
	off := 2 * layer * n
	return blk[off : off+n], blk[off+n : off+2*n]
}

// pagedLayout is a step prepared for the CPU: the step, each new row's
// cache row, and per-worker scratch that the layers of the step reuse.
type pagedLayout struct {
	cache    *kvCache
	step     backend.PagedStep
	slots    []int32
	scratch  [][]float32
	released atomic.Bool
}

func (l *pagedLayout) Step() backend.PagedStep { return l.step }
func (l *pagedLayout) Cache() backend.KVCache  { return l.cache }

// cache resolves a KVCache of this backend.
func (be *Backend) cache(c backend.KVCache) (*kvCache, error) {
	kc, ok := c.(*kvCache)
	if !ok || kc == nil || kc.owner != be {
		return nil, fmt.Errorf("%w: the KV cache was not allocated by this backend", backend.ErrBuffer)
	}
	if kc.freed.Load() {
		return nil, fmt.Errorf("%w: the KV cache has been freed", backend.ErrBuffer)
	}
	return kc, nil
}

// layout resolves a PagedLayout of this backend.
func (be *Backend) layout(l backend.PagedLayout) (*pagedLayout, error) {
	pl, ok := l.(*pagedLayout)
	if !ok || pl == nil {
		return nil, fmt.Errorf("%w: the step layout was not prepared by this backend", backend.ErrBuffer)
	}
	if pl.released.Load() {
		return nil, fmt.Errorf("%w: the step layout has been released", backend.ErrBuffer)
	}
	if _, err := be.cache(pl.cache); err != nil {
		return nil, err
	}
	return pl, nil
}

// MemoryInfo reports the host's memory from /proc/meminfo: MemAvailable
// as free, MemTotal as total.
func (be *Backend) MemoryInfo() (backend.MemoryInfo, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return backend.MemoryInfo{Host: true}, fmt.Errorf("cpu: reading the host's memory size: %w", err)
	}
	info := backend.MemoryInfo{Host: true}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		switch string(f[0]) {
		case "MemTotal:":
			info.Total = kb << 10
		case "MemAvailable:":
			info.Free = kb << 10
		}
	}
	if info.Total == 0 || info.Free == 0 {
		return info, fmt.Errorf("cpu: /proc/meminfo lacks MemTotal or MemAvailable")
	}
	return info, nil
}

// KVBlockBytes is 2·Layers·BlockSize·Width float32 values.
func (be *Backend) KVBlockBytes(s backend.KVCacheSpec) (int64, error) {
	if err := s.Check(); err != nil {
		return 0, err
	}
	return 2 * 4 * int64(s.Layers) * int64(s.BlockSize) * int64(s.Width()), nil
}

// NewKVCache returns a cache of s.Blocks blocks, each allocated on its
// first write.
func (be *Backend) NewKVCache(s backend.KVCacheSpec) (backend.KVCache, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	return &kvCache{owner: be, spec: s, blocks: make([][]float32, s.Blocks)}, nil
}

// FreeKVCache drops the cache's memory.
func (be *Backend) FreeKVCache(c backend.KVCache) error {
	kc, err := be.cache(c)
	if err != nil {
		return err
	}
	kc.freed.Store(true)
	kc.blocks = nil
	return nil
}

// CopyKVBlocks copies whole blocks, every layer at once.
func (be *Backend) CopyKVBlocks(c backend.KVCache, src, dst []int32) error {
	kc, err := be.cache(c)
	if err != nil {
		return err
	}
	if err := backend.CheckBlockCopy(kc.spec, src, dst); err != nil {
		return err
	}
	for i, s := range src {
		if kc.blocks[s] == nil {
			continue // never written: its contents are undefined anyway
		}
		if kc.blocks[dst[i]] == nil {
			kc.blocks[dst[i]] = make([]float32, len(kc.blocks[s]))
		}
		copy(kc.blocks[dst[i]], kc.blocks[s])
	}
	return nil
}

// PrepareStep checks s and computes where each new row goes.
func (be *Backend) PrepareStep(c backend.KVCache, s backend.PagedStep) (backend.PagedLayout, error) {
	kc, err := be.cache(c)
	if err != nil {
		return nil, err
	}
	slots, err := backend.CheckPagedStep(kc.spec, s)
	if err != nil {
		return nil, err
	}
	return &pagedLayout{cache: kc, step: s, slots: slots}, nil
}

// ReleaseStep drops the layout's scratch.
func (be *Backend) ReleaseStep(l backend.PagedLayout) error {
	pl, err := be.layout(l)
	if err != nil {
		return err
	}
	pl.released.Store(true)
	pl.scratch = nil
	return nil
}

// AppendKV copies each new row's keys and values into its cache row.
func (be *Backend) AppendKV(l backend.PagedLayout, layer int, k, v backend.Buffer) error {
	pl, err := be.layout(l)
	if err != nil {
		return err
	}
	spec := pl.cache.spec
	if layer < 0 || layer >= spec.Layers {
		return fmt.Errorf("%w: layer %d of a cache of %d layers", backend.ErrIndex, layer, spec.Layers)
	}
	w := spec.Width()
	if err := backend.CheckKVRows("append keys", k, pl.step.Rows, w); err != nil {
		return err
	}
	if err := backend.CheckKVRows("append values", v, pl.step.Rows, w); err != nil {
		return err
	}
	vs, err := be.views("append", k, v)
	if err != nil {
		return err
	}
	bs := int32(spec.BlockSize)
	for r, slot := range pl.slots {
		if slot < 0 {
			continue
		}
		kr, vr := pl.cache.rows(slot/bs, layer, true)
		off := int(slot%bs) * w
		copy(kr[off:off+w], vs[0][r*w:(r+1)*w])
		copy(vr[off:off+w], vs[1][r*w:(r+1)*w])
	}
	return nil
}

// PagedAttention gathers, per sequence and key/value head, the
// sequence's keys and values of that head from their blocks into
// contiguous scratch, then computes each query head of the group as
// AttentionForward does: scores of a block of query rows (one GEMM), a
// masked softmax in float32 with float64 sums, and the product with the
// values (a second GEMM). Tasks (sequence, key/value head) run in
// parallel.
func (be *Backend) PagedAttention(l backend.PagedLayout, layer int, a backend.Attention, out, q backend.Buffer) error {
	pl, err := be.layout(l)
	if err != nil {
		return err
	}
	spec := pl.cache.spec
	if err := backend.CheckPagedAttention(spec, pl.step.Rows, layer, a, out, q); err != nil {
		return err
	}
	vs, err := be.views("paged attention", out, q)
	if err != nil {
		return err
	}
	od, qd := vs[0], vs[1]
	clear(od)
	d, group, w := a.HeadDim, a.Heads/a.KVHeads, spec.Width()
	qRow := a.Heads * d
	var seqs []int
	maxK := 0
	for i, s := range pl.step.Seqs {
		if s.QLen > 0 {
			seqs = append(seqs, i)
			maxK = max(maxK, s.KLen)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	// Scratch per worker: keys and values [maxK, d], scores [attnBlock, maxK].
	need := 2*maxK*d + attnBlock*maxK
	if len(pl.scratch) < be.workers {
		pl.scratch = make([][]float32, be.workers)
	}
	errs := make([]error, be.workers)
	bs := spec.BlockSize
	be.parallelTasks(len(seqs)*a.KVHeads, func(wk, task int) {
		if errs[wk] != nil {
			return
		}
		s, g := pl.step.Seqs[seqs[task/a.KVHeads]], task%a.KVHeads
		if len(pl.scratch[wk]) < need {
			pl.scratch[wk] = make([]float32, need)
		}
		sc := pl.scratch[wk]
		kb, vb, p := sc[:maxK*d], sc[maxK*d:2*maxK*d], sc[2*maxK*d:]
		for blk := 0; blk*bs < s.KLen; blk++ {
			kr, vr := pl.cache.rows(s.Blocks[blk], layer, false)
			if kr == nil {
				errs[wk] = fmt.Errorf("%w: paged attention reads block %d, never written", backend.ErrIndex, s.Blocks[blk])
				return
			}
			for r := range min(bs, s.KLen-blk*bs) {
				pos := blk*bs + r
				copy(kb[pos*d:(pos+1)*d], kr[r*w+g*d:r*w+g*d+d])
				copy(vb[pos*d:(pos+1)*d], vr[r*w+g*d:r*w+g*d+d])
			}
		}
		past := s.KLen - s.QLen
		for h := g * group; h < (g+1)*group; h++ {
			qBase := s.Q0*qRow + h*d
			for r0 := 0; r0 < s.QLen; r0 += attnBlock {
				r1 := min(r0+attnBlock, s.QLen)
				nb, nk := r1-r0, past+r1
				if err := be.ser.Sgemm(false, true, nb, nk, d, a.Scale, qd[qBase+r0*qRow:], qRow, kb, d, 0, p, nk); err != nil {
					errs[wk] = err
					return
				}
				for i := range nb {
					row := p[i*nk : (i+1)*nk]
					be.causalSoftmax(row, past+r0+i+1)
				}
				if err := be.ser.Sgemm(false, false, nb, d, nk, 1, p, nk, vb, d, 0, od[qBase+r0*qRow:], qRow); err != nil {
					errs[wk] = err
					return
				}
			}
		}
	})
	for _, e := range errs {
		if e != nil {
			return fmt.Errorf("paged attention: %w", e)
		}
	}
	return nil
}

// SampleRows runs backend.HostSampler on each row of the logits buffer in
// place, rows in parallel. The log-probabilities it records are then
// computed again by LogProbEntropy's own arithmetic (rowLogProb):
// RawLogProb at temperature 1, and LogProb at the row's temperature when
// nothing is truncated (no top-k, top-p or min-p), so that they equal,
// bit for bit, what LogProbEntropy computes for the same hidden state —
// the sampler's log-probabilities are the trainer's.
func (be *Backend) SampleRows(logits backend.Buffer, vocab int, rows []backend.SampleRow, out []backend.SampleResult) error {
	ld, err := be.view("sample logits", logits)
	if err != nil {
		return err
	}
	if err := backend.CheckSampleRows(logits, vocab, rows, out); err != nil {
		return err
	}
	samplers := make([]*backend.HostSampler, be.workers)
	scratch := make([][]float32, be.workers)
	nc := min(vocab, lmVocab)
	be.parallelTasks(len(rows), func(w, i int) {
		if samplers[w] == nil {
			samplers[w] = be.hostSampler()
			scratch[w] = make([]float32, 2*nc)
		}
		z, r := ld[i*vocab:(i+1)*vocab], rows[i]
		res := samplers[w].Sample(z, r)
		if res.Token >= 0 {
			zc, ex := scratch[w][:nc], scratch[w][nc:]
			res.RawLogProb = be.rowLogProb(z, int(res.Token), 1, zc, ex)
			if !r.Greedy && untruncated(r, vocab) {
				res.LogProb = be.rowLogProb(z, int(res.Token), float32(1/r.Temperature), zc, ex)
			}
		}
		out[i] = res
	})
	for _, s := range samplers {
		if s != nil {
			be.samplers.Put(s)
		}
	}
	return nil
}

// untruncated reports whether r keeps every token (its LogProb is then
// the log-softmax of the logits at its temperature).
func untruncated(r backend.SampleRow, vocab int) bool {
	return r.MinP == 0 && (r.TopK <= 0 || r.TopK >= vocab) && (r.TopP <= 0 || r.TopP >= 1)
}

// hostSampler takes a sampler (with its buffers) from the backend's pool.
func (be *Backend) hostSampler() *backend.HostSampler {
	if s, ok := be.samplers.Get().(*backend.HostSampler); ok {
		return s
	}
	return &backend.HostSampler{}
}
