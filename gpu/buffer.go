package gpu

import (
	"fmt"
	"sync/atomic"

	"github.com/agentrl/agentrl/policy/backend"
)

// buffer is the GPU Buffer: n float32 elements at a device address, and
// the Backend that allocated it. A zero-length buffer has no device memory.
// A half buffer (AllocBF16) stores its n elements as bfloat16, 2 bytes
// each: only the calls that read weights accept it (resolveW).
type buffer struct {
	owner *Backend
	n     int
	ptr   devPtr
	freed atomic.Bool
	half  bool   // bfloat16 storage; set at allocation, never changed
	gen   uint64 // advanced by every write (weightCache); worker thread only
}

// Len is the number of elements.
func (b *buffer) Len() int { return b.n }

// elemBytes is the bytes of one element: 2 in a half buffer, else 4.
func (b *buffer) elemBytes() int {
	if b.half {
		return 2
	}
	return 4
}

// resolve returns b as a float32 buffer of owner, or an ErrBuffer error
// when b is a buffer of another backend, has been freed, or is a bf16
// buffer (which only the weight arguments of the kernels, resolveW, and
// the memory calls, resolveAny, accept). A nil b gives nil and no error:
// whether nil is allowed is the shape check's business.
func resolve(owner *Backend, name string, b backend.Buffer) (*buffer, error) {
	gb, err := resolveAny(owner, name, b)
	if err == nil && gb != nil && gb.half {
		return nil, fmt.Errorf("%w: %s is a bfloat16 buffer, which only a kernel's weight argument accepts", backend.ErrBuffer, name)
	}
	return gb, err
}

// resolveAny is resolve accepting bf16 buffers as well.
func resolveAny(owner *Backend, name string, b backend.Buffer) (*buffer, error) {
	if b == nil {
		return nil, nil
	}
	gb, ok := b.(*buffer)
	if !ok || gb == nil || gb.owner != owner {
		return nil, fmt.Errorf("%w: %s was not allocated by this backend", backend.ErrBuffer, name)
	}
	if gb.freed.Load() {
		return nil, fmt.Errorf("%w: %s has been freed", backend.ErrBuffer, name)
	}
	return gb, nil
}

// resolveAll resolves the buffers of one call; op names it in errors.
func resolveAll(owner *Backend, op string, bufs ...backend.Buffer) ([]*buffer, error) {
	return resolveW(owner, op, 0, bufs...)
}

// resolveW is resolveAll accepting bf16 buffers at the arguments whose
// bit is set in weights (bit i: argument i, from 0): the weights a
// kernel reads.
func resolveW(owner *Backend, op string, weights uint, bufs ...backend.Buffer) ([]*buffer, error) {
	out := make([]*buffer, len(bufs))
	for i, b := range bufs {
		name := fmt.Sprintf("%s argument %d", op, i+1)
		var gb *buffer
		var err error
		if weights&(1<<uint(i)) != 0 {
			gb, err = resolveAny(owner, name, b)
		} else {
			gb, err = resolve(owner, name, b)
		}
		if err != nil {
			return nil, err
		}
		out[i] = gb
	}
	return out, nil
}

// rangeErr checks that [off, off+n) lies inside a buffer of length elements.
func rangeErr(op string, off, n, length int) error {
	if off < 0 || n < 0 || off > length || n > length-off {
		return fmt.Errorf("%w: %s of %d elements at offset %d in a buffer of %d", backend.ErrShape, op, n, off, length)
	}
	return nil
}
