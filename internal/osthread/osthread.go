// Package osthread runs functions one at a time on one locked OS thread,
// for C libraries whose state is per thread: the CUDA driver's current
// context (package gpu) and MPI initialised with MPI_THREAD_FUNNELED
// (package dist).
package osthread

import (
	"runtime"
	"sync"
)

// Worker runs the functions given to Do one at a time, in order, on a
// single OS thread that no other goroutine ever runs on. It is safe for
// concurrent use.
type Worker struct {
	stopped error // what Do returns after Stop

	jobs chan func()
	done chan struct{}

	mu     sync.Mutex // guards closed and sends on jobs
	closed bool
}

// New starts a Worker whose Do returns stopped once it has been stopped.
func New(stopped error) *Worker {
	w := &Worker{stopped: stopped, jobs: make(chan func()), done: make(chan struct{})}
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

// Do runs f on the worker's thread and returns its error, or the error
// given to New once the worker has stopped.
func (w *Worker) Do(f func() error) error {
	errc := make(chan error, 1)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return w.stopped
	}
	w.jobs <- func() { errc <- f() }
	w.mu.Unlock()
	return <-errc
}

// Stop runs last (when not nil) as the final job, stops the worker and
// returns last's error; it returns once the thread has ended. Stop is
// idempotent: later calls return nil.
func (w *Worker) Stop(last func() error) error {
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
