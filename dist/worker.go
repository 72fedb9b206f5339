package dist

import "runtime"

// worker runs functions one at a time on one locked OS thread: MPI is
// initialised with MPI_THREAD_FUNNELED, so every call of an MPI engine
// must come from the thread that initialised it.
type worker struct {
	jobs chan func()
	done chan struct{}
}

func newWorker() *worker {
	w := &worker{jobs: make(chan func()), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // kept until the goroutine exits, which ends the thread
		defer close(w.done)
		for f := range w.jobs {
			f()
		}
	}()
	return w
}

// do runs f on the worker's thread and returns its error.
func (w *worker) do(f func() error) error {
	errc := make(chan error, 1)
	w.jobs <- func() { errc <- f() }
	return <-errc
}

// stop ends the worker after the jobs given so far.
func (w *worker) stop() {
	close(w.jobs)
	<-w.done
}
