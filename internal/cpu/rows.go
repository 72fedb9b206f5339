package cpu

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agentrl/agentrl/policy/backend"
)

// rows is the CPU backend's backend.Rows: the validated layout, and the
// cosine and sine tables of RoPE for each frequency table used with it,
// computed at the first call and shared by the pass's later ones.
type rows struct {
	owner *Backend
	l     backend.RowLayout
	freed atomic.Bool
	mu    sync.Mutex
	tabs  []ropeTab
}

// ropeTab is cos and sin of pos[t]·freqs[i], [len(pos), len(freqs)].
type ropeTab struct {
	freqs    []float32
	cos, sin []float32
}

func (r *rows) Len() int { return r.l.Len() }

// NewRows validates and keeps the layout of a pass's rows.
func (be *Backend) NewRows(pos []int32, spans []backend.Span) (backend.Rows, error) {
	l, err := backend.NewRowLayout(pos, spans)
	if err != nil {
		return nil, err
	}
	return &rows{owner: be, l: l}, nil
}

// FreeRows releases r.
func (be *Backend) FreeRows(r backend.Rows) error {
	cr, err := be.rowsOf("free rows", r)
	if err != nil {
		return err
	}
	cr.freed.Store(true)
	cr.mu.Lock()
	cr.tabs = nil
	cr.mu.Unlock()
	return nil
}

// rowsOf returns r as this backend's rows, or an ErrBuffer error for nil,
// foreign or freed rows.
func (be *Backend) rowsOf(name string, r backend.Rows) (*rows, error) {
	cr, ok := r.(*rows)
	if !ok || cr == nil || cr.owner != be {
		return nil, fmt.Errorf("%w: %s: rows not made by this backend's NewRows", backend.ErrBuffer, name)
	}
	if cr.freed.Load() {
		return nil, fmt.Errorf("%w: %s: rows have been freed", backend.ErrBuffer, name)
	}
	return cr, nil
}

// ropeTable returns cos and sin of pos[t]·freqs[i], [len(pos),
// len(freqs)], made at the first call with these frequencies. The angle
// is the float32 product, as transformers computes it (inv_freq @
// position_ids in float32), so large positions round alike.
func (r *rows) ropeTable(freqs []float32) (cos, sin []float32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.tabs {
		if slices.Equal(t.freqs, freqs) {
			return t.cos, t.sin
		}
	}
	pos, h := r.l.Pos, len(freqs)
	cos, sin = make([]float32, len(pos)*h), make([]float32, len(pos)*h)
	for t, p := range pos {
		for i, f := range freqs {
			ang := float64(float32(p) * f)
			cos[t*h+i] = float32(math.Cos(ang))
			sin[t*h+i] = float32(math.Sin(ang))
		}
	}
	r.tabs = append(r.tabs, ropeTab{freqs: slices.Clone(freqs), cos: cos, sin: sin})
	return cos, sin
}
