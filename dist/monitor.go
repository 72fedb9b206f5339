package dist

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The watchdog's side channel: every rank keeps one TCP connection to
// rank 0, opened at the rendezvous (which also carries an opaque blob,
// the NCCL unique id, from rank 0 to the others). Before each collective
// a rank sends rank 0 its sequence number (a 13-byte message, no reply).
// When a collective times out, rank 0 knows which ranks have not sent
// it, and a rank other than 0 asks rank 0 and gets the list back. A
// connection that closes without a goodbye means its process ended:
// rank 0 tells the others, and every rank's collective in flight fails
// at once naming it. This is not a collective engine: no data moves
// through it.

// Message types on the wire: a type byte, a 4-byte big-endian length,
// the body.
const (
	msgHello   byte = 'H' // rank u32, size u32, token u64
	msgWelcome byte = 'W' // the blob
	msgReject  byte = 'R' // why, as text
	msgArrive  byte = 'A' // seq i64
	msgQuery   byte = 'Q' // seq i64
	msgReply   byte = 'P' // seq i64, then u32 ranks
	msgDown    byte = 'D' // rank u32
	msgBye     byte = 'B' // empty
)

// maxFrame bounds a message body (a blob, a reply listing every rank).
const maxFrame = 1 << 24

// errRejected marks a join that rank 0 refused.
var errRejected = errors.New("dist: rank 0 refused the join")

// wire is one connection with a write lock.
type wire struct {
	c   net.Conn
	r   *bufio.Reader
	wmu sync.Mutex
}

func newWire(c net.Conn) *wire { return &wire{c: c, r: bufio.NewReader(c)} }

// send writes one message (with a deadline: a peer that stops reading
// does not block the sender for long).
func (w *wire) send(typ byte, body []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(body)))
	_ = w.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := w.c.Write(append(h[:], body...)); err != nil {
		return err
	}
	return nil
}

// recv reads one message.
func (w *wire) recv() (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(w.r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("dist: watchdog message of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(w.r, body); err != nil {
		return 0, nil, err
	}
	return h[0], body, nil
}

func i64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// monitor is one rank's end of the watchdog.
type monitor struct {
	rank, size int

	ln    net.Listener // rank 0
	peers []*wire      // rank 0: by rank, nil at 0
	up    *wire        // other ranks: the connection to rank 0

	replies chan []byte // other ranks: reply bodies

	mu      sync.Mutex
	arrived []int64 // rank 0: the last sequence number each rank sent
	gone    []int
	byes    map[int]bool

	down     chan struct{}
	downOnce sync.Once
	closing  atomic.Bool
	wg       sync.WaitGroup
}

func newMonitor(rank, size int) *monitor {
	return &monitor{rank: rank, size: size, byes: map[int]bool{}, down: make(chan struct{}), replies: make(chan []byte, 1)}
}

// serveMonitor is rank 0's side: it accepts the other size−1 ranks on ln
// until they have all joined, or wait passes (an error naming those that
// did not), answering each with blob.
func serveMonitor(ctx context.Context, ln net.Listener, size int, token uint64, blob []byte, wait time.Duration) (*monitor, error) {
	m := newMonitor(0, size)
	m.ln, m.peers, m.arrived = ln, make([]*wire, size), make([]int64, size)
	deadline := time.Now().Add(wait)
	type joined struct {
		w    *wire
		rank int
		err  error
	}
	results := make(chan joined)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(results)
				return
			}
			go func() {
				w := newWire(c)
				_ = c.SetDeadline(deadline)
				rank, err := m.greet(w, size, token)
				_ = c.SetDeadline(time.Time{})
				results <- joined{w, rank, err}
			}()
		}
	}()
	fail := func(err error) (*monitor, error) {
		_ = ln.Close()
		for _, p := range m.peers {
			if p != nil {
				_ = p.c.Close()
			}
		}
		for j := range results { // drain the greeters
			if j.w != nil {
				_ = j.w.c.Close()
			}
		}
		return nil, err
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for n := 1; n < size; {
		select {
		case j, ok := <-results:
			if !ok {
				return fail(errors.New("dist: rendezvous: the listener closed"))
			}
			if j.err != nil {
				var bad *joinError
				if errors.As(j.err, &bad) {
					_ = j.w.send(msgReject, []byte(bad.Error()))
					_ = j.w.c.Close()
					if bad.fatal {
						return fail(bad)
					}
					continue // a stray connection
				}
				_ = j.w.c.Close()
				continue
			}
			n++ // greet put it in m.peers
		case <-timer.C:
			return fail(fmt.Errorf("dist: rendezvous: %s not join rank 0 within %v", rankList(m.absent(), "did", "did"), wait))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	for r, p := range m.peers {
		if p == nil {
			continue
		}
		if err := p.send(msgWelcome, blob); err != nil {
			return fail(fmt.Errorf("dist: rendezvous: welcoming rank %d: %w", r, err))
		}
	}
	// Later connections are strays: the listener closes.
	_ = ln.Close()
	for r, p := range m.peers {
		if p != nil {
			m.wg.Add(1)
			go m.serve(r, p)
		}
	}
	return m, nil
}

// joinError is a hello that rank 0 refuses; fatal when it comes from a
// rank of this job that disagrees with rank 0 (the job cannot start).
type joinError struct {
	msg   string
	fatal bool
}

func (e *joinError) Error() string { return e.msg }

// greet reads a hello and checks it.
func (m *monitor) greet(w *wire, size int, token uint64) (int, error) {
	typ, body, err := w.recv()
	if err != nil {
		return 0, err
	}
	if typ != msgHello || len(body) != 16 {
		return 0, &joinError{msg: "dist: rendezvous: not a hello of this package"}
	}
	rank := int(binary.BigEndian.Uint32(body))
	theirs := int(binary.BigEndian.Uint32(body[4:]))
	tok := binary.BigEndian.Uint64(body[8:])
	switch {
	case tok != token:
		return 0, &joinError{msg: "dist: rendezvous: a connection from another job (token differs)"}
	case theirs != size:
		return 0, &joinError{msg: fmt.Sprintf("dist: rendezvous: rank %d says the world has %d ranks, rank 0 says %d", rank, theirs, size), fatal: true}
	case rank <= 0 || rank >= size:
		return 0, &joinError{msg: fmt.Sprintf("dist: rendezvous: a rank %d joined a world of %d", rank, size), fatal: true}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.peers[rank] != nil {
		return 0, &joinError{msg: fmt.Sprintf("dist: rendezvous: two processes say they are rank %d", rank), fatal: true}
	}
	m.peers[rank] = w // reserved; replaced by the same value on success
	return rank, nil
}

// absent lists the ranks that have not joined.
func (m *monitor) absent() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for r := 1; r < m.size; r++ {
		if m.peers[r] == nil {
			out = append(out, r)
		}
	}
	return out
}

// joinMonitor is the side of a rank other than 0: it connects to addr,
// retrying until wait passes, introduces itself and returns the blob
// rank 0 sent.
func joinMonitor(ctx context.Context, addr string, rank, size int, token uint64, wait time.Duration) (*monitor, []byte, error) {
	deadline := time.Now().Add(wait)
	var c net.Conn
	var lastErr error
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		d := net.Dialer{Deadline: deadline}
		var err error
		if c, err = d.DialContext(ctx, "tcp", addr); err == nil {
			break
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if time.Now().Add(delay).After(deadline) {
			return nil, nil, fmt.Errorf("dist: rendezvous: rank %d could not reach rank 0 at %s within %v: %w", rank, addr, wait, lastErr)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	w := newWire(c)
	hello := binary.BigEndian.AppendUint32(nil, uint32(rank))
	hello = binary.BigEndian.AppendUint32(hello, uint32(size))
	hello = binary.BigEndian.AppendUint64(hello, token)
	_ = c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if err := w.send(msgHello, hello); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("dist: rendezvous: rank %d: %w", rank, err)
	}
	typ, body, err := w.recv()
	_ = c.SetDeadline(time.Time{})
	switch {
	case err != nil && ctx.Err() != nil:
		_ = c.Close()
		return nil, nil, ctx.Err()
	case err != nil:
		_ = c.Close()
		return nil, nil, fmt.Errorf("dist: rendezvous: rank %d waiting for rank 0's welcome at %s: %w", rank, addr, err)
	case typ == msgReject:
		_ = c.Close()
		return nil, nil, fmt.Errorf("%w: %s", errRejected, body)
	case typ != msgWelcome:
		_ = c.Close()
		return nil, nil, fmt.Errorf("dist: rendezvous: rank %d: unexpected message %q from %s", rank, typ, addr)
	}
	m := newMonitor(rank, size)
	m.up = w
	m.wg.Add(1)
	go m.listen()
	return m, body, nil
}

// serve is rank 0's reader of rank r's messages.
func (m *monitor) serve(r int, w *wire) {
	defer m.wg.Done()
	for {
		typ, body, err := w.recv()
		if err != nil {
			m.lost(r)
			return
		}
		switch typ {
		case msgArrive:
			if len(body) == 8 {
				m.mu.Lock()
				m.arrived[r] = max(m.arrived[r], int64(binary.BigEndian.Uint64(body)))
				m.mu.Unlock()
			}
		case msgQuery:
			if len(body) == 8 {
				seq := int64(binary.BigEndian.Uint64(body))
				reply := i64(seq)
				for _, x := range m.late(seq) {
					reply = binary.BigEndian.AppendUint32(reply, uint32(x))
				}
				_ = w.send(msgReply, reply)
			}
		case msgBye:
			m.mu.Lock()
			m.byes[r] = true
			m.mu.Unlock()
			return
		}
	}
}

// listen is the reader of rank 0's messages on the other ranks.
func (m *monitor) listen() {
	defer m.wg.Done()
	for {
		typ, body, err := m.up.recv()
		if err != nil {
			m.lost(0)
			return
		}
		switch typ {
		case msgReply:
			select {
			case m.replies <- body:
			default: // nobody asked any more
			}
		case msgDown:
			if len(body) == 4 {
				m.markGone(int(binary.BigEndian.Uint32(body)))
			}
		case msgBye:
			m.mu.Lock()
			m.byes[0] = true
			m.mu.Unlock()
			return
		}
	}
}

// lost handles the end of rank r's connection: gone, unless it said
// goodbye or this side is closing.
func (m *monitor) lost(r int) {
	m.mu.Lock()
	bye := m.byes[r]
	m.mu.Unlock()
	if bye || m.closing.Load() {
		return
	}
	m.markGone(r)
	if m.rank == 0 {
		for q, p := range m.peers {
			if p != nil && q != r {
				_ = p.send(msgDown, binary.BigEndian.AppendUint32(nil, uint32(r)))
			}
		}
	}
}

// markGone records that rank r ended and cancels the collective in flight.
func (m *monitor) markGone(r int) {
	m.mu.Lock()
	if !slices.Contains(m.gone, r) {
		m.gone = append(m.gone, r)
		slices.Sort(m.gone)
	}
	m.mu.Unlock()
	m.downOnce.Do(func() { close(m.down) })
}

// downCh is closed when a rank is gone.
func (m *monitor) downCh() <-chan struct{} { return m.down }

// goneRanks are the ranks that ended.
func (m *monitor) goneRanks() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.gone)
}

// arrive announces that this rank entered collective seq.
func (m *monitor) arrive(seq int64) {
	if m.rank == 0 {
		m.mu.Lock()
		m.arrived[0] = seq
		m.mu.Unlock()
		return
	}
	_ = m.up.send(msgArrive, i64(seq)) // a lost connection is the reader's news
}

// late lists, on rank 0, the ranks whose last arrival is before seq.
func (m *monitor) late(seq int64) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for r, a := range m.arrived {
		if a < seq {
			out = append(out, r)
		}
	}
	return out
}

// missing lists the ranks that have not arrived at collective seq: rank
// 0 knows; the others ask it and wait up to wait for the answer
// (noAnswer, and rank 0 named, when it does not come).
func (m *monitor) missing(ctx context.Context, seq int64, wait time.Duration) (ranks []int, noAnswer bool) {
	if m.rank == 0 {
		return m.late(seq), false
	}
	for {
		select {
		case <-m.replies: // a stale answer
			continue
		default:
		}
		break
	}
	if err := m.up.send(msgQuery, i64(seq)); err != nil {
		return []int{0}, true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case body := <-m.replies:
			if len(body) < 8 || int64(binary.BigEndian.Uint64(body)) != seq {
				continue
			}
			var out []int
			for b := body[8:]; len(b) >= 4; b = b[4:] {
				out = append(out, int(binary.BigEndian.Uint32(b)))
			}
			return out, false
		case <-timer.C:
			return []int{0}, true
		case <-ctx.Done():
			return []int{0}, true
		}
	}
}

// close ends the watchdog; clean says goodbye first, so that the other
// ranks do not take this rank's end for a death.
func (m *monitor) close(clean bool) error {
	m.closing.Store(true)
	var conns []*wire
	if m.up != nil {
		conns = append(conns, m.up)
	}
	for _, p := range m.peers {
		if p != nil {
			conns = append(conns, p)
		}
	}
	for _, w := range conns {
		if clean {
			_ = w.send(msgBye, nil)
		}
		_ = w.c.Close()
	}
	if m.ln != nil {
		_ = m.ln.Close()
	}
	m.wg.Wait()
	return nil
}
