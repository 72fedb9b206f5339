package dist

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentrl/agentrl/policy/backend"
)

// BufferComm runs the collectives of sharded training (ZeRO: package
// policy's ShardedAdamW) on whole buffers of one backend: in place when
// its communicator is a DeviceComm over that backend (NCCL on a GPU's
// memory), staged through host memory otherwise (MPI, NewGroup, Local).
// It counts the bytes and the time of each kind of collective. It is
// safe for concurrent use; the collectives run one at a time, in the
// order they are called, as the communicator's do.
type BufferComm struct {
	comm   Comm
	be     backend.Backend
	device bool // comm moves be's buffers in place

	mu         sync.Mutex
	send, recv []float32 // host staging
	counters   Counters
}

// Counters are the collectives a BufferComm ran since the last
// TakeCounters: the bytes of the send buffers of the reduce-scatters (4
// per float32 element: the gradient before its reduction), of the
// receive buffers of the all-gathers (the weights assembled: 2 bytes an
// element in bf16 buffers), and the seconds in each.
type Counters struct {
	ReduceScatterBytes, AllGatherBytes     int64
	ReduceScatterSeconds, AllGatherSeconds float64
}

// Buffers returns c's collectives over whole buffers of be.
func Buffers(c Comm, be backend.Backend) *BufferComm {
	dc, ok := c.(DeviceComm)
	return &BufferComm{comm: c, be: be, device: ok && dc.Backend() == be}
}

// Rank is the communicator's rank.
func (b *BufferComm) Rank() int { return b.comm.Rank() }

// Size is the communicator's number of ranks.
func (b *BufferComm) Size() int { return b.comm.Size() }

// ReduceScatter sums send, Size()·recv.Len() elements, over the ranks
// and leaves block Rank() of the sum, elements [Rank()·n, (Rank()+1)·n)
// with n = recv.Len(), in recv.
func (b *BufferComm) ReduceScatter(ctx context.Context, send, recv backend.Buffer) error {
	if err := b.check("reduce-scatter", send, recv, recv, send); err != nil {
		return err
	}
	start := time.Now()
	err := b.run(ctx, send, recv, false, func(s, r Buf) error { return b.comm.ReduceScatter(ctx, s, r, Sum) })
	b.count(func(c *Counters) {
		c.ReduceScatterBytes += 4 * int64(send.Len())
		c.ReduceScatterSeconds += time.Since(start).Seconds()
	})
	return err
}

// AllGather concatenates every rank's send in rank order into recv
// (Size()·send.Len() elements).
func (b *BufferComm) AllGather(ctx context.Context, send, recv backend.Buffer) error {
	if err := b.check("all-gather", send, recv, send, recv); err != nil {
		return err
	}
	start := time.Now()
	err := b.run(ctx, send, recv, true, func(s, r Buf) error { return b.comm.AllGather(ctx, s, r) })
	b.count(func(c *Counters) {
		c.AllGatherBytes += b.elemBytes(recv) * int64(recv.Len())
		c.AllGatherSeconds += time.Since(start).Seconds()
	})
	return err
}

// AllReduceSum sums v over the ranks, in place (host float64 values:
// a squared gradient norm).
func (b *BufferComm) AllReduceSum(ctx context.Context, v []float64) error {
	if len(v) == 0 {
		return nil
	}
	return b.comm.AllReduce(ctx, Float64s(v), Sum)
}

// TakeCounters returns the counters and resets them.
func (b *BufferComm) TakeCounters() Counters {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.counters
	b.counters = Counters{}
	return c
}

// elemBytes is the bytes of one element of buf: 2 in a bf16 buffer
// (backend.BF16Weights), else 4.
func (b *BufferComm) elemBytes(buf backend.Buffer) int64 {
	if hw, ok := b.be.(backend.BF16Weights); ok && hw.IsBF16(buf) {
		return 2
	}
	return 4
}

func (b *BufferComm) count(f func(*Counters)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.counters)
}

// check refuses nil buffers and lengths that do not fit: small must
// hold Size() times fewer elements than large.
func (b *BufferComm) check(op string, send, recv, small, large backend.Buffer) error {
	if send == nil || recv == nil {
		return fmt.Errorf("%w: %s: nil buffer", ErrArg, op)
	}
	if small.Len()*b.Size() != large.Len() {
		return fmt.Errorf("%w: %s over %d ranks: send has %d elements and recv %d", ErrArg, op, b.Size(), send.Len(), recv.Len())
	}
	return nil
}

// run calls coll with send and recv: as Device buffers of the backend,
// or through host copies (send downloaded first, recv uploaded after).
func (b *BufferComm) run(ctx context.Context, send, recv backend.Buffer, gather bool, coll func(s, r Buf) error) error {
	if b.device {
		return coll(Device{Buffer: send, N: send.Len()}, Device{Buffer: recv, N: recv.Len()})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// One staging pair: the host copies and the collective run under the
	// lock, so concurrent callers take turns (a communicator runs one
	// collective at a time anyway).
	b.mu.Lock()
	defer b.mu.Unlock()
	if cap(b.send) < send.Len() {
		b.send = make([]float32, send.Len())
	}
	if cap(b.recv) < recv.Len() {
		b.recv = make([]float32, recv.Len())
	}
	s, r := b.send[:send.Len()], b.recv[:recv.Len()]
	if len(s) > 0 {
		if err := b.be.Download(s, send, 0); err != nil {
			return fmt.Errorf("dist: staging a %s: %w", map[bool]string{false: "reduce-scatter", true: "all-gather"}[gather], err)
		}
	}
	if err := coll(Float32s(s), Float32s(r)); err != nil {
		return err
	}
	if len(r) == 0 {
		return nil
	}
	return b.be.Upload(recv, 0, r)
}
