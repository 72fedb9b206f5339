package dist

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
)

// onRanks runs f on every rank of comms in its own goroutine and returns
// the ranks' errors.
func onRanks(comms []Comm, f func(r int, c Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r, c)
		}()
	}
	wg.Wait()
	return errs
}

func newGroup(t *testing.T, n int, timeout time.Duration) []Comm {
	t.Helper()
	comms, err := NewGroup(context.Background(), n, GroupOptions{Timeout: timeout})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range comms {
			_ = c.Close()
		}
	})
	return comms
}

// Each collective's expected result is derived by hand from the ranks'
// inputs, which depend on the rank r of n:
//
//	AllReduce sum of [r+1, 10(r+1)]:  [n(n+1)/2, 10·n(n+1)/2]
//	AllReduce max / min of [r, −r]:   [n−1, 0] / [0, −(n−1)]
//	ReduceScatter sum of send[i] = r+i over 2n elements: rank r gets
//	    elements 2r and 2r+1 of Σ_q (q+i) = n·i + n(n−1)/2
//	AllGather of the byte 'a'+r:       "ab…" (n letters)
//	Broadcast from rank n−1 of [r]:    [n−1]
func TestGroupCollectives(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(string(rune('0'+n))+" ranks", func(t *testing.T) {
			comms := newGroup(t, n, 10*time.Second)
			ctx := context.Background()
			errs := onRanks(comms, func(r int, c Comm) error { return checkCollectives(ctx, t, c) })
			for r, err := range errs {
				assert.NoError(t, err, "rank %d", r)
			}
		})
	}
}

// checkCollectives runs every collective on c, with the inputs and
// expected results of TestGroupCollectives' table.
func checkCollectives(ctx context.Context, t *testing.T, c Comm) error {
	r, n := c.Rank(), c.Size()
	sum := Float32s{float32(r + 1), float32(10 * (r + 1))}
	if err := c.AllReduce(ctx, sum, Sum); err != nil {
		return err
	}
	tri := float32(n * (n + 1) / 2)
	assert.Equal(t, Float32s{tri, 10 * tri}, sum, "rank %d sum", r)
	mx, mn := Float64s{float64(r), -float64(r)}, Float64s{float64(r), -float64(r)}
	if err := c.AllReduce(ctx, mx, Max); err != nil {
		return err
	}
	if err := c.AllReduce(ctx, mn, Min); err != nil {
		return err
	}
	assert.Equal(t, Float64s{float64(n - 1), 0}, mx, "rank %d max", r)
	assert.Equal(t, Float64s{0, -float64(n - 1)}, mn, "rank %d min", r)
	send := make(Float32s, 2*n)
	for i := range send {
		send[i] = float32(r + i)
	}
	recv := make(Float32s, 2)
	if err := c.ReduceScatter(ctx, send, recv, Sum); err != nil {
		return err
	}
	base := float32(n * (n - 1) / 2)
	assert.Equal(t, Float32s{float32(n*2*r) + base, float32(n*(2*r+1)) + base}, recv, "rank %d reduce-scatter", r)
	letters := make(Bytes, n)
	if err := c.AllGather(ctx, Bytes{byte('a' + r)}, letters); err != nil {
		return err
	}
	assert.Equal(t, "abc"[:n], string(letters), "rank %d all-gather", r)
	b := Float32s{float32(r)}
	if err := c.Broadcast(ctx, b, n-1); err != nil {
		return err
	}
	assert.Equal(t, Float32s{float32(n - 1)}, b, "rank %d broadcast", r)
	return c.Barrier(ctx)
}

func TestCollectiveArguments(t *testing.T) {
	comms := newGroup(t, 2, time.Second)
	c := comms[0]
	ctx := context.Background()
	be := cpu.New()
	buf, err := be.Alloc(4)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"reduce-scatter lengths", func() error { return c.ReduceScatter(ctx, make(Float32s, 3), make(Float32s, 2), Sum) }, "send has 3 elements and recv 2"},
		{"all-gather lengths", func() error { return c.AllGather(ctx, make(Float32s, 2), make(Float32s, 3)) }, "send has 2 elements and recv 3"},
		{"types differ", func() error { return c.AllGather(ctx, make(Float32s, 1), make(Float64s, 2)) }, "send is float32, recv float64"},
		{"root out of range", func() error { return c.Broadcast(ctx, Float32s{1}, 2) }, "root 2 of 2"},
		{"bytes reduced", func() error { return c.AllReduce(ctx, Bytes{1}, Sum) }, "Bytes cannot be reduced"},
		{"unknown op", func() error { return c.AllReduce(ctx, Float32s{1}, Op(7)) }, "unknown reduction Op(7)"},
		{"nil buffer", func() error { return c.AllReduce(ctx, nil, Sum) }, "buf is nil"},
		{"device buffer on a host communicator", func() error { return c.AllReduce(ctx, Device{Buffer: buf, N: 4}, Sum) }, "host memory only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, ErrArg)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A bad call starts nothing: the ranks still meet afterwards.
	errs := onRanks(comms, func(_ int, c Comm) error { return c.Barrier(ctx) })
	assert.NoError(t, errors.Join(errs...))
}

func TestLocal(t *testing.T) {
	ctx := context.Background()
	c := Local(nil)
	assert.Equal(t, 0, c.Rank())
	assert.Equal(t, 1, c.Size())
	v := Float32s{1, 2}
	require.NoError(t, c.AllReduce(ctx, v, Sum))
	assert.Equal(t, Float32s{1, 2}, v, "one rank's sum is its own data")
	recv := make(Float64s, 2)
	require.NoError(t, c.ReduceScatter(ctx, Float64s{3, 4}, recv, Max))
	assert.Equal(t, Float64s{3, 4}, recv)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, c.Barrier(ctx), ErrClosed)

	// With a backend it takes that backend's buffers.
	be := cpu.New()
	dc, ok := Local(be).(DeviceComm)
	require.True(t, ok)
	src, err := be.Alloc(3)
	require.NoError(t, err)
	dst, err := be.Alloc(3)
	require.NoError(t, err)
	require.NoError(t, be.Upload(src, 0, []float32{7, 8, 9}))
	require.NoError(t, dc.AllGather(ctx, Device{Buffer: src, N: 3}, Device{Buffer: dst, N: 3}))
	got := make([]float32, 3)
	require.NoError(t, be.Download(got, dst, 0))
	assert.Equal(t, []float32{7, 8, 9}, got)
}

// A rank that does not arrive makes the others fail at the timeout,
// naming it: rank 0 from its table of arrivals, rank 1 from rank 0's
// answer.
func TestWatchdogNamesHungRank(t *testing.T) {
	for _, hung := range []int{2, 0} {
		t.Run("rank "+string(rune('0'+hung))+" hangs", func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			comms := newGroup(t, 3, timeout)
			start := time.Now()
			errs := onRanks(comms, func(r int, c Comm) error {
				if r == hung {
					return nil // never arrives
				}
				return c.AllReduce(context.Background(), Float32s{1}, Sum)
			})
			elapsed := time.Since(start)
			for r, err := range errs {
				if r == hung {
					continue
				}
				var re *RankError
				require.ErrorAs(t, err, &re, "rank %d", r)
				assert.ErrorIs(t, err, ErrTimeout)
				assert.Equal(t, []int{hung}, re.Missing, "rank %d", r)
				assert.Equal(t, "dist: all-reduce #1 on rank "+string(rune('0'+r))+": rank "+string(rune('0'+hung))+" did not arrive within 300ms", err.Error())
				// The communicator is broken from then on.
				assert.Same(t, err, comms[r].Barrier(context.Background()))
			}
			assert.Less(t, elapsed, timeout+3*time.Second, "fails at the timeout, not later")
		})
	}
}

// A rank whose process ends (its watchdog connection closes without a
// goodbye) makes the others fail at once, long before the timeout.
func TestWatchdogNamesGoneRank(t *testing.T) {
	for _, dead := range []int{2, 0} {
		t.Run("rank "+string(rune('0'+dead))+" dies", func(t *testing.T) {
			comms := newGroup(t, 3, time.Minute)
			start := time.Now()
			errs := onRanks(comms, func(r int, c Comm) error {
				if r == dead {
					time.Sleep(100 * time.Millisecond)
					return c.(*comm).mon.close(false) // as the kernel closes a dead process's socket
				}
				return c.AllReduce(context.Background(), Float32s{1}, Sum)
			})
			for r, err := range errs {
				if r == dead {
					continue
				}
				var re *RankError
				require.ErrorAs(t, err, &re, "rank %d", r)
				assert.ErrorIs(t, err, ErrRankGone)
				assert.True(t, re.Gone)
				assert.Equal(t, []int{dead}, re.Missing)
				assert.Contains(t, err.Error(), "rank "+string(rune('0'+dead))+" is gone: its process ended")
			}
			assert.Less(t, time.Since(start), 10*time.Second, "fails at once, not at the one-minute timeout")
		})
	}
}

// A clean Close is not a death: the ranks that close say goodbye.
func TestCloseIsNotDeath(t *testing.T) {
	comms := newGroup(t, 2, 300*time.Millisecond)
	require.NoError(t, comms[1].Close())
	time.Sleep(50 * time.Millisecond)
	err := comms[0].AllReduce(context.Background(), Float32s{1}, Sum)
	var re *RankError
	require.ErrorAs(t, err, &re)
	assert.False(t, re.Gone)
	assert.ErrorIs(t, err, ErrTimeout)
	assert.Equal(t, []int{1}, re.Missing)
}

func TestCollectiveContext(t *testing.T) {
	comms := newGroup(t, 2, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A context that ended before the call starts nothing.
	assert.ErrorIs(t, comms[0].Barrier(ctx), context.Canceled)
	require.NoError(t, errors.Join(onRanks(comms, func(_ int, c Comm) error { return c.Barrier(context.Background()) })...))

	// One that ends during the call abandons it.
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := comms[0].AllReduce(ctx, Float32s{1}, Sum)
	var re *RankError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, ErrTimeout, "a deadline is a timeout: the late ranks are named")
	assert.Equal(t, []int{1}, re.Missing)
}

func TestRendezvous(t *testing.T) {
	ctx := context.Background()
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		return ln
	}
	t.Run("the blob reaches every rank", func(t *testing.T) {
		ln := listen()
		var wg sync.WaitGroup
		got := make([][]byte, 3)
		mons := make([]*monitor, 3)
		errs := make([]error, 3)
		for r := 1; r < 3; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mons[r], got[r], errs[r] = joinMonitor(ctx, ln.Addr().String(), r, 3, 9, 5*time.Second)
			}()
		}
		mons[0], errs[0] = serveMonitor(ctx, ln, 3, 9, []byte("nccl id"), 5*time.Second)
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		assert.Equal(t, "nccl id", string(got[1]))
		assert.Equal(t, "nccl id", string(got[2]))
		for _, m := range mons {
			require.NoError(t, m.close(true))
		}
	})
	t.Run("a rank that never joins is named", func(t *testing.T) {
		ln := listen()
		go func() { _, _, _ = joinMonitor(ctx, ln.Addr().String(), 1, 3, 0, 2*time.Second) }()
		start := time.Now()
		_, err := serveMonitor(ctx, ln, 3, 0, nil, 300*time.Millisecond)
		require.Error(t, err)
		assert.Equal(t, "dist: rendezvous: rank 2 did not join rank 0 within 300ms", err.Error())
		assert.Less(t, time.Since(start), 2*time.Second)
	})
	t.Run("world sizes disagree", func(t *testing.T) {
		ln := listen()
		joined := make(chan error, 1)
		go func() {
			_, _, err := joinMonitor(ctx, ln.Addr().String(), 1, 4, 0, 2*time.Second)
			joined <- err
		}()
		_, err := serveMonitor(ctx, ln, 2, 0, nil, 2*time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "rank 1 says the world has 4 ranks, rank 0 says 2")
		jerr := <-joined
		require.ErrorIs(t, jerr, errRejected)
		assert.Contains(t, jerr.Error(), "rank 1 says the world has 4 ranks")
	})
	t.Run("rank 0 unreachable", func(t *testing.T) {
		ln := listen()
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		_, _, err := joinMonitor(ctx, addr, 1, 2, 0, 300*time.Millisecond)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "rank 1 could not reach rank 0 at "+addr+" within 300ms")
	})
}

func TestOpenAlone(t *testing.T) {
	c, err := Open(context.Background(), Options{Env: &Env{Launcher: Alone, Size: 1}})
	require.NoError(t, err)
	assert.Equal(t, 1, c.Size())
	require.NoError(t, c.Close())
}

func TestOpenErrors(t *testing.T) {
	two := &Env{Launcher: Variables, Rank: 0, Size: 2}
	_, err := Open(context.Background(), Options{Env: two, Engine: EngineNCCL, Backend: cpu.New()})
	assert.ErrorIs(t, err, ErrArg, "NCCL needs a CUDA backend")
	_, err = Open(context.Background(), Options{Env: two, Engine: "gloo"})
	assert.ErrorIs(t, err, ErrArg)
	_, err = Open(context.Background(), Options{Env: two, Timeout: -time.Second})
	assert.ErrorIs(t, err, ErrArg)
	if !mpiCompiled {
		_, err = Open(context.Background(), Options{Env: two})
		assert.ErrorIs(t, err, ErrNotCompiled, "a CPU job needs MPI")
	}
	t.Setenv(TimeoutVar, "soon")
	_, err = Open(context.Background(), Options{Env: two})
	assert.ErrorIs(t, err, ErrEnv)
}
