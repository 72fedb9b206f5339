package dist

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentrl/agentrl/policy/backend"
)

// Errors of collectives. A *RankError wraps ErrTimeout or ErrRankGone
// (errors.Is) when a rank did not arrive or ended.
var (
	// ErrClosed: the communicator was closed.
	ErrClosed = errors.New("dist: communicator closed")
	// ErrArg: a buffer, root or operation that does not fit the call.
	ErrArg = errors.New("dist: invalid argument")
	// ErrTimeout: a collective did not complete within the timeout.
	ErrTimeout = errors.New("dist: collective timed out")
	// ErrRankGone: a rank's process ended while the others went on.
	ErrRankGone = errors.New("dist: rank gone")
	// ErrNotCompiled: the engine is not in this binary (MPI needs the
	// build tag agentrl_mpi, NCCL agentrl_cuda).
	ErrNotCompiled = errors.New("dist: engine not compiled in")
)

// Op is a reduction.
type Op int

// Reductions of AllReduce and ReduceScatter.
const (
	Sum Op = iota
	Max
	Min
)

// String names the reduction: "sum", "max", "min".
func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Buf is the memory a collective reads and writes: host slices
// (Float32s, Float64s, Bytes) or a range of a backend's buffer (Device).
// Every rank passes buffers of the same type and length.
type Buf interface {
	// Len is the number of elements.
	Len() int
	dtype() dtype
}

// dtype is the element type of a Buf.
type dtype int

const (
	f32 dtype = iota
	f64
	u8
	dev // float32 elements of a backend buffer
)

func (d dtype) String() string {
	return [...]string{"float32", "float64", "bytes", "device float32"}[d]
}

// Float32s is host float32 memory.
type Float32s []float32

// Len is the number of elements.
func (b Float32s) Len() int   { return len(b) }
func (Float32s) dtype() dtype { return f32 }

// Float64s is host float64 memory (metrics, counters exact to 2⁵³).
type Float64s []float64

// Len is the number of elements.
func (b Float64s) Len() int   { return len(b) }
func (Float64s) dtype() dtype { return f64 }

// Bytes is host memory moved as is: Broadcast and AllGather only.
type Bytes []byte

// Len is the number of bytes.
func (b Bytes) Len() int   { return len(b) }
func (Bytes) dtype() dtype { return u8 }

// Device is N float32 elements at element Off of a backend's buffer. Only
// a DeviceComm over that backend takes it (NCCL on a GPU's memory).
type Device struct {
	Buffer backend.Buffer
	Off, N int
}

// Len is the number of elements.
func (b Device) Len() int   { return b.N }
func (Device) dtype() dtype { return dev }

// Comm is a communicator over the ranks of a job: the collectives that
// data-parallel training needs. Every rank calls the same collectives in
// the same order with buffers of the same type and length. A collective
// returns when this rank's part is done: AllReduce, ReduceScatter,
// AllGather and Barrier when every rank has arrived; Broadcast when the
// root's data is here. When a rank does not arrive within the
// communicator's timeout, or ends, or ctx ends, the collective fails
// with a *RankError naming the ranks, and the communicator is broken:
// every later call returns that error (a half-done collective cannot be
// taken back). A Comm is safe for concurrent use; collectives run one at
// a time in the order they are called.
type Comm interface {
	// Rank is this process's rank in [0, Size()).
	Rank() int
	// Size is the number of ranks.
	Size() int
	// AllReduce replaces buf on every rank by the elementwise reduction
	// op of every rank's buf. Bytes cannot be reduced.
	AllReduce(ctx context.Context, buf Buf, op Op) error
	// ReduceScatter reduces every rank's send (Size()·recv.Len()
	// elements) elementwise and leaves block r of the result, elements
	// [r·n, (r+1)·n), in rank r's recv.
	ReduceScatter(ctx context.Context, send, recv Buf, op Op) error
	// AllGather concatenates every rank's send in rank order into every
	// rank's recv (Size()·send.Len() elements).
	AllGather(ctx context.Context, send, recv Buf) error
	// Broadcast copies root's buf into every rank's buf.
	Broadcast(ctx context.Context, buf Buf, root int) error
	// Barrier returns when every rank has called it.
	Barrier(ctx context.Context) error
	// Close releases the communicator (and MPI, for an MPI one). Every
	// rank closes its own after its last collective; a rank that closes
	// while others still wait in a collective makes them time out naming
	// it, and one whose process ends without closing makes them fail at
	// once.
	Close() error
}

// DeviceComm is a Comm that also runs collectives on Device buffers of
// its Backend (NCCL on a GPU's memory, in the backend's stream order).
type DeviceComm interface {
	Comm
	// Backend is the backend whose buffers Device refers to.
	Backend() backend.Backend
}

// RankError is the failure of a collective that not every rank
// completed: ranks that did not arrive within the timeout (Is
// ErrTimeout), ranks whose process ended (Is ErrRankGone), or the
// context's end (wrapped in Err).
type RankError struct {
	// Op names the collective ("all-reduce"), Seq its number on the
	// communicator (1 for the first), Rank the rank reporting.
	Op   string
	Seq  int64
	Rank int
	// Missing are the ranks that did not arrive, or that are gone; nil
	// when every rank arrived (the engine itself stalled) or when the
	// context ended.
	Missing []int
	// Gone reports that the Missing ranks ended (their connection to the
	// watchdog closed without a goodbye) rather than hung.
	Gone bool
	// NoAnswer reports that rank 0, which keeps the arrivals, did not
	// answer this rank's question about them: Missing is then [0].
	NoAnswer bool
	// Timeout is the communicator's timeout.
	Timeout time.Duration
	// Err is the cause: ErrTimeout, ErrRankGone or the context's error.
	Err error
}

// Error says which collective failed on which rank, and names the
// ranks that did not arrive or are gone.
func (e *RankError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dist: %s #%d on rank %d: ", e.Op, e.Seq, e.Rank)
	switch {
	case e.Gone:
		fmt.Fprintf(&b, "%s gone: its process ended (the connection to the watchdog closed without a goodbye)", rankList(e.Missing, "is", "are"))
	case e.NoAnswer:
		fmt.Fprintf(&b, "no completion within %v, and rank 0, which keeps the arrivals, did not answer: rank 0 is hung or unreachable", e.Timeout)
	case errors.Is(e.Err, ErrTimeout) && len(e.Missing) > 0:
		fmt.Fprintf(&b, "%s not arrive within %v", rankList(e.Missing, "did", "did"), e.Timeout)
	case errors.Is(e.Err, ErrTimeout):
		fmt.Fprintf(&b, "every rank arrived but the collective did not complete within %v (the engine stalled)", e.Timeout)
	default:
		fmt.Fprintf(&b, "%v", e.Err)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *RankError) Unwrap() error { return e.Err }

// rankList writes "rank 1 is" or "ranks 1, 3 are".
func rankList(ranks []int, one, many string) string {
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %d %s", ranks[0], one)
	}
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = fmt.Sprint(r)
	}
	return fmt.Sprintf("ranks %s %s", strings.Join(s, ", "), many)
}

// kind is a collective's kind.
type kind int

const (
	kAllReduce kind = iota
	kReduceScatter
	kAllGather
	kBroadcast
	kBarrier
)

func (k kind) String() string {
	return [...]string{"all-reduce", "reduce-scatter", "all-gather", "broadcast", "barrier"}[k]
}

// coll is one collective call.
type coll struct {
	kind       kind
	send, recv Buf // AllReduce and Broadcast: recv only, in place
	op         Op
	root       int
}

// engine is the transport under a comm: it runs one checked collective
// at a time. When ctx ends before the collective completes it returns
// ctx's error promptly and is unusable from then on (the collective is
// abandoned, and the engine may still write into its buffers).
type engine interface {
	rank() int
	size() int
	run(ctx context.Context, c coll) error
	// device is the backend whose Device buffers run takes; nil: none.
	device() backend.Backend
	// close releases the engine; abandoned says a collective was left
	// unfinished, so the engine must not wait for the other ranks.
	close(abandoned bool) error
}

// comm is a Comm over an engine: argument checks, the one-at-a-time
// order, the timeout and the watchdog that names missing ranks.
type comm struct {
	eng     engine
	mon     *monitor // nil for one rank
	timeout time.Duration

	mu        sync.Mutex
	seq       int64
	broken    error
	abandoned []coll // collectives left running: their buffers stay referenced
	closed    bool
}

var (
	_ Comm       = (*comm)(nil)
	_ DeviceComm = (*deviceComm)(nil)
)

// deviceComm is a comm whose engine runs on a backend's buffers.
type deviceComm struct{ *comm }

// Backend is the engine's backend.
func (d deviceComm) Backend() backend.Backend { return d.eng.device() }

// newComm wraps an engine; the result is a DeviceComm when the engine
// runs on a backend's buffers.
func newComm(e engine, mon *monitor, timeout time.Duration) Comm {
	c := &comm{eng: e, mon: mon, timeout: timeout}
	if e.device() != nil {
		return deviceComm{c}
	}
	return c
}

// Rank and Size are the engine's.
func (c *comm) Rank() int { return c.eng.rank() }
func (c *comm) Size() int { return c.eng.size() }

func (c *comm) AllReduce(ctx context.Context, buf Buf, op Op) error {
	if err := c.checkBuf(kAllReduce, "buf", buf); err != nil {
		return err
	}
	if err := checkOp(kAllReduce, buf, op); err != nil {
		return err
	}
	return c.do(ctx, coll{kind: kAllReduce, recv: buf, op: op})
}

func (c *comm) ReduceScatter(ctx context.Context, send, recv Buf, op Op) error {
	if err := c.checkPair(kReduceScatter, send, recv, recv.Len()*c.Size(), send.Len()); err != nil {
		return err
	}
	if err := checkOp(kReduceScatter, send, op); err != nil {
		return err
	}
	return c.do(ctx, coll{kind: kReduceScatter, send: send, recv: recv, op: op})
}

func (c *comm) AllGather(ctx context.Context, send, recv Buf) error {
	if err := c.checkPair(kAllGather, send, recv, send.Len()*c.Size(), recv.Len()); err != nil {
		return err
	}
	return c.do(ctx, coll{kind: kAllGather, send: send, recv: recv})
}

func (c *comm) Broadcast(ctx context.Context, buf Buf, root int) error {
	if err := c.checkBuf(kBroadcast, "buf", buf); err != nil {
		return err
	}
	if root < 0 || root >= c.Size() {
		return fmt.Errorf("%w: broadcast from root %d of %d ranks", ErrArg, root, c.Size())
	}
	return c.do(ctx, coll{kind: kBroadcast, recv: buf, root: root})
}

func (c *comm) Barrier(ctx context.Context) error { return c.do(ctx, coll{kind: kBarrier}) }

// checkBuf checks that b is usable by this communicator.
func (c *comm) checkBuf(k kind, name string, b Buf) error {
	if b == nil {
		return fmt.Errorf("%w: %s: %s is nil", ErrArg, k, name)
	}
	if d, ok := b.(Device); ok {
		be := c.eng.device()
		if be == nil {
			return fmt.Errorf("%w: %s: %s is a Device buffer but this communicator moves host memory only", ErrArg, k, name)
		}
		if d.Buffer == nil || d.Off < 0 || d.N < 0 || d.Off > d.Buffer.Len() || d.N > d.Buffer.Len()-d.Off {
			return fmt.Errorf("%w: %s: %s: %d elements at %d do not fit the buffer", ErrArg, k, name, d.N, d.Off)
		}
	}
	return nil
}

// checkPair checks a send/recv pair whose lengths must satisfy
// got == want, one being Size() times the other.
func (c *comm) checkPair(k kind, send, recv Buf, want, got int) error {
	if send == nil || recv == nil {
		return fmt.Errorf("%w: %s: nil buffer", ErrArg, k)
	}
	if err := c.checkBuf(k, "send", send); err != nil {
		return err
	}
	if err := c.checkBuf(k, "recv", recv); err != nil {
		return err
	}
	if send.dtype() != recv.dtype() {
		return fmt.Errorf("%w: %s: send is %v, recv %v", ErrArg, k, send.dtype(), recv.dtype())
	}
	if want != got {
		return fmt.Errorf("%w: %s over %d ranks: send has %d elements and recv %d; want recv %s", ErrArg, k, c.Size(), send.Len(), recv.Len(),
			map[kind]string{kReduceScatter: "= send/ranks", kAllGather: "= send·ranks"}[k])
	}
	return nil
}

// checkOp checks that op reduces b's elements.
func checkOp(k kind, b Buf, op Op) error {
	if op < Sum || op > Min {
		return fmt.Errorf("%w: %s: unknown reduction %v", ErrArg, k, op)
	}
	if b.dtype() == u8 {
		return fmt.Errorf("%w: %s: Bytes cannot be reduced", ErrArg, k)
	}
	return nil
}

// do runs one collective through the engine under the watchdog.
func (c *comm) do(ctx context.Context, co coll) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case c.broken != nil:
		return c.broken
	}
	if err := ctx.Err(); err != nil {
		return err // nothing started: the communicator stays usable
	}
	c.seq++
	seq, start := c.seq, time.Now()
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timer *time.Timer
	timedOut := make(chan struct{})
	if c.timeout > 0 {
		timer = time.AfterFunc(c.timeout, func() { close(timedOut); cancel() })
		defer timer.Stop()
	}
	if c.mon != nil {
		c.mon.arrive(seq)
		go func() {
			select {
			case <-c.mon.downCh():
				cancel()
			case <-opCtx.Done():
			}
		}()
	}
	err := c.eng.run(opCtx, co)
	if err == nil {
		return nil
	}
	if opCtx.Err() == nil {
		// The engine failed on its own (an MPI or NCCL error).
		c.broken = fmt.Errorf("dist: %s #%d on rank %d: %w", co.kind, seq, c.Rank(), err)
		return c.broken
	}
	c.abandoned = append(c.abandoned, co)
	re := &RankError{Op: co.kind.String(), Seq: seq, Rank: c.Rank(), Timeout: c.timeout}
	select {
	case <-timedOut:
		re.Err = ErrTimeout
	default:
		re.Err = ctx.Err()
		if errors.Is(re.Err, context.DeadlineExceeded) {
			// The caller's deadline is a timeout too: name who is late.
			re.Err = fmt.Errorf("%w: %w", ErrTimeout, re.Err)
			re.Timeout = time.Since(start).Round(time.Millisecond)
		}
	}
	if c.mon != nil {
		if gone := c.mon.goneRanks(); len(gone) > 0 {
			re.Missing, re.Gone, re.Err = gone, true, ErrRankGone
		} else if errors.Is(re.Err, ErrTimeout) {
			re.Missing, re.NoAnswer = c.mon.missing(ctx, seq, c.answerWait())
		}
	}
	if re.Err == nil {
		re.Err = err
	}
	c.broken = re
	return re
}

// answerWait bounds the wait for rank 0's answer about the arrivals.
func (c *comm) answerWait() time.Duration {
	return min(max(c.timeout, time.Second), 10*time.Second)
}

// Close releases the engine and the watchdog.
func (c *comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	abandoned := len(c.abandoned) > 0
	err := c.eng.close(abandoned)
	if c.mon != nil {
		err = errors.Join(err, c.mon.close(!abandoned))
	}
	return err
}
