//go:build agentrl_cuda && cgo

package gpu

/*
#include <cuda.h>
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// The launch queue, the staged uploads and the CUDA graphs.
//
// A call that only queues device work (a kernel, a product, Alloc, Free,
// the decode calls) joins be.q instead of waiting for the worker thread
// (WithLaunchQueue). The next call that waits for the worker runs the
// queue first, in order, then itself: a decode step, whose only answer is
// SampleRows' download, reaches the worker once.
//
// The small host data a call needs on the device (token ids, positions,
// RoPE frequencies, a step's layout, sampling parameters) is staged when
// the call is made: copied into the queue's staging list, and uploaded,
// all of it in one asynchronous copy from pinned memory, when the worker
// next runs, before any queued launch. Its device address is known then
// (staged.ptr); the queued calls read it when they run.
//
// While the worker runs a round trip's queued calls, what they would send
// to the stream is recorded (be.rec) and sent after the last of them: as
// the launches themselves, or — when the same record came before
// (WithCUDAGraphs) — as a CUDA graph captured from it, replayed with one
// cuGraphLaunch. A record is the same when every launch, product, memset
// and copy has the same kernel, shape and arguments, device addresses
// included, so a replay does exactly what the launches would do; the
// staged data that differs between steps is at the same addresses,
// uploaded before the replay (inputs updated in place).

// queueMax is the most calls the queue holds before the call that would
// exceed it runs them (a Qwen3-4B decode step queues about 900).
const queueMax = 4096

// graphsMax is the most graphs kept (each a batch shape of the decode
// loop); the least recently replayed goes first.
const graphsMax = 8

// launchQueue is what callers queued for the worker: calls and staged
// uploads, guarded by mu (callers may be on any goroutine).
type launchQueue struct {
	mu  sync.Mutex
	ops []func() error
	ups []*staged
	// held is the error of queued calls sent by a method that returns
	// none (Stats): the next call that returns an error reports it.
	held error
}

// staged is host data bound for the device: data until the worker
// uploads it, then ptr in an arena shared with the other arrays of that
// upload. The owner releases it (unstage) on the worker thread.
type staged struct {
	data  []byte
	arena *arena
	ptr   devPtr
}

// arena is one upload's device block, returned to the caching allocator
// (in stream order) when its last staged array is released.
type arena struct {
	ptr  devPtr
	refs int
}

// stageBytes queues b (copied) for the next upload.
func (be *Backend) stageBytes(b []byte) *staged {
	s := &staged{data: b}
	be.q.mu.Lock()
	be.q.ups = append(be.q.ups, s)
	be.q.mu.Unlock()
	return s
}

// stageInts stages int32 values (nil for none).
func (be *Backend) stageInts(v []int32) *staged {
	if len(v) == 0 {
		return nil
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return be.stageBytes(b)
}

// stageFloats stages float32 values (nil for none).
func (be *Backend) stageFloats(v []float32) *staged {
	if len(v) == 0 {
		return nil
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return be.stageBytes(b)
}

// addr is s's device address (worker thread, after the upload); 0 for nil.
func (s *staged) addr() devPtr {
	if s == nil {
		return 0
	}
	return s.ptr
}

// unstage releases s (worker thread): its arena goes back to the cache
// with its last array.
func (be *Backend) unstage(ss ...*staged) error {
	var errs []error
	for _, s := range ss {
		if s == nil || s.arena == nil {
			continue
		}
		a := s.arena
		s.arena, s.ptr = nil, 0
		if a.refs--; a.refs == 0 {
			errs = append(errs, be.cache.put(a.ptr))
		}
	}
	return errors.Join(errs...)
}

// enqueue is runW for a call that needs no answer from the worker: with
// the queue on it joins the queue (running it when full), else it runs.
func (be *Backend) enqueue(outs []*buffer, f func() error) error {
	if !be.cfg.queue {
		return be.runW(outs, f)
	}
	return be.queueOp(func() error {
		// Optimizer updates pending when the call was queued come first.
		if err := be.flushOpt(); err != nil {
			return err
		}
		be.weights.wrote(outs...)
		return f()
	})
}

// queueOp appends op to the queue, and runs the queue when it is full.
func (be *Backend) queueOp(op func() error) error {
	if be == nil || be.w == nil {
		return fmt.Errorf("%w: zero Backend (use New)", ErrClosed)
	}
	if be.closed.Load() {
		return ErrClosed
	}
	be.q.mu.Lock()
	be.q.ops = append(be.q.ops, op)
	full := len(be.q.ops) >= queueMax
	be.q.mu.Unlock()
	if full {
		return be.run(func() error { return nil })
	}
	return nil
}

// drainQueue runs on the worker at the start of every round trip: the
// staged uploads in one copy, then the queued calls, recorded and sent
// as launches or a graph. The first error stops the calls after it.
func (be *Backend) drainQueue() error {
	be.q.mu.Lock()
	ops, ups, held := be.q.ops, be.q.ups, be.q.held
	be.q.ops, be.q.ups, be.q.held = nil, nil, nil
	be.q.mu.Unlock()
	if held != nil {
		// The calls queued after the failed one went with it; these
		// follow them (their staged data holds no device memory yet).
		return held
	}
	if err := be.uploadStaged(ups); err != nil {
		return fmt.Errorf("gpu: uploading a step's data: %w", err)
	}
	if len(ops) == 0 {
		return nil
	}
	be.counters.Queued += uint64(len(ops))
	be.startRecord()
	for _, op := range ops {
		if err := op(); err != nil {
			be.rec = nil // what was recorded is dropped with the calls after
			return fmt.Errorf("gpu: a queued call failed: %w", err)
		}
	}
	return be.endRecord()
}

// ---- staging --------------------------------------------------------------

// stager is the pinned host memory of the uploads: two buffers used in
// turn, each with the event recorded after its copy (a buffer is written
// again only after its previous copy is done).
type stager struct {
	host [2]unsafe.Pointer
	size [2]int
	ev   [2]C.CUevent
	used [2]bool
	cur  int
	off  bool // the driver lacks pinned memory: plain copies
}

// uploadStaged copies ups to one new device block in one copy, before
// any queued launch (worker thread).
func (be *Backend) uploadStaged(ups []*staged) error {
	total := 0
	for _, s := range ups {
		total += stageSlot(len(s.data))
	}
	if total == 0 {
		return nil
	}
	p, err := be.cache.get(uint64(total))
	if err != nil {
		return err
	}
	a := &arena{ptr: p, refs: len(ups)}
	host, err := be.stagingHost(total)
	if err != nil {
		_ = be.cache.put(p)
		return err
	}
	off := 0
	for _, s := range ups {
		copy(host[off:], s.data)
		n := len(s.data)
		s.arena, s.ptr, s.data = a, p+devPtr(off), nil
		off += stageSlot(n)
	}
	return be.htodStaged(p, host[:total])
}

// stagingHost returns n bytes of the next pinned buffer, once its
// previous copy is done (or Go memory when the driver has no pinned
// memory).
func (be *Backend) stagingHost(n int) ([]byte, error) {
	st := &be.stage
	if st.off || !be.dr.hasPinned() {
		st.off = true
		return make([]byte, n), nil
	}
	i := st.cur
	if st.used[i] {
		if err := be.dr.eventSync(st.ev[i]); err != nil {
			return nil, err
		}
	}
	if st.size[i] < n {
		if st.host[i] != nil {
			if err := be.dr.hostFree(st.host[i]); err != nil {
				return nil, err
			}
			st.host[i], st.size[i] = nil, 0
		}
		size := 1 << 16
		for size < n {
			size *= 2
		}
		h, err := be.dr.hostAlloc(size)
		if err != nil {
			return nil, err
		}
		st.host[i], st.size[i] = h, size
	}
	if st.ev[i] == nil {
		e, err := be.dr.eventCreate()
		if err != nil {
			return nil, err
		}
		st.ev[i] = e
	}
	return unsafe.Slice((*byte)(st.host[i]), st.size[i])[:n], nil
}

// htodStaged copies host (from stagingHost) to dst: asynchronously from
// the pinned buffer, or a plain copy.
func (be *Backend) htodStaged(dst devPtr, host []byte) error {
	st := &be.stage
	if st.off {
		return be.htod(dst, unsafe.Pointer(&host[0]), len(host))
	}
	i := st.cur
	be.noteUpload(len(host))
	be.counters.HtoDAsync++
	err := be.profiled("memcpy HtoD", func() error {
		return be.dr.htodAsync(dst, unsafe.Pointer(&host[0]), len(host), be.stream)
	})
	if err != nil {
		return err
	}
	if err := be.dr.eventRecord(st.ev[i], be.stream); err != nil {
		return err
	}
	st.used[i] = true
	st.cur ^= 1
	return nil
}

// noteUpload counts an upload, and whether device work was queued before
// it since the host last waited (Counters.LateUploads).
func (be *Backend) noteUpload(bytes int) {
	be.counters.HtoD++
	be.counters.HtoDBytes += uint64(bytes)
	if be.queuedWork {
		be.counters.LateUploads++
	}
}

// releaseStaging frees the pinned buffers and their events (teardown).
func (be *Backend) releaseStaging() error {
	st := &be.stage
	var errs []error
	for i := range st.host {
		if st.host[i] != nil {
			errs = append(errs, be.dr.hostFree(st.host[i]))
		}
		if st.ev[i] != nil {
			errs = append(errs, be.dr.eventDestroy(st.ev[i]))
		}
	}
	*st = stager{}
	return errors.Join(errs...)
}

// ---- records and graphs -----------------------------------------------------

// record is the stream work of one round trip's queued calls, not yet
// sent: key identifies it (every call's kind, kernel, shape and
// arguments), ops send it.
type record struct {
	key []byte
	ops []func() error
}

// graphs holds the captured graphs by record key, and how often each key
// not captured yet was seen.
type graphs struct {
	exec  map[string]*graphExec
	seen  map[string]int
	clock uint64
	last  []byte // the record before, for WithGraphTrace
}

type graphExec struct {
	exec C.CUgraphExec
	used uint64
}

// graphsOn reports whether queued work is recorded for graphs.
func (be *Backend) graphsOn() bool {
	return be.cfg.queue && be.cfg.graphs && !be.cfg.profile && be.dr.hasGraphs()
}

// startRecord starts recording the stream work of the queued calls.
func (be *Backend) startRecord() {
	if be.graphsOn() {
		be.rec = &record{}
	}
}

// issue sends one call's stream work, or records it under key. Every
// launch, product, memset and device copy goes through it.
func (be *Backend) issue(key []byte, send func() error) error {
	be.queuedWork = true
	if be.rec == nil {
		return send()
	}
	be.rec.key = binary.LittleEndian.AppendUint32(be.rec.key, uint32(len(key)))
	be.rec.key = append(be.rec.key, key...)
	be.rec.ops = append(be.rec.ops, send)
	return nil
}

// settle sends what is recorded and stops recording: the worker is about
// to do something outside the stream's order (a plain copy, a wait),
// which a graph cannot hold.
func (be *Backend) settle() error {
	r := be.rec
	if r == nil {
		return nil
	}
	be.rec = nil
	return sendAll(r.ops)
}

func sendAll(ops []func() error) error {
	for _, op := range ops {
		if err := op(); err != nil {
			return err
		}
	}
	return nil
}

// endRecord sends the record: a replay of its graph, a new graph on its
// second sighting, or its launches.
func (be *Backend) endRecord() error {
	r := be.rec
	be.rec = nil
	if r == nil || len(r.ops) == 0 {
		return nil
	}
	g := &be.graphs
	if g.exec == nil {
		g.exec, g.seen = map[string]*graphExec{}, map[string]int{}
	}
	key := string(r.key)
	g.clock++
	if e, ok := g.exec[key]; ok {
		e.used = g.clock
		be.counters.GraphReplays++
		be.traceRecord(r, "replayed")
		return be.dr.graphLaunch(e.exec, be.stream)
	}
	switch n := g.seen[key]; {
	case n < 0:
		be.traceRecord(r, "sent (not capturable)")
		return sendAll(r.ops)
	case n == 0:
		be.traceRecord(r, "sent (first sighting)")
		if len(g.seen) >= 16*graphsMax {
			clear(g.seen)
		}
		g.seen[key] = 1
		return sendAll(r.ops)
	}
	exec, err := be.capture(r.ops)
	be.traceRecord(r, fmt.Sprintf("captured (error: %v)", err))
	if err != nil {
		// Not capturable (or the capture failed): never tried again.
		g.seen[key] = -1
		be.counters.GraphFallbacks++
		return sendAll(r.ops)
	}
	delete(g.seen, key)
	if len(g.exec) >= graphsMax {
		var oldest string
		for k, e := range g.exec {
			if oldest == "" || e.used < g.exec[oldest].used {
				oldest = k
			}
		}
		// A graph still running is freed when it completes.
		_ = be.dr.graphExecDestroy(g.exec[oldest].exec)
		delete(g.exec, oldest)
	}
	g.exec[key] = &graphExec{exec: exec, used: g.clock}
	be.counters.GraphCaptures++
	return be.dr.graphLaunch(exec, be.stream)
}

// capture records ops into an executable graph (nothing runs). On an
// error the stream is out of capture and nothing was sent.
func (be *Backend) capture(ops []func() error) (C.CUgraphExec, error) {
	if err := be.dr.beginCapture(be.stream); err != nil {
		return nil, err
	}
	opErr := sendAll(ops)
	graph, endErr := be.dr.endCapture(be.stream)
	if opErr != nil || endErr != nil {
		if graph != nil {
			_ = be.dr.graphDestroy(graph)
		}
		return nil, errors.Join(opErr, endErr)
	}
	exec, err := be.dr.graphInstantiate(graph)
	_ = be.dr.graphDestroy(graph)
	if err != nil {
		return nil, err
	}
	return exec, nil
}

// releaseGraphs destroys the captured graphs (teardown).
func (be *Backend) releaseGraphs() error {
	var errs []error
	for _, e := range be.graphs.exec {
		errs = append(errs, be.dr.graphExecDestroy(e.exec))
	}
	be.graphs = graphs{}
	return errors.Join(errs...)
}

// opKey builds a record key: a tag and the values of a call.
func opKey(tag byte, vals ...uint64) []byte {
	k := make([]byte, 1, 1+8*len(vals))
	k[0] = tag
	for _, v := range vals {
		k = binary.LittleEndian.AppendUint64(k, v)
	}
	return k
}

// traceRecord writes r's line to the WithGraphTrace writer, if any.
func (be *Backend) traceRecord(r *record, what string) {
	w := be.cfg.graphTrace
	if w == nil {
		return
	}
	prev := be.graphs.last
	be.graphs.last = r.key
	line := fmt.Sprintf("record %d: %d calls, %d key bytes, %s", be.graphs.clock, len(r.ops), len(r.key), what)
	if prev != nil && !bytes.Equal(prev, r.key) {
		a, b := splitKey(prev), splitKey(r.key)
		i := 0
		for i < len(a) && i < len(b) && bytes.Equal(a[i], b[i]) {
			i++
		}
		var was, now []byte
		if i < len(a) {
			was = a[i]
		}
		if i < len(b) {
			now = b[i]
		}
		line += fmt.Sprintf("; differs from the record before at call %d of %d/%d: %x -> %x", i, len(a), len(b), was, now)
	}
	fmt.Fprintln(w, line)
}

// splitKey cuts a record key into its calls' keys (each behind its
// 4-byte length, as issue appends them).
func splitKey(k []byte) [][]byte {
	var out [][]byte
	for len(k) >= 4 {
		n := int(binary.LittleEndian.Uint32(k))
		k = k[4:]
		if n > len(k) {
			n = len(k)
		}
		out = append(out, k[:n])
		k = k[n:]
	}
	return out
}
