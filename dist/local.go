package dist

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/agentrl/agentrl/policy/backend"
)

// Local returns the communicator of a job of one process: rank 0 of 1,
// whose collectives copy (ReduceScatter, AllGather) or leave their
// buffers as they are. With a backend it is a DeviceComm over it. It is
// what Open returns when no launcher started the program.
func Local(be backend.Backend) Comm { return newComm(localEngine{be: be}, nil, 0) }

// localEngine is one rank.
type localEngine struct{ be backend.Backend }

func (localEngine) rank() int                 { return 0 }
func (localEngine) size() int                 { return 1 }
func (l localEngine) device() backend.Backend { return l.be }
func (localEngine) close(bool) error          { return nil }

func (l localEngine) run(_ context.Context, c coll) error {
	if c.kind != kReduceScatter && c.kind != kAllGather {
		return nil // one rank: the reduction or broadcast of its own data
	}
	return copyBuf(l.be, c.recv, c.send)
}

// copyBuf copies src into dst, buffers of one type and length.
func copyBuf(be backend.Backend, dst, src Buf) error {
	switch d := dst.(type) {
	case Float32s:
		copy(d, src.(Float32s))
	case Float64s:
		copy(d, src.(Float64s))
	case Bytes:
		copy(d, src.(Bytes))
	case Device:
		s := src.(Device)
		if d.N > 0 {
			return be.Copy(d.Buffer, d.Off, s.Buffer, s.Off, d.N)
		}
	}
	return nil
}

// GroupOptions configure NewGroup.
type GroupOptions struct {
	// Timeout bounds each collective's wait for the slowest rank; 0
	// waits forever.
	Timeout time.Duration
}

// NewGroup returns the communicators of n ranks that live in this
// process as goroutines: for tests of data-parallel code without a
// launcher (the ranks' collectives copy and reduce through shared
// memory, in rank order) and of the watchdog, which runs as it does
// between processes (over TCP on the loopback interface). Every rank is
// used by its own goroutine; a rank that does not arrive, or is closed
// while the others wait, makes them time out naming it.
func NewGroup(ctx context.Context, n int, o GroupOptions) ([]Comm, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: a group of %d ranks", ErrArg, n)
	}
	g := &group{n: n}
	mons := make([]*monitor, n)
	if n > 1 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("dist: group watchdog: %w", err)
		}
		wait := 30 * time.Second
		errs := make([]error, n)
		var wg sync.WaitGroup
		wg.Add(n)
		go func() {
			defer wg.Done()
			mons[0], errs[0] = serveMonitor(ctx, ln, n, 0, nil, wait)
		}()
		for r := 1; r < n; r++ {
			go func() {
				defer wg.Done()
				mons[r], _, errs[r] = joinMonitor(ctx, ln.Addr().String(), r, n, 0, wait)
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				for _, m := range mons {
					if m != nil {
						_ = m.close(false)
					}
				}
				return nil, fmt.Errorf("dist: group rank %d: %w", r, err)
			}
		}
	}
	comms := make([]Comm, n)
	for r := range comms {
		comms[r] = newComm(&groupEngine{g: g, r: r}, mons[r], o.Timeout)
	}
	return comms, nil
}

// group is the shared state of NewGroup's ranks: the collective being
// gathered.
type group struct {
	n     int
	mu    sync.Mutex
	cur   *round
	count int64 // rounds completed
}

// round is one collective as the ranks arrive at it.
type round struct {
	calls   []*coll
	arrived int
	done    chan struct{}
	err     error
}

// groupEngine is one rank of a group.
type groupEngine struct {
	g *group
	r int
}

func (e *groupEngine) rank() int               { return e.r }
func (e *groupEngine) size() int               { return e.g.n }
func (e *groupEngine) device() backend.Backend { return nil }
func (e *groupEngine) close(bool) error        { return nil }

func (e *groupEngine) run(ctx context.Context, c coll) error {
	g := e.g
	g.mu.Lock()
	if g.cur == nil {
		g.cur = &round{calls: make([]*coll, g.n), done: make(chan struct{})}
	}
	rd := g.cur
	if rd.calls[e.r] != nil {
		g.mu.Unlock()
		return fmt.Errorf("%w: rank %d entered a collective twice", ErrArg, e.r)
	}
	rd.calls[e.r] = &c
	rd.arrived++
	if rd.arrived == g.n {
		rd.err = rd.compute()
		g.cur = nil
		g.count++
		close(rd.done)
	}
	g.mu.Unlock()
	select {
	case <-rd.done:
		return rd.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// compute runs a round whose ranks have all arrived.
func (rd *round) compute() error {
	first := rd.calls[0]
	for r, c := range rd.calls {
		if c.kind != first.kind || c.op != first.op || c.root != first.root || lenOf(c.recv) != lenOf(first.recv) || lenOf(c.send) != lenOf(first.send) {
			return fmt.Errorf("%w: rank %d called %v (%d elements) where rank 0 called %v (%d elements)", ErrArg, r, c.kind, lenOf(c.recv), first.kind, lenOf(first.recv))
		}
		if c.kind != kBarrier && c.recv.dtype() == dev {
			return fmt.Errorf("%w: a group moves host memory only", ErrArg)
		}
	}
	n := len(rd.calls)
	switch first.kind {
	case kBroadcast:
		for _, c := range rd.calls {
			if c != rd.calls[first.root] {
				_ = copyBuf(nil, c.recv, rd.calls[first.root].recv)
			}
		}
	case kAllGather:
		for _, c := range rd.calls {
			m := c.send.Len()
			for q, src := range rd.calls {
				_ = copyBuf(nil, slice(c.recv, q*m, m), src.send)
			}
		}
	case kAllReduce, kReduceScatter:
		srcs := make([]Buf, n)
		for r, c := range rd.calls {
			srcs[r] = c.send
			if first.kind == kAllReduce {
				srcs[r] = c.recv
			}
		}
		total := reduceAll(srcs, first.op)
		for r, c := range rd.calls {
			if first.kind == kAllReduce {
				_ = copyBuf(nil, c.recv, total)
			} else {
				m := c.recv.Len()
				_ = copyBuf(nil, c.recv, slice(total, r*m, m))
			}
		}
	}
	return nil
}

func lenOf(b Buf) int {
	if b == nil {
		return -1
	}
	return b.Len()
}

// slice is elements [off, off+n) of a host buffer.
func slice(b Buf, off, n int) Buf {
	switch v := b.(type) {
	case Float32s:
		return v[off : off+n]
	case Float64s:
		return v[off : off+n]
	case Bytes:
		return v[off : off+n]
	}
	return b
}

// reduceAll reduces host buffers elementwise in rank order.
func reduceAll(srcs []Buf, op Op) Buf {
	switch srcs[0].(type) {
	case Float32s:
		out := slices.Clone(srcs[0].(Float32s))
		for _, s := range srcs[1:] {
			for i, v := range s.(Float32s) {
				out[i] = reduce1(out[i], v, op)
			}
		}
		return out
	default:
		out := slices.Clone(srcs[0].(Float64s))
		for _, s := range srcs[1:] {
			for i, v := range s.(Float64s) {
				out[i] = reduce1(out[i], v, op)
			}
		}
		return out
	}
}

func reduce1[T float32 | float64](a, b T, op Op) T {
	switch op {
	case Max:
		return max(a, b)
	case Min:
		return min(a, b)
	}
	return a + b
}
