package gpu

import (
	"runtime"
	"sync"
)

// worker runs functions one at a time on a single locked OS thread. The
// CUDA driver keeps the current context per thread; running every call of
// a Backend on its worker makes one context current once, and serializes
// the Backend's calls, which is what makes it safe for concurrent use.
type worker struct {
	mu     sync.Mutex // guards closed and sends on jobs
	closed bool
	jobs   chan func()
	done   chan struct{}
}

func newWorker() *worker {
	w := &worker{jobs: make(chan func()), done: make(chan struct{})}
	go func() {
		// The thread stays locked until the goroutine exits, and is then
		// destroyed with it: no other goroutine ever runs on it.
		runtime.LockOSThread()
		defer close(w.done)
		for f := range w.jobs {
			f()
		}
	}()
	return w
}

// do runs f on the worker's thread and returns its error, or ErrClosed once
// the worker has stopped.
func (w *worker) do(f func() error) error {
	errc := make(chan error, 1)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.jobs <- func() { errc <- f() }
	w.mu.Unlock()
	return <-errc
}

// stop runs last (when not nil) as the final job and stops the worker;
// later calls of do return ErrClosed. stop is idempotent.
func (w *worker) stop(last func() error) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	var err error
	if last != nil {
		errc := make(chan error, 1)
		w.jobs <- func() { errc <- last() }
		err = <-errc
	}
	w.closed = true
	close(w.jobs)
	w.mu.Unlock()
	<-w.done
	return err
}
