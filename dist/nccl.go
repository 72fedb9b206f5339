package dist

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/policy/backend"
)

// ncclEngine runs collectives through NCCL on a CUDA backend: Device
// buffers in place, host buffers staged through device memory.
type ncclEngine struct {
	nc   *gpu.NCCL
	be   *gpu.Backend
	boot engine // the MPI that carried the id, closed last; nil without
}

func (e *ncclEngine) rank() int               { return e.nc.Rank() }
func (e *ncclEngine) size() int               { return e.nc.Size() }
func (e *ncclEngine) device() backend.Backend { return e.be }

func (e *ncclEngine) close(abandoned bool) error {
	err := e.nc.Close(abandoned)
	if e.boot != nil {
		err = errors.Join(err, e.boot.close(abandoned))
	}
	return err
}

// ncclOp is op's NCCL reduction.
func ncclOp(op Op) gpu.CollOp {
	switch op {
	case Max:
		return gpu.Max
	case Min:
		return gpu.Min
	}
	return gpu.Sum
}

// ncclKind is k's NCCL collective (a barrier is run as an all-reduce).
func ncclKind(k kind) gpu.CollKind {
	switch k {
	case kReduceScatter:
		return gpu.ReduceScatter
	case kAllGather:
		return gpu.AllGather
	case kBroadcast:
		return gpu.Broadcast
	}
	return gpu.AllReduce
}

// ncclType is the NCCL element type of a host buffer.
func ncclType(d dtype) gpu.CollType {
	switch d {
	case f64:
		return gpu.Float64
	case u8:
		return gpu.Uint8
	}
	return gpu.Float32
}

func (e *ncclEngine) run(ctx context.Context, c coll) error {
	if c.kind == kBarrier {
		// NCCL has no barrier: an all-reduce of one value is one.
		one := Float32s{0}
		c = coll{kind: kAllReduce, recv: one, op: Sum}
	}
	gc := gpu.Collective{Kind: ncclKind(c.kind), Op: ncclOp(c.op), Root: c.root}
	if d, ok := c.recv.(Device); ok {
		gc.Recv, gc.RecvOff, gc.Type, gc.Count = d.Buffer, d.Off, gpu.Float32, d.N
		if e.be.IsBF16(d.Buffer) {
			gc.Type = gpu.BFloat16 // weights held in bf16 (policy's ShardOptions.BF16Weights)
		}
		if s, ok := c.send.(Device); ok {
			gc.Send, gc.SendOff = s.Buffer, s.Off
			if c.kind == kAllGather {
				gc.Count = s.N
			}
		}
		return e.nc.Run(ctx, gc)
	}
	return e.staged(ctx, c, gc)
}

// staged runs a collective of host buffers through device scratch.
func (e *ncclEngine) staged(ctx context.Context, c coll, gc gpu.Collective) error {
	recv := words(c.recv)
	var send []float32
	if c.send != nil {
		send = words(c.send)
	}
	gc.Type = ncclType(c.recv.dtype())
	gc.Count = c.recv.Len()
	if c.kind == kAllGather {
		gc.Count = c.send.Len()
	}
	rb, err := e.be.Alloc(max(len(recv), 1))
	if err != nil {
		return fmt.Errorf("dist: NCCL staging: %w", err)
	}
	defer e.be.Free(rb)
	gc.Recv = rb
	if len(recv) > 0 && c.kind != kAllGather && c.kind != kReduceScatter {
		if err := e.be.Upload(rb, 0, recv); err != nil {
			return err
		}
	}
	if send != nil {
		sb, err := e.be.Alloc(max(len(send), 1))
		if err != nil {
			return fmt.Errorf("dist: NCCL staging: %w", err)
		}
		defer e.be.Free(sb)
		if len(send) > 0 {
			if err := e.be.Upload(sb, 0, send); err != nil {
				return err
			}
		}
		gc.Send = sb
	}
	if err := e.nc.Run(ctx, gc); err != nil {
		return err
	}
	if len(recv) == 0 {
		return nil
	}
	if err := e.be.Download(recv, rb, 0); err != nil {
		return err
	}
	unwords(c.recv, recv)
	return nil
}

// words views a host buffer as float32 words: Float32s and Float64s in
// place, Bytes copied into a padded block (unwords copies back).
func words(b Buf) []float32 {
	switch v := b.(type) {
	case Float32s:
		return v
	case Float64s:
		if len(v) == 0 {
			return nil
		}
		return unsafe.Slice((*float32)(unsafe.Pointer(&v[0])), 2*len(v))
	case Bytes:
		w := make([]float32, (len(v)+3)/4)
		if len(v) > 0 {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w)), v)
		}
		return w
	}
	return nil
}

// unwords copies the words of a staged Bytes buffer back.
func unwords(b Buf, w []float32) {
	if v, ok := b.(Bytes); ok && len(w) > 0 {
		copy(v, unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w)))
	}
}
