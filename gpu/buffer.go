package gpu

import (
	"fmt"
	"sync/atomic"

	"github.com/agentrl/agentrl/policy/backend"
)

// buffer is the GPU Buffer: n float32 elements at a device address, and
// the Backend that allocated it. A zero-length buffer has no device memory.
type buffer struct {
	owner *Backend
	n     int
	ptr   devPtr
	freed atomic.Bool
	gen   uint64 // advanced by every write (weightCache); worker thread only
}

// Len is the number of float32 elements.
func (b *buffer) Len() int { return b.n }

// resolve returns b as a buffer of owner, or an ErrBuffer error when b is a
// buffer of another backend or has been freed. A nil b gives nil and no
// error: whether nil is allowed is the shape check's business.
func resolve(owner *Backend, name string, b backend.Buffer) (*buffer, error) {
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
	out := make([]*buffer, len(bufs))
	for i, b := range bufs {
		gb, err := resolve(owner, fmt.Sprintf("%s argument %d", op, i+1), b)
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
