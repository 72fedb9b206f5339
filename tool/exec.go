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
	// StatusMemoryLimit: the program's processes together went over the
	// call's memory budget (SandboxConfig.CallMemoryBytes) and were killed.
	StatusMemoryLimit ExecStatus = "memory_limit"
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
	// sandbox failed, or which budget stopped the program, for instance);
	// empty when there is nothing to say.
	Message string
	// Usage is what the program's processes used together of the call's
	// budget, and which budget stopped them; zero when the executor does
	// not measure it (SandboxFusion).
	Usage CallUsage
}

// CallUsage is what one call's processes used together, as the local
// sandbox's budget mechanism measured it (see CallBudget), and which of
// the call's budgets they ran into.
type CallUsage struct {
	// PeakMemoryBytes is the most memory the call's processes held at
	// once: the cgroup's own peak (memory.max_usage_in_bytes, or
	// memory.peak where the kernel resets it per call) or, for the
	// watchdog, its highest sample (see BudgetWatchdog). Sampled values
	// miss what lived less than one poll; 0 when nothing was measured.
	PeakMemoryBytes int64
	// CPUTime is the CPU time of all the call's processes together.
	CPUTime time.Duration
	// PeakProcesses is the most processes (threads included) the call
	// was seen to have at once, sampled at each poll.
	PeakProcesses int
	// KilledForMemory reports that the call went over its memory budget
	// and was killed; its Status is then StatusMemoryLimit.
	KilledForMemory bool
	// KilledForCPU reports that the call's processes together used more
	// CPU time than its budget and were killed (Status StatusSignaled).
	KilledForCPU bool
	// ProcessLimit reports that the call reached its process budget: a
	// fork was refused (cgroups' pids controller), or the watchdog found
	// more processes than the budget and killed the call.
	ProcessLimit bool
	// KilledForProcesses reports the latter: the call was killed for
	// having too many processes (Status StatusSignaled).
	KilledForProcesses bool
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
	// Budget says how each call is bounded across all of its processes;
	// zero for executors without a per-call budget (SandboxFusion).
	Budget CallBudget
}

// CallBudget says how the local sandbox bounds one call across all of its
// processes, and with which limits.
type CallBudget struct {
	// Mechanism is the BudgetMechanism in force, by its String: "cgroup2",
	// "cgroup1" or "watchdog".
	Mechanism string
	// MemoryBytes bounds the memory of the call's processes together;
	// 0: no memory budget.
	MemoryBytes int64
	// Processes bounds the processes (threads included) the call may
	// have at once.
	Processes int
	// CPUTime bounds the CPU time of the call's processes together.
	CPUTime time.Duration
	// Reason says why a stronger mechanism is not in force, and which
	// limits fall back to the watchdog's counting, when any do.
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
	// ErrBudgetUnavailable: SandboxConfig.BudgetMechanism asked for a
	// mechanism (a cgroup version) that cannot be used here.
	ErrBudgetUnavailable = errors.New("tool: call budget mechanism unavailable")
)
