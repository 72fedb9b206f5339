package policy

import (
	"fmt"

	"github.com/agentrl/agentrl/policy/backend"
)

// kvBuffers are per-layer key and value buffers of the same number of
// rows (kvHeads·headDim floats each): a session's cache or the pool's.
type kvBuffers struct {
	k, v []backend.Buffer
}

// allocKV returns buffers of rows rows for every layer; on failure
// nothing stays allocated.
func (m *Model) allocKV(rows int) (kvBuffers, error) {
	var b kvBuffers
	n := rows * m.kvWidth()
	for range m.net.layers {
		for _, dst := range []*[]backend.Buffer{&b.k, &b.v} {
			buf, err := m.be.Alloc(n)
			if err != nil {
				b.free(m.be)
				return kvBuffers{}, fmt.Errorf("policy: allocating the KV cache (%d rows): %w", rows, err)
			}
			*dst = append(*dst, buf)
		}
	}
	return b, nil
}

// free releases every buffer, keys and values independently (an
// allocation that failed half-way leaves one more key than value buffer).
func (b *kvBuffers) free(be backend.Backend) {
	for _, buf := range b.k {
		_ = be.Free(buf)
	}
	for _, buf := range b.v {
		_ = be.Free(buf)
	}
	b.k, b.v = nil, nil
}

// copyKV copies rows rows of keys and values, in every layer, from src
// starting at row srcRow to dst starting at row dstRow.
func (m *Model) copyKV(dst kvBuffers, dstRow int, src kvBuffers, srcRow, rows int) error {
	kvw := m.kvWidth()
	for l := range dst.k {
		if err := m.be.Copy(dst.k[l], dstRow*kvw, src.k[l], srcRow*kvw, rows*kvw); err != nil {
			return err
		}
		if err := m.be.Copy(dst.v[l], dstRow*kvw, src.v[l], srcRow*kvw, rows*kvw); err != nil {
			return err
		}
	}
	return nil
}

// kvPool is the KV cache of the sequences the scheduler is decoding: per
// layer one key and one value buffer of rows × kvHeads·headDim. Each live
// sequence owns a slot, a run of rows of which the first len hold its
// tokens' keys and values. Slots are placed at the top of the used rows;
// a finished sequence's rows are reclaimed when the pool is compacted,
// which happens only when a new or growing slot does not fit, so the cost
// of moving rows is amortised over many decode steps.
type kvPool struct {
	kvBuffers
	rows  int       // rows allocated per buffer
	top   int       // rows below top may be in use
	slots []*kvSlot // live slots, in order of base
}

// kvSlot is one sequence's rows: [base, base+cap), first len filled; cap
// never needs to exceed limit (the sequence's last position).
type kvSlot struct{ base, cap, len, limit int }

// kvWidth is the floats of one row of keys (or values).
func (m *Model) kvWidth() int { return m.cfg.NumKeyValueHeads * m.cfg.HeadDim }

// free releases the pool's buffers and forgets its slots.
func (p *kvPool) free(be backend.Backend) {
	p.kvBuffers.free(be)
	p.rows, p.top, p.slots = 0, 0, nil
}

// place gives each new slot (cap and limit set) rows at the top of the
// pool, compacting or enlarging it when they do not fit.
func (m *Model) place(p *kvPool, news []*kvSlot) error {
	need := 0
	for _, s := range news {
		need += s.cap
	}
	if p.top+need > p.rows {
		if err := m.compact(p, need); err != nil {
			return err
		}
	}
	for _, s := range news {
		s.base, s.len = p.top, 0
		p.top += s.cap
		p.slots = append(p.slots, s)
	}
	return nil
}

// release removes s from the pool; its rows are reclaimed at the next
// compaction (or at once when it is the top slot).
func (p *kvPool) release(s *kvSlot) {
	for i, x := range p.slots {
		if x == s {
			p.slots = append(p.slots[:i], p.slots[i+1:]...)
			break
		}
	}
	if s.base+s.cap == p.top {
		p.top = 0
		if n := len(p.slots); n > 0 {
			p.top = p.slots[n-1].base + p.slots[n-1].cap
		}
	}
}

// reserve makes room for need[j] more rows in slots[j]. A slot that must
// grow doubles its capacity (up to its limit); the top slot grows in
// place when the pool has the rows, otherwise the pool is compacted with
// the new capacities.
func (m *Model) reserve(p *kvPool, slots []*kvSlot, need []int) error {
	move := false
	for j, s := range slots {
		if s.len+need[j] <= s.cap {
			continue
		}
		newCap := min(max(s.len+need[j], 2*s.cap), max(s.limit, s.len+need[j]))
		if s.base+s.cap == p.top && s.base+newCap <= p.rows {
			s.cap = newCap
			p.top = s.base + newCap
			continue
		}
		s.cap = newCap
		move = true
	}
	if !move {
		return nil
	}
	return m.compact(p, 0)
}

// compact moves the live slots' rows, in order, to the bottom of new
// buffers with room for their capacities plus extra rows, and as much
// again of headroom, then frees the old buffers. Slot capacities may have
// been raised by the caller; only the len filled rows are copied.
func (m *Model) compact(p *kvPool, extra int) error {
	live := 0
	for _, s := range p.slots {
		live += s.cap
	}
	rows := 2 * (live + extra)
	nb, err := m.allocKV(rows)
	if err != nil {
		return err
	}
	base := 0
	for _, s := range p.slots {
		if s.len > 0 {
			if err := m.copyKV(nb, base, p.kvBuffers, s.base, s.len); err != nil {
				nb.free(m.be)
				return err
			}
		}
		base += s.cap
	}
	// Only now that every copy succeeded do the slots move.
	base = 0
	for _, s := range p.slots {
		s.base = base
		base += s.cap
	}
	slots := p.slots
	p.free(m.be)
	*p = kvPool{kvBuffers: nb, rows: rows, top: base, slots: slots}
	return nil
}

// extend feeds chunks[j] to the sequence of slots[j] (prefill with many
// tokens, decode with one; both may be mixed in one call), appending their
// keys and values, and returns the logits [vocab] after the last token of
// each chunk.
func (m *Model) extend(p *kvPool, slots []*kvSlot, chunks [][]int) ([][]float32, error) {
	need := make([]int, len(chunks))
	for j, c := range chunks {
		need[j] = len(c)
	}
	if err := m.reserve(p, slots, need); err != nil {
		return nil, err
	}
	var ids, pos, last []int32
	spans := make([]backend.Span, len(slots))
	offs := make([]int, len(slots))
	t := 0
	for j, s := range slots {
		offs[j] = t
		for n, id := range chunks[j] {
			ids = append(ids, int32(id))
			pos = append(pos, int32(s.len+n))
		}
		spans[j] = backend.Span{Q0: t, QLen: len(chunks[j]), K0: s.base, KLen: s.len + len(chunks[j])}
		t += len(chunks[j])
		last = append(last, int32(t-1))
	}
	kvw := m.kvWidth()
	store := func(l int, k, v backend.Buffer) (backend.Buffer, backend.Buffer, error) {
		for j, s := range slots {
			n := len(chunks[j]) * kvw
			if err := m.be.Copy(p.k[l], (s.base+s.len)*kvw, k, offs[j]*kvw, n); err != nil {
				return nil, nil, err
			}
			if err := m.be.Copy(p.v[l], (s.base+s.len)*kvw, v, offs[j]*kvw, n); err != nil {
				return nil, nil, err
			}
		}
		return p.k[l], p.v[l], nil
	}
	tp := m.newPass(false)
	defer tp.free()
	r := tp.newRows(pos, spans)
	r.kv = store
	hf := m.net.hidden(tp, ids, r, &hiddenSaved{})
	out := m.net.head.logits(tp, hf, t, last)
	if !tp.ok() {
		return nil, tp.err
	}
	for j, s := range slots {
		s.len += len(chunks[j])
	}
	v := m.cfg.VocabSize
	flat := make([]float32, len(slots)*v)
	if err := m.be.Download(flat, out, 0); err != nil {
		return nil, err
	}
	logits := make([][]float32, len(slots))
	for j := range logits {
		logits[j] = flat[j*v : (j+1)*v]
	}
	return logits, nil
}
