package gpu

import (
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkerRunsOnOneThread: the CUDA context is current per OS thread, so
// every job of a worker must run on the same thread, whichever goroutine
// submits it.
func TestWorkerRunsOnOneThread(t *testing.T) {
	w := newWorker()
	var first int
	require.NoError(t, w.do(func() error { first = syscall.Gettid(); return nil }))
	var wg sync.WaitGroup
	tids := make([]int, 64)
	for i := range tids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.do(func() error { tids[i] = syscall.Gettid(); return nil })
		}()
	}
	wg.Wait()
	for i, tid := range tids {
		require.Equal(t, first, tid, "job %d", i)
	}
	require.NoError(t, w.stop(nil))
	require.ErrorIs(t, w.do(func() error { return nil }), ErrClosed)
	require.NoError(t, w.stop(nil), "stop is idempotent")
}

func TestWorkerStopRunsLastJob(t *testing.T) {
	w := newWorker()
	ran := false
	require.ErrorIs(t, w.stop(func() error { ran = true; return ErrCUDA }), ErrCUDA)
	require.True(t, ran)
}
