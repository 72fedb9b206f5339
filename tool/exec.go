package tool

import (
	"context"
	"errors"
	"time"
)

// Executor runs one program and reports what it did. The local Sandbox and
// the SandboxFusion client implement it, so the code interpreter tool and
// code-test rewards work the same on a laptop and on a cluster.
type Executor interface {
	Execute(ctx context.Context, req ExecRequest) (ExecResult, error)
}

// ExecRequest is one program to run.
type ExecRequest struct {
	// Code is the program's source.
	Code string
	// Language is the program's language; "" means "python". The local
	// sandbox runs Python only; SandboxFusion runs many languages.
	Language string
	// Stdin is fed to the program's standard input.
	Stdin string
	// Files are written into the program's working directory before it
	// starts, keyed by relative path.
	Files map[string][]byte
	// Timeout bounds the program's wall-clock time; 0 means the executor's
	// default.
	Timeout time.Duration
	// MemoryBytes bounds the program's memory; 0 means the executor's
	// default.
	MemoryBytes int64
}

// ExecStatus says how a program ended.
type ExecStatus string

// The ways a program can end.
const (
	// StatusOK: the program exited with code 0.
	StatusOK ExecStatus = "ok"
	// StatusError: the program exited with a non-zero code (an uncaught
	// exception in Python), or failed to compile.
	StatusError ExecStatus = "error"
	// StatusTimeout: the wall-clock timeout killed the program.
	StatusTimeout ExecStatus = "timeout"
	// StatusSignaled: a signal killed the program, such as the CPU-time
	// limit's SIGXCPU or a SIGKILL.
	StatusSignaled ExecStatus = "signaled"
	// StatusOutputLimit: the program wrote more than the output cap and
	// was killed.
	StatusOutputLimit ExecStatus = "output_limit"
	// StatusSandboxError: the sandbox failed around the program (its
	// worker died, or a remote sandbox reported an internal error).
	StatusSandboxError ExecStatus = "sandbox_error"
)

// ExecResult is what a program did.
type ExecResult struct {
	Status ExecStatus
	// Stdout and Stderr are the program's output, at most the executor's
	// output cap in total, with invalid UTF-8 replaced.
	Stdout, Stderr string
	// ExitCode is the program's exit code, or -1 when a signal ended it.
	ExitCode int
	// Signal names the signal that ended the program ("SIGKILL"), if any.
	Signal string
	// OutputTruncated reports that the program wrote more than the cap.
	OutputTruncated bool
	// Duration is the program's wall-clock time as the executor measured it.
	Duration time.Duration
	// Isolation says how the program was isolated from its host.
	Isolation Isolation
	// Message is a human-readable note from the executor (why a remote
	// sandbox failed, for instance); empty when there is nothing to say.
	Message string
}

// Isolation says which isolation a sandbox gives the code it runs.
type Isolation struct {
	// Level is IsolationNamespaces or IsolationRlimits for the local
	// sandbox, "remote" for SandboxFusion.
	Level string
	// NoNetwork reports that the code has no network at all.
	NoNetwork bool
	// PrivateFS reports that the code sees a private file system: the
	// system directories read-only, a private working directory, nothing
	// of the host's data.
	PrivateFS bool
	// PIDNamespace reports that the code cannot see or signal host
	// processes.
	PIDNamespace bool
	// UID is the host user id the code runs as (-1 when unknown).
	UID int
	// Reason says why the isolation is weaker than namespaces, when it is.
	Reason string
}

// Isolation levels of the local sandbox.
const (
	// IsolationNamespaces: user, mount, PID, network, IPC and UTS
	// namespaces, a private root file system, and rlimits.
	IsolationNamespaces = "namespaces"
	// IsolationRlimits: rlimits, timeouts and process clean-up only; the
	// code shares the host's file system and network.
	IsolationRlimits = "rlimits"
)

// Errors that callers may need to tell apart.
var (
	// ErrNoPython: no python3 interpreter was found.
	ErrNoPython = errors.New("tool: no python3 interpreter found")
	// ErrClosed: the sandbox or client was closed.
	ErrClosed = errors.New("tool: executor closed")
	// ErrUnsupportedLanguage: the executor cannot run the language asked for.
	ErrUnsupportedLanguage = errors.New("tool: unsupported language")
	// ErrNamespacesUnavailable: namespaces were required but cannot be
	// created here.
	ErrNamespacesUnavailable = errors.New("tool: namespaces unavailable")
)
