//go:build agentrl_cuda && cgo

package gpu

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/agentrl/agentrl/policy/backend"
)

// rows is the CUDA backend's backend.Rows: the validated layout, and the
// device copies of what the kernels read of it — positions, frequency
// tables, attention tiles, the decode plan — each uploaded at its first
// use and kept until FreeRows, so that a pass's layers share one copy.
// The positions and frequency tables are staged by the calling goroutine
// (mu) and go up with the round trip's other staged data; the other
// device fields belong to the worker thread.
type rows struct {
	owner *Backend
	l     backend.RowLayout
	freed atomic.Bool

	mu    sync.Mutex
	pos   *staged
	freqs []rowFreqs

	blocks   []devPtr        // every device block below, returned by FreeRows
	tiles    map[int]devInts // attnTiles by rows per tile
	keyTiles map[int]devInts // attnKeyTiles by rows per tile
	decode   *decodeRows
}

// rowFreqs is a RoPE frequency table staged for these rows.
type rowFreqs struct {
	host []float32
	dev  *staged
}

// devInts is an int32 array on the device.
type devInts struct {
	ptr devPtr
	n   int
}

// decodeRows is decodePlan's result with its rows on the device.
type decodeRows struct {
	ok                bool
	rows              devInts
	splits, chunk, nr int
}

func (r *rows) Len() int { return r.l.Len() }

var _ backend.Rows = (*rows)(nil)

// NewRows validates the layout of a pass's rows; the device copies are
// made when a kernel first needs them.
func (be *Backend) NewRows(pos []int32, spans []backend.Span) (backend.Rows, error) {
	l, err := backend.NewRowLayout(pos, spans)
	if err != nil {
		return nil, err
	}
	if be == nil || be.w == nil || be.closed.Load() {
		return nil, ErrClosed
	}
	return &rows{owner: be, l: l, tiles: map[int]devInts{}, keyTiles: map[int]devInts{}}, nil
}

// FreeRows returns r's device copies to the caching allocator. Kernels
// queued with them run first: later uses of the blocks queue behind them
// on the same stream.
func (be *Backend) FreeRows(r backend.Rows) error {
	gr, err := be.rowsOf("free rows", r)
	if err != nil {
		return err
	}
	if gr.freed.Swap(true) {
		return fmt.Errorf("%w: free rows: rows have been freed", backend.ErrBuffer)
	}
	gr.mu.Lock()
	st := []*staged{gr.pos}
	for _, f := range gr.freqs {
		st = append(st, f.dev)
	}
	gr.pos, gr.freqs = nil, nil
	gr.mu.Unlock()
	return be.enqueue(nil, func() error {
		errs := []error{be.unstage(st...)}
		for _, p := range gr.blocks {
			errs = append(errs, be.cache.put(p))
		}
		gr.blocks, gr.tiles, gr.keyTiles, gr.decode = nil, nil, nil, nil
		return errors.Join(errs...)
	})
}

// rowsOf returns r as this Backend's rows, or an ErrBuffer error for nil,
// foreign or freed rows.
func (be *Backend) rowsOf(name string, r backend.Rows) (*rows, error) {
	gr, ok := r.(*rows)
	if !ok || gr == nil || gr.owner != be {
		return nil, fmt.Errorf("%w: %s: rows not made by this backend's NewRows", backend.ErrBuffer, name)
	}
	if gr.freed.Load() {
		return nil, fmt.Errorf("%w: %s: rows have been freed", backend.ErrBuffer, name)
	}
	return gr, nil
}

// upload copies v to a new device block of r (worker thread).
func (r *rows) upload(be *Backend, v unsafe.Pointer, bytes int) (devPtr, error) {
	if bytes == 0 {
		return 0, nil
	}
	p, err := be.cache.get(uint64(bytes))
	if err != nil {
		return 0, err
	}
	r.blocks = append(r.blocks, p)
	return p, be.htod(p, v, bytes)
}

func (r *rows) uploadInts(be *Backend, v []int32) (devInts, error) {
	if len(v) == 0 {
		return devInts{}, nil
	}
	p, err := r.upload(be, unsafe.Pointer(&v[0]), 4*len(v))
	return devInts{p, len(v)}, err
}

// stagedPos stages the positions at their first use.
func (r *rows) stagedPos(be *Backend) *staged {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pos == nil {
		r.pos = be.stageInts(r.l.Pos)
	}
	return r.pos
}

// stagedFreqs stages freqs, once per distinct table.
func (r *rows) stagedFreqs(be *Backend, freqs []float32) *staged {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.freqs {
		if slices.Equal(f.host, freqs) {
			return f.dev
		}
	}
	s := be.stageFloats(freqs)
	if s != nil {
		r.freqs = append(r.freqs, rowFreqs{host: slices.Clone(freqs), dev: s})
	}
	return s
}

// devTiles returns attnTiles(spans, n) on the device.
func (r *rows) devTiles(be *Backend, n int) (devInts, error) {
	if t, ok := r.tiles[n]; ok {
		return t, nil
	}
	t, err := r.uploadInts(be, attnTiles(r.l.Spans, n))
	if err == nil {
		r.tiles[n] = t
	}
	return t, err
}

// devKeyTiles returns attnKeyTiles(spans, n) on the device.
func (r *rows) devKeyTiles(be *Backend, n int) (devInts, error) {
	if t, ok := r.keyTiles[n]; ok {
		return t, nil
	}
	t, err := r.uploadInts(be, attnKeyTiles(r.l.Spans, n))
	if err == nil {
		r.keyTiles[n] = t
	}
	return t, err
}

// devDecode returns decodePlan(spans) with its rows on the device.
func (r *rows) devDecode(be *Backend) (*decodeRows, error) {
	if r.decode != nil {
		return r.decode, nil
	}
	plan, splits, chunk, ok := decodePlan(r.l.Spans)
	d := &decodeRows{ok: ok, splits: splits, chunk: chunk, nr: len(plan) / 3}
	if ok {
		var err error
		if d.rows, err = r.uploadInts(be, plan); err != nil {
			return nil, err
		}
	}
	r.decode = d
	return d, nil
}
