//go:build agentrl_mpi && cgo

package dist

// The MPI engine: a cgo shim over the MPI implementation's own mpi.h
// and libmpi, found through pkg-config's mpi-c (Debian's libopenmpi-dev
// or libmpich-dev). Only standard MPI-3 calls are used. Each collective
// is started non-blocking and tested in a loop in C until it completes
// or Go sets the cancel flag (timeout, a rank gone, ctx); a cancelled
// collective is left pending (MPI cannot take it back), the engine is
// not used again, and its buffers stay referenced by the comm.

/*
#cgo pkg-config: mpi-c
#include <mpi.h>
#include <stdlib.h>
#include <time.h>
#include <sched.h>

// mpi_init initialises MPI (unless the program already did) with
// MPI_THREAD_FUNNELED (every call comes from one locked thread) and
// returns a duplicate of MPI_COMM_WORLD whose errors are returned, not
// fatal. -2: MPI was already finalised.
static int mpi_init(MPI_Comm* comm, int* rank, int* size, int* owned) {
	int fin = 0, ini = 0, provided = 0;
	MPI_Finalized(&fin);
	if (fin) return -2;
	MPI_Initialized(&ini);
	*owned = 0;
	if (!ini) {
		// Open MPI's handlers of SIGSEGV, SIGBUS, SIGFPE and SIGABRT would
		// replace Go's (nil dereferences are Go panics); a value set by the
		// user is kept.
		setenv("OMPI_MCA_opal_signal", "", 0);
		int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
		if (rc != MPI_SUCCESS) return rc;
		*owned = 1;
	}
	int rc = MPI_Comm_dup(MPI_COMM_WORLD, comm);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
	MPI_Comm_rank(*comm, rank);
	MPI_Comm_size(*comm, size);
	return 0;
}

static void mpi_error_string(int code, char* buf, int n) {
	int len = 0;
	if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) len = 0;
	if (len >= n) len = n - 1;
	buf[len] = 0;
}

// mpi_wait tests req until it completes (0), an error (its code), or
// *cancel is set (-1, req left pending). It spins for the first
// millisecond, then sleeps between tests, doubling up to 1 ms, so that
// a rank waiting for a slow one leaves the cores to the work.
static int mpi_wait(MPI_Request* req, volatile int* cancel) {
	struct timespec t0, now, pause = {0, 0};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int done = 0;
		int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS) return rc;
		if (done) return 0;
		if (__atomic_load_n(cancel, __ATOMIC_RELAXED)) return -1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long us = (now.tv_sec - t0.tv_sec) * 1000000L + (now.tv_nsec - t0.tv_nsec) / 1000L;
		if (us < 1000) continue;
		pause.tv_nsec = pause.tv_nsec ? pause.tv_nsec * 2 : 2000;
		if (pause.tv_nsec > 1000000L) pause.tv_nsec = 1000000L;
		nanosleep(&pause, NULL);
	}
}

// mpi_run starts one collective (kind: 0 all-reduce in place, 1
// reduce-scatter-block, 2 all-gather, 3 broadcast, 4 barrier) of count
// elements of dt (0 float, 1 double, 2 byte) with reduction op (0 sum,
// 1 max, 2 min) and waits for it.
static int mpi_run(MPI_Comm comm, int kind, void* send, void* recv, int count, int dt, int op, int root, volatile int* cancel) {
	MPI_Datatype t = dt == 0 ? MPI_FLOAT : dt == 1 ? MPI_DOUBLE : MPI_BYTE;
	MPI_Op o = op == 0 ? MPI_SUM : op == 1 ? MPI_MAX : MPI_MIN;
	MPI_Request req;
	int rc;
	switch (kind) {
	case 0: rc = MPI_Iallreduce(MPI_IN_PLACE, recv, count, t, o, comm, &req); break;
	case 1: rc = MPI_Ireduce_scatter_block(send, recv, count, t, o, comm, &req); break;
	case 2: rc = MPI_Iallgather(send, count, t, recv, count, t, comm, &req); break;
	case 3: rc = MPI_Ibcast(recv, count, t, root, comm, &req); break;
	default: rc = MPI_Ibarrier(comm, &req);
	}
	if (rc != MPI_SUCCESS) return rc;
	return mpi_wait(&req, cancel);
}

static int mpi_finish(MPI_Comm* comm, int owned) {
	int rc = MPI_Comm_free(comm);
	if (owned) {
		int fin = 0;
		MPI_Finalized(&fin);
		if (!fin) {
			int rc2 = MPI_Finalize();
			if (rc == MPI_SUCCESS) rc = rc2;
		}
	}
	return rc;
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/agentrl/agentrl/internal/osthread"
	"github.com/agentrl/agentrl/policy/backend"
)

// mpiCompiled says that this binary has the MPI engine.
const mpiCompiled = true

// MPIError is a failed MPI call: its error code and MPI's description.
type MPIError struct {
	Code int
	Msg  string
}

// Error gives the code and MPI's description.
func (e *MPIError) Error() string { return fmt.Sprintf("dist: MPI error %d: %s", e.Code, e.Msg) }

func mpiCheck(code C.int) error {
	if code == 0 {
		return nil
	}
	buf := make([]byte, 512)
	C.mpi_error_string(code, (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	return &MPIError{Code: int(code), Msg: C.GoString((*C.char)(unsafe.Pointer(&buf[0])))}
}

// mpiEngine is the MPI engine; every MPI call runs on its worker's
// locked thread.
type mpiEngine struct {
	w      *osthread.Worker
	comm   C.MPI_Comm
	r, n   int
	owned  C.int  // this engine initialised MPI and finalises it
	cancel *C.int // C memory: the flag the wait loop polls
	dead   bool   // a collective was abandoned: MPI is not called again
	// pins hold the buffers of an abandoned collective pinned for good:
	// MPI may still write into them, and an unreachable Pinner that
	// still pins would panic.
	pins []*runtime.Pinner
}

// openMPI initialises MPI (MPI_Init_thread, unless the program did) and
// duplicates its world communicator. MPI can be initialised once per
// process: after the engine that initialised it is closed, openMPI
// fails.
func openMPI(ctx context.Context) (engine, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := &mpiEngine{w: osthread.New(ErrClosed)}
	e.cancel = (*C.int)(C.calloc(1, C.sizeof_int))
	var rank, size C.int
	err := e.w.Do(func() error {
		rc := C.mpi_init(&e.comm, &rank, &size, &e.owned)
		if rc == -2 {
			return errors.New("dist: MPI was finalised already: a process initialises MPI once (open one MPI communicator per process)")
		}
		return mpiCheck(rc)
	})
	if err != nil {
		_ = e.w.Stop(nil)
		C.free(unsafe.Pointer(e.cancel))
		return nil, fmt.Errorf("dist: MPI_Init: %w", err)
	}
	e.r, e.n = int(rank), int(size)
	return e, nil
}

func (e *mpiEngine) rank() int               { return e.r }
func (e *mpiEngine) size() int               { return e.n }
func (e *mpiEngine) device() backend.Backend { return nil }

// run performs c on the worker thread, in pieces of at most MaxInt32
// elements where MPI's int counts require.
func (e *mpiEngine) run(ctx context.Context, c coll) error {
	if e.dead {
		return errors.New("dist: MPI engine unusable after an abandoned collective")
	}
	flag := (*int32)(unsafe.Pointer(e.cancel))
	atomic.StoreInt32(flag, 0)
	stop := context.AfterFunc(ctx, func() { atomic.StoreInt32(flag, 1) })
	defer stop()
	dt, op := C.int(0), C.int(c.op)
	var elem int
	switch c.recv.(type) {
	case nil:
	case Float32s:
		dt, elem = 0, 4
	case Float64s:
		dt, elem = 1, 8
	case Bytes:
		dt, elem = 2, 1
	default:
		return fmt.Errorf("%w: MPI moves host memory only", ErrArg)
	}
	pin := new(runtime.Pinner)
	defer func() {
		if e.dead {
			e.pins = append(e.pins, pin) // an abandoned collective's buffers stay pinned
		} else {
			pin.Unpin()
		}
	}()
	ptr := func(b Buf) unsafe.Pointer {
		if b == nil || b.Len() == 0 {
			return nil
		}
		var p unsafe.Pointer
		switch v := b.(type) {
		case Float32s:
			p = unsafe.Pointer(&v[0])
		case Float64s:
			p = unsafe.Pointer(&v[0])
		case Bytes:
			p = unsafe.Pointer(&v[0])
		}
		pin.Pin(p)
		return p
	}
	call := func(kind int, send, recv unsafe.Pointer, count int) error {
		return e.w.Do(func() error {
			rc := C.mpi_run(e.comm, C.int(kind), send, recv, C.int(count), dt, op, C.int(c.root), e.cancel)
			if rc == -1 {
				e.dead = true
				return ctx.Err()
			}
			return mpiCheck(rc)
		})
	}
	recv := ptr(c.recv)
	switch c.kind {
	case kBarrier:
		return call(4, nil, nil, 0)
	case kAllReduce, kBroadcast:
		kind := map[kind]int{kAllReduce: 0, kBroadcast: 3}[c.kind]
		n := c.recv.Len()
		for off := 0; off < n || n == 0; off += math.MaxInt32 {
			cnt := min(n-off, math.MaxInt32)
			if err := call(kind, nil, unsafe.Add(recv, off*elem), cnt); err != nil {
				return err
			}
			if n == 0 {
				break
			}
		}
		return nil
	}
	per := c.recv.Len() // reduce-scatter: the block each rank gets
	kindN := 1
	if c.kind == kAllGather {
		per, kindN = c.send.Len(), 2
	}
	if per > math.MaxInt32 {
		return fmt.Errorf("%w: %v of %d elements per rank exceeds MPI's int count", ErrArg, c.kind, per)
	}
	return call(kindN, ptr(c.send), recv, per)
}

// close frees the communicator and finalises MPI when this engine
// initialised it, unless a collective was abandoned: then MPI is left
// as it is (MPI_Finalize would wait for it), and the launcher ends the
// job when the process exits.
func (e *mpiEngine) close(abandoned bool) error {
	var err error
	if !abandoned && !e.dead {
		err = e.w.Do(func() error { return mpiCheck(C.mpi_finish(&e.comm, e.owned)) })
	}
	_ = e.w.Stop(nil)
	if !e.dead {
		C.free(unsafe.Pointer(e.cancel))
	}
	return err
}
