//go:build agentrl_cuda && cgo

package gpu

// NCCL, opened with dlopen at run time as cuBLAS is. No NCCL header is
// needed to build: the few types and calls used are declared here, as
// NVIDIA's nccl.h (src/nccl.h.in) declares them — ncclUniqueId is 128
// bytes, ncclResult_t, ncclDataType_t and ncclRedOp_t are C enums (int),
// cudaStream_t is the driver's CUstream — and every function is looked up
// by name with dlsym. Only entry points of NCCL 2.4 and later are used.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>

typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;   // enum ncclResult_t: ncclSuccess = 0 … ncclInProgress = 7
typedef int ncclDataType_t; // enum: ncclUint8 = 1, ncclFloat32 = 7, ncclFloat64 = 8
typedef int ncclRedOp_t;    // enum: ncclSum = 0, ncclMax = 2, ncclMin = 3

typedef struct {
	void* lib;
	void* cuda;
	ncclResult_t (*getVersion)(int*);
	ncclResult_t (*getUniqueId)(ncclUniqueId*);
	ncclResult_t (*commInitRank)(ncclComm_t*, int, ncclUniqueId, int);
	ncclResult_t (*commDestroy)(ncclComm_t);
	ncclResult_t (*commAbort)(ncclComm_t);
	ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t*);
	const char* (*getErrorString)(ncclResult_t);
	ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream);
	ncclResult_t (*reduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream);
	ncclResult_t (*allGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, CUstream);
	ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, CUstream);
	CUresult (*streamQuery)(CUstream);
} nccl_t;

#define NCCL_SYM(lib, field, name) if ((n->field = (void*)dlsym(lib, name)) == NULL) { *missing = name; return 0; }

// nccl_open dlopens NCCL and resolves its functions, and cuStreamQuery
// from the driver; 0 with *missing NULL when the library is absent, a
// symbol name when it lacks one.
static int nccl_open(nccl_t* n, const char* libname, const char** missing) {
	*missing = NULL;
	n->lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
	if (n->lib == NULL) return 0;
	NCCL_SYM(n->lib, getVersion, "ncclGetVersion")
	NCCL_SYM(n->lib, getUniqueId, "ncclGetUniqueId")
	NCCL_SYM(n->lib, commInitRank, "ncclCommInitRank")
	NCCL_SYM(n->lib, commDestroy, "ncclCommDestroy")
	NCCL_SYM(n->lib, commAbort, "ncclCommAbort")
	NCCL_SYM(n->lib, commGetAsyncError, "ncclCommGetAsyncError")
	NCCL_SYM(n->lib, getErrorString, "ncclGetErrorString")
	NCCL_SYM(n->lib, allReduce, "ncclAllReduce")
	NCCL_SYM(n->lib, reduceScatter, "ncclReduceScatter")
	NCCL_SYM(n->lib, allGather, "ncclAllGather")
	NCCL_SYM(n->lib, broadcast, "ncclBroadcast")
	n->cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (n->cuda == NULL) { *missing = "libcuda.so.1"; return 0; }
	NCCL_SYM(n->cuda, streamQuery, "cuStreamQuery")
	return 1;
}

static const char* nccl_error(nccl_t* n, int r) { return n->getErrorString(r); }
static int nccl_version(nccl_t* n, int* v) { return n->getVersion(v); }
static int nccl_unique_id(nccl_t* n, void* out) {
	ncclUniqueId id;
	int r = n->getUniqueId(&id);
	memcpy(out, id.internal, sizeof id.internal);
	return r;
}
static int nccl_init_rank(nccl_t* n, ncclComm_t* c, int nranks, const void* idbytes, int rank) {
	ncclUniqueId id;
	memcpy(id.internal, idbytes, sizeof id.internal);
	return n->commInitRank(c, nranks, id, rank);
}
static int nccl_destroy(nccl_t* n, ncclComm_t c) { return n->commDestroy(c); }
static int nccl_abort(nccl_t* n, ncclComm_t c) { return n->commAbort(c); }
static int nccl_async_error(nccl_t* n, ncclComm_t c, int* e) {
	ncclResult_t r = 0;
	int rc = n->commGetAsyncError(c, &r);
	*e = r;
	return rc;
}
// nccl_run enqueues one collective (kind: 0 all-reduce, 1 reduce-scatter,
// 2 all-gather, 3 broadcast) on stream s.
static int nccl_run(nccl_t* n, int kind, unsigned long long send, unsigned long long recv, size_t count, int dt, int op, int root,
	ncclComm_t c, CUstream s) {
	const void* sp = (const void*)send;
	void* rp = (void*)recv;
	switch (kind) {
	case 0: return n->allReduce(sp, rp, count, dt, op, c, s);
	case 1: return n->reduceScatter(sp, rp, count, dt, op, c, s);
	case 2: return n->allGather(sp, rp, count, dt, c, s);
	default: return n->broadcast(sp, rp, count, dt, root, c, s);
	}
}
// nccl_query: 0 when the stream's work is done, 1 when not yet, else the
// driver's error.
static int nccl_query(nccl_t* n, CUstream s) {
	CUresult r = n->streamQuery(s);
	if (r == CUDA_SUCCESS) return 0;
	if (r == CUDA_ERROR_NOT_READY) return 1;
	return (int)r;
}
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/agentrl/agentrl/policy/backend"
)

// ncclLib is an opened NCCL.
type ncclLib struct {
	n    *C.nccl_t
	name string
}

// openNCCL dlopens the first loadable NCCL.
func openNCCL() (*ncclLib, error) {
	var tried []string
	for _, name := range NCCLLibraries() {
		n := (*C.nccl_t)(C.calloc(1, C.sizeof_nccl_t))
		cname := C.CString(name)
		var missing *C.char
		ok := C.nccl_open(n, cname, &missing)
		C.free(unsafe.Pointer(cname))
		if ok == 1 {
			return &ncclLib{n: n, name: name}, nil
		}
		C.free(unsafe.Pointer(n))
		if missing != nil {
			return nil, fmt.Errorf("%w: %s lacks %s", ErrNoNCCL, name, C.GoString(missing))
		}
		tried = append(tried, name)
	}
	return nil, fmt.Errorf("%w: could not load any of %v (install NCCL, or put the lib folder of pip's nvidia-nccl wheel on LD_LIBRARY_PATH)", ErrNoNCCL, tried)
}

// check turns an ncclResult_t into nil or an *NCCLError.
func (l *ncclLib) check(call string, r C.int) error {
	if r == 0 {
		return nil
	}
	return &NCCLError{Call: call, Code: int(r), Msg: C.GoString(C.nccl_error(l.n, r))}
}

// NewNCCLID makes a unique id (ncclGetUniqueId) for a new communicator;
// rank 0 calls it and sends the id to the others. It needs NCCL but no
// GPU.
func NewNCCLID() (NCCLID, error) {
	var id NCCLID
	l, err := openNCCL()
	if err != nil {
		return id, err
	}
	err = l.check("ncclGetUniqueId", C.nccl_unique_id(l.n, unsafe.Pointer(&id[0])))
	return id, err
}

// NCCL is one rank's NCCL communicator (ncclComm_t) over this backend's
// GPU; its collectives run on the backend's stream, after the kernels
// already queued there. Close it before the Backend.
type NCCL struct {
	be      *Backend
	lib     *ncclLib
	comm    C.ncclComm_t
	rank    int
	size    int
	version int

	mu      sync.Mutex
	aborted bool
}

// NewNCCL joins communicator id as rank of size ranks
// (ncclCommInitRank, on the backend's thread, so with its device and
// context current). It returns when every rank has joined; NCCL's own
// bootstrap cannot be interrupted, so ctx is checked before and after.
func (be *Backend) NewNCCL(ctx context.Context, id NCCLID, rank, size int) (*NCCL, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("%w: NCCL rank %d of %d", backend.ErrArg, rank, size)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l, err := openNCCL()
	if err != nil {
		return nil, err
	}
	c := &NCCL{be: be, lib: l, rank: rank, size: size}
	var v C.int
	if err := l.check("ncclGetVersion", C.nccl_version(l.n, &v)); err != nil {
		return nil, err
	}
	c.version = int(v)
	err = be.run(func() error {
		return l.check("ncclCommInitRank", C.nccl_init_rank(l.n, &c.comm, C.int(size), unsafe.Pointer(&id[0]), C.int(rank)))
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		_ = c.Close(true)
		return nil, err
	}
	return c, nil
}

// Rank and Size are the communicator's.
func (c *NCCL) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *NCCL) Size() int { return c.size }

// Version is NCCL's version code (ncclGetVersion: 22304 for 2.23.4).
func (c *NCCL) Version() int { return c.version }

// Library is the name NCCL was loaded under.
func (c *NCCL) Library() string { return c.lib.name }

// Run enqueues one collective on the backend's stream and waits for it,
// polling the stream and NCCL's asynchronous error. When ctx ends first,
// or NCCL reports an error, it aborts the communicator (ncclCommAbort),
// which makes the collective return on this rank, and returns the
// reason; the communicator cannot be used again.
func (c *NCCL) Run(ctx context.Context, coll Collective) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aborted {
		return fmt.Errorf("%w: the NCCL communicator was aborted", ErrClosed)
	}
	if err := coll.check(c.size); err != nil {
		return err
	}
	res := resolve
	if coll.Type == BFloat16 {
		res = resolveAny
	}
	recv, err := res(c.be, "recv", coll.Recv)
	if err != nil {
		return err
	}
	send := recv
	sendOff := coll.RecvOff
	if coll.Send != nil {
		if send, err = res(c.be, "send", coll.Send); err != nil {
			return err
		}
		sendOff = coll.SendOff
	}
	if coll.Type == BFloat16 && (!recv.half || !send.half) {
		return fmt.Errorf("%w: %v of BFloat16 elements needs bf16 buffers (AllocBF16)", backend.ErrBuffer, coll.Kind)
	}
	err = c.be.runW([]*buffer{recv}, func() error {
		return c.lib.check(coll.Kind.String(), C.nccl_run(c.lib.n, C.int(coll.Kind),
			C.ulonglong(send.ptr+devPtr(send.elemBytes()*sendOff)), C.ulonglong(recv.ptr+devPtr(recv.elemBytes()*coll.RecvOff)),
			C.size_t(coll.Count), C.int(coll.Type), C.int(coll.Op), C.int(coll.Root), c.comm, c.be.stream))
	})
	if err != nil {
		return err
	}
	return c.wait(ctx, coll.Kind.String())
}

// wait polls the stream until the collective is done, NCCL reports an
// asynchronous error, or ctx ends (both abort the communicator).
func (c *NCCL) wait(ctx context.Context, call string) error {
	for delay := time.Microsecond; ; delay = min(2*delay, 200*time.Microsecond) {
		var q, async C.int
		err := c.be.run(func() error {
			q = C.nccl_query(c.lib.n, c.be.stream)
			return c.lib.check("ncclCommGetAsyncError", C.nccl_async_error(c.lib.n, c.comm, &async))
		})
		switch {
		case err != nil:
			return err
		case q == 0:
			return nil
		case q != 1:
			c.abort()
			return c.be.dr.check("cuStreamQuery", q)
		case async != 0 && async != 7: // 7: ncclInProgress
			c.abort()
			return c.lib.check(call+" (asynchronous)", async)
		}
		select {
		case <-ctx.Done():
			c.abort()
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// abort aborts the communicator, which ends its kernels in flight.
func (c *NCCL) abort() {
	if !c.aborted {
		c.aborted = true
		_ = c.lib.check("ncclCommAbort", C.nccl_abort(c.lib.n, c.comm))
	}
}

// Close destroys the communicator (ncclCommDestroy), or aborts it
// (ncclCommAbort) when abort is set or a collective was abandoned:
// destroying waits for the other ranks' part of the collectives in
// flight, aborting does not.
func (c *NCCL) Close(abort bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.comm == nil {
		return nil
	}
	var err error
	if abort || c.aborted {
		if !c.aborted {
			err = c.lib.check("ncclCommAbort", C.nccl_abort(c.lib.n, c.comm))
		}
	} else {
		err = c.be.run(func() error { return c.lib.check("ncclCommDestroy", C.nccl_destroy(c.lib.n, c.comm)) })
	}
	c.comm, c.aborted = nil, true
	return err
}
