//go:build !linux

package tool

import (
	"context"
	"errors"
	"fmt"
)

// Sandbox is the local sandbox; it needs Linux (namespaces, prctl, pidfd).
type Sandbox struct{}

// NewSandbox reports that the local sandbox is unavailable on this system;
// use SandboxFusion or the calculator instead.
func NewSandbox(ctx context.Context, cfg SandboxConfig) (*Sandbox, error) {
	return nil, fmt.Errorf("%w: the local sandbox needs Linux", errors.ErrUnsupported)
}

// Execute always fails: see NewSandbox.
func (s *Sandbox) Execute(ctx context.Context, req ExecRequest) (ExecResult, error) {
	return ExecResult{}, errors.ErrUnsupported
}

// Isolation reports no isolation.
func (s *Sandbox) Isolation() Isolation { return Isolation{UID: -1} }

// Python reports no interpreter.
func (s *Sandbox) Python() string { return "" }

// Close does nothing.
func (s *Sandbox) Close() error { return nil }

// hostMemoryBytes returns 0: the default call budget does not know this
// system's memory (the local sandbox does not run here anyway).
func hostMemoryBytes() int64 { return 0 }
