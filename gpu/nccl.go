package gpu

import (
	"errors"
	"fmt"

	"github.com/agentrl/agentrl/policy/backend"
)

// Errors of NCCL.
var (
	// ErrNoNCCL: libnccl.so.2 could not be loaded, or lacks a function.
	ErrNoNCCL = errors.New("gpu: NCCL not available")
	// ErrNCCL: an NCCL call failed; see *NCCLError.
	ErrNCCL = errors.New("gpu: NCCL call failed")
)

// NCCLError is a failed NCCL call: the function, its ncclResult_t and
// NCCL's description of it.
type NCCLError struct {
	Call string
	Code int
	Msg  string
}

// Error gives the call, its ncclResult_t and NCCL's description.
func (e *NCCLError) Error() string {
	return fmt.Sprintf("gpu: %s failed: ncclResult_t %d (%s)", e.Call, e.Code, e.Msg)
}

// Unwrap makes errors.Is(err, ErrNCCL) true.
func (e *NCCLError) Unwrap() error { return ErrNCCL }

// NCCLID is NCCL's unique id (ncclUniqueId, NCCL_UNIQUE_ID_BYTES = 128
// opaque bytes): rank 0 makes it (NewNCCLID) and every rank passes the
// same one to Backend.NewNCCL. It holds rank 0's bootstrap address, so
// it travels through the launcher's rendezvous (package dist).
type NCCLID [128]byte

// NCCLLibraries returns the names NewNCCLID and Backend.NewNCCL try, in
// order, with the dynamic loader: NCCL is opened at run time like cuBLAS,
// so a binary built with the agentrl_cuda tag starts without it. Install
// NCCL (NVIDIA's libnccl2 package, or pip's nvidia-nccl-cu12 wheel's lib
// folder on LD_LIBRARY_PATH) so that one of them loads.
func NCCLLibraries() []string { return []string{"libnccl.so.2", "libnccl.so"} }

// CollKind is an NCCL collective.
type CollKind int

// Collectives of Collective.Kind.
const (
	AllReduce CollKind = iota
	ReduceScatter
	AllGather
	Broadcast
)

// String is the NCCL function's name.
func (k CollKind) String() string {
	switch k {
	case AllReduce:
		return "ncclAllReduce"
	case ReduceScatter:
		return "ncclReduceScatter"
	case AllGather:
		return "ncclAllGather"
	case Broadcast:
		return "ncclBroadcast"
	}
	return fmt.Sprintf("CollKind(%d)", int(k))
}

// CollType is the element type of a collective: the buffers are float32
// backend buffers, and a Float64 or Uint8 collective reads their memory
// as that type (host data staged through them); a BFloat16 collective
// moves bf16 buffers (Backend.AllocBF16), element for element.
type CollType int

// Element types, with nccl.h's ncclDataType_t values.
const (
	Uint8   CollType = 1 // ncclUint8
	Float32 CollType = 7 // ncclFloat32
	Float64 CollType = 8 // ncclFloat64
	// BFloat16 (ncclBfloat16, NCCL ≥ 2.10): Send and Recv are bf16
	// buffers, and offsets and spans are in their elements.
	BFloat16 CollType = 9
)

// size is the bytes of one element.
func (t CollType) size() int {
	switch t {
	case Uint8:
		return 1
	case BFloat16:
		return 2
	case Float64:
		return 8
	}
	return 4
}

// CollOp is a reduction, with nccl.h's ncclRedOp_t values.
type CollOp int

// Reductions.
const (
	Sum CollOp = 0 // ncclSum
	Max CollOp = 2 // ncclMax
	Min CollOp = 3 // ncclMin
)

// Collective is one NCCL call on this backend's buffers, enqueued on
// its stream after the work already there.
type Collective struct {
	Kind CollKind
	// Send and Recv are buffers of the backend; Send nil means in place
	// (Recv holds the input). Offsets are in float32 elements.
	Send, Recv       backend.Buffer
	SendOff, RecvOff int
	// Count is NCCL's count, in elements of Type: the whole buffer for
	// AllReduce and Broadcast, the per-rank recvcount of
	// ReduceScatter, the per-rank sendcount of AllGather.
	Count int
	Type  CollType
	Op    CollOp
	Root  int
}

// spans returns the elements of Send and Recv the collective touches,
// in float32 words (BFloat16: in bf16 elements), for nranks ranks.
func (c Collective) spans(nranks int) (send, recv int) {
	if c.Type == BFloat16 {
		switch c.Kind {
		case ReduceScatter:
			return c.Count * nranks, c.Count
		case AllGather:
			return c.Count, c.Count * nranks
		}
		return c.Count, c.Count
	}
	bytes := c.Count * c.Type.size()
	words := (bytes + 3) / 4
	switch c.Kind {
	case ReduceScatter:
		return (bytes*nranks + 3) / 4, words
	case AllGather:
		return words, (bytes*nranks + 3) / 4
	}
	return words, words
}

// check validates c for a communicator of nranks ranks.
func (c Collective) check(nranks int) error {
	switch {
	case c.Kind < AllReduce || c.Kind > Broadcast:
		return fmt.Errorf("%w: unknown collective %v", backend.ErrArg, c.Kind)
	case c.Type != Uint8 && c.Type != Float32 && c.Type != Float64 && c.Type != BFloat16:
		return fmt.Errorf("%w: %v: element type %d", backend.ErrArg, c.Kind, int(c.Type))
	case c.Op != Sum && c.Op != Max && c.Op != Min:
		return fmt.Errorf("%w: %v: reduction %d", backend.ErrArg, c.Kind, int(c.Op))
	case c.Count < 0 || c.SendOff < 0 || c.RecvOff < 0:
		return fmt.Errorf("%w: %v: negative count or offset", backend.ErrArg, c.Kind)
	case c.Recv == nil:
		return fmt.Errorf("%w: %v: nil Recv", backend.ErrArg, c.Kind)
	case c.Kind == Broadcast && (c.Root < 0 || c.Root >= nranks):
		return fmt.Errorf("%w: %v: root %d of %d ranks", backend.ErrArg, c.Kind, c.Root, nranks)
	}
	s, r := c.spans(nranks)
	if c.Send != nil && c.SendOff+s > c.Send.Len() {
		return fmt.Errorf("%w: %v: Send holds %d elements, the call reads %d at %d", backend.ErrShape, c.Kind, c.Send.Len(), s, c.SendOff)
	}
	if c.Send == nil && (c.Kind == ReduceScatter || c.Kind == AllGather) {
		return fmt.Errorf("%w: %v needs Send", backend.ErrArg, c.Kind)
	}
	if c.RecvOff+r > c.Recv.Len() {
		return fmt.Errorf("%w: %v: Recv holds %d elements, the call writes %d at %d", backend.ErrShape, c.Kind, c.Recv.Len(), r, c.RecvOff)
	}
	return nil
}
