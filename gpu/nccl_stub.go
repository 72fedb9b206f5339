//go:build !agentrl_cuda || !cgo

package gpu

import "context"

// NewNCCLID returns ErrNotCompiled: this binary has no CUDA support.
func NewNCCLID() (NCCLID, error) { return NCCLID{}, ErrNotCompiled }

// NCCL is one rank's NCCL communicator; in this build it cannot be made.
type NCCL struct{}

// NewNCCL returns ErrNotCompiled.
func (*Backend) NewNCCL(context.Context, NCCLID, int, int) (*NCCL, error) {
	return nil, ErrNotCompiled
}

// Rank returns 0.
func (*NCCL) Rank() int { return 0 }

// Size returns 0.
func (*NCCL) Size() int { return 0 }

// Version returns 0.
func (*NCCL) Version() int { return 0 }

// Library returns "".
func (*NCCL) Library() string { return "" }

// Run returns ErrNotCompiled.
func (*NCCL) Run(context.Context, Collective) error { return ErrNotCompiled }

// Close returns nil.
func (*NCCL) Close(bool) error { return nil }
