package osthread

import (
	"errors"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

var errStopped = errors.New("stopped")

// TestWorkerRunsOnOneThread: a per-thread C library state (a CUDA
// context, MPI under MPI_THREAD_FUNNELED) is only seen if every job runs
// on the same thread, whichever goroutine submits it.
func TestWorkerRunsOnOneThread(t *testing.T) {
	w := New(errStopped)
	var first int
	require.NoError(t, w.Do(func() error { first = syscall.Gettid(); return nil }))
	var wg sync.WaitGroup
	tids := make([]int, 64)
	for i := range tids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.Do(func() error { tids[i] = syscall.Gettid(); return nil })
		}()
	}
	wg.Wait()
	for i, tid := range tids {
		require.Equal(t, first, tid, "job %d", i)
	}
	require.NoError(t, w.Stop(nil))
	require.ErrorIs(t, w.Do(func() error { return nil }), errStopped)
	require.NoError(t, w.Stop(nil), "Stop is idempotent")
}

// TestWorkerStopRunsLastJob: Stop runs its function on the thread and
// returns its error.
func TestWorkerStopRunsLastJob(t *testing.T) {
	w := New(errStopped)
	ran := false
	want := errors.New("teardown failed")
	require.ErrorIs(t, w.Stop(func() error { ran = true; return want }), want)
	require.True(t, ran)
}
