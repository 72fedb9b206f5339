package dist

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/policy/backend"
)

// checkBuffers runs BufferComm's collectives on backend buffers of rank
// r of n, against results derived by hand:
//
//	ReduceScatter of send[i] = r·10 + i over 3n floats: rank r gets
//	    Σ_q (10q + i) = 10·n(n−1)/2 + n·i for i in [3r, 3r+3)
//	AllGather of [r, −r]: [0, 0, 1, −1, …, n−1, −(n−1)]
//	AllReduceSum of [r+1]: n(n+1)/2
func checkBuffers(ctx context.Context, t *testing.T, b *BufferComm, be backend.Backend) error {
	r, n := b.Rank(), b.Size()
	send := make([]float32, 3*n)
	for i := range send {
		send[i] = float32(10*r + i)
	}
	sb, err := be.Alloc(3 * n)
	require.NoError(t, err)
	require.NoError(t, be.Upload(sb, 0, send))
	rb, err := be.Alloc(3)
	require.NoError(t, err)
	if err := b.ReduceScatter(ctx, sb, rb); err != nil {
		return err
	}
	got := make([]float32, 3)
	require.NoError(t, be.Download(got, rb, 0))
	want := make([]float32, 3)
	for j := range want {
		i := 3*r + j
		want[j] = float32(10*n*(n-1)/2 + n*i)
	}
	assert.Equal(t, want, got, "rank %d reduce-scatter", r)

	gs, err := be.Alloc(2)
	require.NoError(t, err)
	require.NoError(t, be.Upload(gs, 0, []float32{float32(r), -float32(r)}))
	gr, err := be.Alloc(2 * n)
	require.NoError(t, err)
	if err := b.AllGather(ctx, gs, gr); err != nil {
		return err
	}
	all := make([]float32, 2*n)
	require.NoError(t, be.Download(all, gr, 0))
	for q := range n {
		assert.Equal(t, []float32{float32(q), -float32(q)}, all[2*q:2*q+2], "rank %d all-gather block %d", r, q)
	}
	v := []float64{float64(r + 1)}
	if err := b.AllReduceSum(ctx, v); err != nil {
		return err
	}
	assert.Equal(t, float64(n*(n+1)/2), v[0])
	c := b.TakeCounters()
	assert.Equal(t, int64(4*3*n), c.ReduceScatterBytes, "the reduce-scatter's send")
	assert.Equal(t, int64(4*2*n), c.AllGatherBytes, "the all-gather's recv")
	assert.Equal(t, Counters{}, b.TakeCounters(), "taken")
	return nil
}

func TestBufferCommGroup(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(string(rune('0'+n))+" ranks", func(t *testing.T) {
			comms := newGroup(t, n, 10*time.Second)
			ctx := context.Background()
			errs := onRanks(comms, func(r int, c Comm) error {
				be := cpu.New(cpu.WithWorkers(1))
				b := Buffers(c, be)
				assert.False(t, b.device, "a group moves host memory: staged")
				return checkBuffers(ctx, t, b, be)
			})
			for r, err := range errs {
				assert.NoError(t, err, "rank %d", r)
			}
		})
	}
}

// Local over a backend is a DeviceComm: the buffers move in place.
func TestBufferCommLocalDevice(t *testing.T) {
	be := cpu.New(cpu.WithWorkers(1))
	b := Buffers(Local(be), be)
	assert.True(t, b.device)
	require.NoError(t, checkBuffers(context.Background(), t, b, be))
	// Over another backend's buffers it stages through the host.
	other := cpu.New(cpu.WithWorkers(1))
	assert.False(t, Buffers(Local(be), other).device)
}

func TestBufferCommArguments(t *testing.T) {
	be := cpu.New(cpu.WithWorkers(1))
	comms := newGroup(t, 2, time.Second)
	b := Buffers(comms[0], be)
	ctx := context.Background()
	three, err := be.Alloc(3)
	require.NoError(t, err)
	four, err := be.Alloc(4)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"reduce-scatter lengths", func() error { return b.ReduceScatter(ctx, three, three) }, "send has 3 elements and recv 3"},
		{"all-gather lengths", func() error { return b.AllGather(ctx, three, four) }, "send has 3 elements and recv 4"},
		{"nil send", func() error { return b.ReduceScatter(ctx, nil, three) }, "nil buffer"},
		{"nil recv", func() error { return b.AllGather(ctx, three, nil) }, "nil buffer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, ErrArg)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A refused call starts nothing: the ranks still meet afterwards.
	errs := onRanks(comms, func(_ int, c Comm) error { return c.Barrier(ctx) })
	for _, err := range errs {
		assert.NoError(t, err)
	}
}
