package cpu

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassLen(t *testing.T) {
	// Eight steps per power of two: for n of bit length b the step is
	// 2^(b−4), so 17 (b = 5) rounds up to 9·2 = 18; 16385 (b = 15) steps
	// by 2048 and rounds up to 9·2048 = 18432, 20000 to 10·2048 = 20480;
	// 32767 rounds up to 16·2048 = 32768, whose own step (b = 16) is
	// 4096; 1000001 (b = 20) to 16·65536 = 1048576.
	for _, c := range []struct{ n, want int }{
		{1, 1}, {7, 7}, {9, 9}, {17, 18}, {16384, 16384}, {16385, 18432},
		{20000, 20480}, {32767, 32768}, {32768, 32768}, {1000001, 1048576},
	} {
		got := classLen(c.n)
		assert.Equal(t, c.want, got, "classLen(%d)", c.n)
		assert.Equal(t, got, classLen(got), "a class length is its own class")
		assert.LessOrEqual(t, float64(got), 1.125*float64(c.n)+1, "at most 12.5%% above n")
	}
}

func TestPoolReusesZeroedArrays(t *testing.T) {
	be := New(WithWorkers(1))
	a, err := be.Alloc(20000)
	require.NoError(t, err)
	v, err := be.view("a", a)
	require.NoError(t, err)
	for i := range v {
		v[i] = 1
	}
	first := &v[0]
	require.NoError(t, be.Free(a))
	assert.Error(t, be.Free(a), "a second free is an error")

	// 19000 is in 20000's class (20480): the same array, zeroed.
	b, err := be.Alloc(19000)
	require.NoError(t, err)
	w, err := be.view("b", b)
	require.NoError(t, err)
	assert.Len(t, w, 19000)
	assert.Same(t, first, &w[0])
	for i, x := range w {
		if x != 0 {
			t.Fatalf("element %d of a reused buffer is %v, want 0", i, x)
		}
	}
	assert.Equal(t, int64(1), be.mem.reused)

	// Another class is a fresh array.
	c, err := be.Alloc(40000)
	require.NoError(t, err)
	u, err := be.view("c", c)
	require.NoError(t, err)
	assert.NotSame(t, first, &u[0])
	assert.Equal(t, int64(1), be.mem.reused)

	// Small buffers are not pooled.
	d, err := be.Alloc(100)
	require.NoError(t, err)
	require.NoError(t, be.Free(d))
	assert.Equal(t, int64(0), be.mem.held)
}

func TestPoolHoldsAtMostThePeak(t *testing.T) {
	// One buffer of class 20480 live at a time: the peak is 20480 floats,
	// so after it is freed the pool keeps it, and a second array freed
	// beside it (class 40960, never live together with the first) is
	// dropped: holding both would exceed the peak.
	var p pool
	a := p.get(20000)
	p.put(a)
	assert.Equal(t, int64(20480), p.held)
	b := p.get(40000) // live 40960, peak 40960
	p.put(b)          // held 20480 + 40960 > 40960: dropped
	assert.Equal(t, int64(20480), p.held)
	assert.Equal(t, int64(0), p.live)
	// Foreign arrays are ignored.
	p.put(make([]float32, 30000))
	assert.Equal(t, int64(20480), p.held)
}

// TestPoolServesShorterRequests: a request takes the smallest held array
// of a class up to twice its own when its class holds none, and gives it
// back to that array's class.
func TestPoolServesShorterRequests(t *testing.T) {
	var p pool
	big := p.get(40000) // class 40960
	p.put(big)
	a := p.get(25000) // class 26624: served by the 40960 array (≤ 2·26624)
	assert.Len(t, a, 25000)
	assert.Equal(t, 40960, cap(a))
	assert.Equal(t, int64(1), p.reused)
	p.put(a)
	assert.Equal(t, int64(40960), p.held)
	b := p.get(16384) // class 16384: 40960 > 2·16384, a fresh array
	assert.Equal(t, 16384, cap(b))
	assert.Equal(t, int64(1), p.reused)
}
