package tool

import (
	"fmt"
	"path"
	"runtime"
	"time"
)

// IsolationMode chooses how hard the local sandbox isolates code.
type IsolationMode int

const (
	// IsolationAuto uses namespaces when the kernel allows them and falls
	// back to rlimits only otherwise; ExecResult.Isolation says which.
	IsolationAuto IsolationMode = iota
	// IsolationRequireNamespaces fails NewSandbox when namespaces are not
	// available.
	IsolationRequireNamespaces
	// IsolationRlimitsOnly never uses namespaces.
	IsolationRlimitsOnly
)

// BudgetMechanism chooses how the local sandbox enforces each call's
// budget (memory, processes, CPU time) across all of the call's processes.
type BudgetMechanism int

const (
	// BudgetAuto uses the first mechanism that works here, trying them
	// for real at NewSandbox: cgroup v2, then cgroup v1, then the
	// watchdog. Isolation.Budget says which is in force and why.
	BudgetAuto BudgetMechanism = iota
	// BudgetCgroup2 puts each worker's call into its own cgroup v2 group
	// under a delegated subtree (memory.max with memory.swap.max 0 and
	// memory.oom.group, pids.max; CPU time read from cpu.stat), and kills
	// it through cgroup.kill. It needs a parent cgroup whose memory and
	// pids controllers the process may enable for its children: a
	// cgroup namespace's root, or an empty delegated cgroup named by
	// SandboxConfig.CgroupParent.
	BudgetCgroup2
	// BudgetCgroup1 does the same with the cgroup v1 memory controller
	// (memory.limit_in_bytes and memory.memsw.limit_in_bytes), and the v1
	// pids and cpuacct controllers where they are writable; a limit
	// whose controller is not falls back to the watchdog's counting.
	BudgetCgroup1
	// BudgetWatchdog polls /proc every 10 ms, sums the resident
	// anonymous and shared memory (RssAnon + RssShmem + VmSwap, and
	// proportional set sizes once that sum is over the budget, so that
	// pages shared by forks count once), threads and CPU time of every
	// process below the worker (a PID namespace's init, or a child
	// subreaper, so that double forks and setsid stay below it), and
	// kills the call when a sum goes over its budget. It works everywhere
	// but is sampled: memory can overshoot by what the call allocates in
	// one poll, and a burst of processes that ends between two polls
	// passes unseen (RLIMIT_NPROC, MaxProcesses, stays the hard bound).
	BudgetWatchdog
)

// String returns the mechanism's name as Isolation.Budget reports it.
func (m BudgetMechanism) String() string {
	switch m {
	case BudgetAuto:
		return "auto"
	case BudgetCgroup2:
		return "cgroup2"
	case BudgetCgroup1:
		return "cgroup1"
	case BudgetWatchdog:
		return "watchdog"
	}
	return fmt.Sprintf("BudgetMechanism(%d)", int(m))
}

// Bounds of the default call memory budget, and the smallest budget
// accepted (a smaller one is most likely MiB given as bytes).
const (
	minDefaultCallMemory = 128 << 20
	maxDefaultCallMemory = 2 << 30
	minCallMemory        = 16 << 20
)

// SandboxConfig configures the local sandbox and the code interpreter built
// on it. The zero value is usable: each zero field takes the default named
// on it (python3 on PATH, one worker per CPU, 10 s per execution, the
// rlimits given, a per-call budget of half the host's memory shared among
// the workers, IsolationAuto, BudgetAuto, the default preload, an
// OutputBudget of DefaultOutputChars).
//
// The rlimits (CPUTime, MemoryBytes, MaxProcesses, ...) bound each process
// of a call on its own; the Call* fields bound the call's processes
// together, so that code forking children that each fill their own
// address-space limit cannot take MaxProcesses × MemoryBytes of the host.
type SandboxConfig struct {
	// Python is the interpreter to run; default: python3 on PATH, resolved
	// to the real executable (pyenv shims included).
	Python string
	// Workers is the number of pre-forked interpreters, which is also the
	// most executions that run at once; default runtime.NumCPU().
	Workers int
	// Timeout bounds each execution's wall-clock time; default 10 s.
	Timeout time.Duration
	// CPUTime bounds each process's CPU time (RLIMIT_CPU); default Timeout.
	CPUTime time.Duration
	// MemoryBytes bounds each process's address space (RLIMIT_AS); default
	// 1 GiB; negative: no limit.
	MemoryBytes int64
	// MaxProcesses bounds the processes the code may have (RLIMIT_NPROC);
	// default 64.
	MaxProcesses int
	// MaxFileBytes bounds the size of any file the code writes
	// (RLIMIT_FSIZE); default 16 MiB.
	MaxFileBytes int64
	// MaxOpenFiles bounds open file descriptors (RLIMIT_NOFILE); default 256.
	MaxOpenFiles int
	// ScratchBytes is the size of each writable tmpfs (/work, /tmp,
	// /dev/shm) under namespaces; default 64 MiB.
	ScratchBytes int64
	// MaxOutputBytes caps stdout and stderr together while they are read;
	// a program that writes more is killed. Default 1 MiB.
	MaxOutputBytes int
	// CallMemoryBytes bounds the memory of all of one call's processes
	// together, however they fork: under cgroups everything the kernel
	// charges them (anonymous memory, tmpfs files, page cache), under the
	// watchdog their resident anonymous and shared memory (see
	// BudgetWatchdog). A call that
	// goes over it is killed and reports StatusMemoryLimit. Default: half
	// of the host's memory (the smaller of MemTotal and the limit of the
	// cgroup this process runs in) divided among the Workers, clamped to
	// [128 MiB, 2 GiB]; negative: no memory budget. A positive value
	// under 16 MiB is refused.
	CallMemoryBytes int64
	// CallProcesses bounds the processes, threads included, that one call
	// may have at once; under cgroups a fork beyond it fails (EAGAIN),
	// under the watchdog the call is killed. Default MaxProcesses.
	CallProcesses int
	// CallCPUTime bounds the CPU time of all of one call's processes
	// together; a call that uses more is killed. Default CPUTime, so that
	// a call's processes together get what one process may use.
	CallCPUTime time.Duration
	// BudgetMechanism chooses how the Call* budgets are enforced; default
	// BudgetAuto. Forcing a cgroup version that does not work here makes
	// NewSandbox fail with ErrBudgetUnavailable.
	BudgetMechanism BudgetMechanism
	// CgroupParent is the cgroup under which the sandbox creates its own,
	// as a path inside the cgroup hierarchy the way /proc/self/cgroup
	// shows it ("/agentrl.slice"); default: the cgroup this process runs
	// in. For cgroup v2 it must be delegated to this process and hold no
	// processes, or be a cgroup namespace's root.
	CgroupParent string
	// Isolation chooses namespaces or rlimits only; default IsolationAuto.
	Isolation IsolationMode
	// ReadOnlyPaths are extra host paths made visible, read-only, at the
	// same place inside the sandbox (data sets, extra module directories).
	ReadOnlyPaths []string
	// Preload lists modules each worker imports once, before forking, so
	// that snippets importing them start fast. Nil means a default set of
	// standard-library modules (math, fractions, itertools, ...); an empty
	// non-nil slice preloads nothing.
	Preload []string
	// MaxCallsPerWorker recycles a worker after this many executions;
	// default 10000.
	MaxCallsPerWorker int
	// Budget bounds the text the code interpreter tool returns to the
	// model; see OutputBudget. Unused by the Sandbox itself.
	Budget OutputBudget
}

// defaultPreload are modules math-reasoning snippets import most; loading
// them once in the worker saves each snippet their import time.
var defaultPreload = []string{
	"math", "cmath", "fractions", "decimal", "itertools", "functools",
	"collections", "heapq", "bisect", "re", "json", "random", "statistics",
	"string", "operator", "traceback", "linecache",
}

// withDefaults fills the zero fields and checks the others, with the
// default call memory budget taken from this host's memory.
func (c SandboxConfig) withDefaults() (SandboxConfig, error) {
	return c.withDefaultsFor(hostMemoryBytes())
}

// defaultCallMemory is the default CallMemoryBytes for a host with
// hostMem bytes (0: unknown, taken as 4 GiB) and the given workers: half
// of the host shared among the workers, clamped to the default's bounds.
func defaultCallMemory(hostMem int64, workers int) int64 {
	if hostMem <= 0 {
		hostMem = 4 << 30
	}
	return min(max(hostMem/int64(2*max(workers, 1)), minDefaultCallMemory), maxDefaultCallMemory)
}

// withDefaultsFor fills the zero fields and checks the others, for a host
// with hostMem bytes of memory.
func (c SandboxConfig) withDefaultsFor(hostMem int64) (SandboxConfig, error) {
	if c.Workers == 0 {
		c.Workers = runtime.NumCPU()
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.CPUTime == 0 {
		c.CPUTime = c.Timeout
	}
	if c.MemoryBytes == 0 {
		c.MemoryBytes = 1 << 30
	}
	if c.MaxProcesses == 0 {
		c.MaxProcesses = 64
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = 16 << 20
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = 256
	}
	if c.ScratchBytes == 0 {
		c.ScratchBytes = 64 << 20
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = 1 << 20
	}
	if c.MaxCallsPerWorker == 0 {
		c.MaxCallsPerWorker = 10000
	}
	if c.Preload == nil {
		c.Preload = defaultPreload
	}
	if c.CallMemoryBytes == 0 && c.Workers > 0 {
		c.CallMemoryBytes = defaultCallMemory(hostMem, c.Workers)
	}
	if c.CallProcesses == 0 {
		c.CallProcesses = c.MaxProcesses
	}
	if c.CallCPUTime == 0 {
		c.CallCPUTime = c.CPUTime
	}
	switch {
	case c.Workers < 0:
		return c, fmt.Errorf("tool: SandboxConfig.Workers = %d, want > 0", c.Workers)
	case c.Timeout < 0:
		return c, fmt.Errorf("tool: SandboxConfig.Timeout = %v, want > 0", c.Timeout)
	case c.CPUTime < 0:
		return c, fmt.Errorf("tool: SandboxConfig.CPUTime = %v, want > 0", c.CPUTime)
	case c.MaxProcesses < 0, c.MaxFileBytes < 0, c.MaxOpenFiles < 0, c.ScratchBytes < 0:
		return c, fmt.Errorf("tool: SandboxConfig limits must not be negative (MaxProcesses %d, MaxFileBytes %d, MaxOpenFiles %d, ScratchBytes %d)",
			c.MaxProcesses, c.MaxFileBytes, c.MaxOpenFiles, c.ScratchBytes)
	case c.MaxOutputBytes < 0:
		return c, fmt.Errorf("tool: SandboxConfig.MaxOutputBytes = %d, want > 0", c.MaxOutputBytes)
	case c.MaxCallsPerWorker < 0:
		return c, fmt.Errorf("tool: SandboxConfig.MaxCallsPerWorker = %d, want > 0", c.MaxCallsPerWorker)
	case c.Isolation < IsolationAuto || c.Isolation > IsolationRlimitsOnly:
		return c, fmt.Errorf("tool: SandboxConfig.Isolation = %d is not a known mode", c.Isolation)
	case c.CallMemoryBytes > 0 && c.CallMemoryBytes < minCallMemory:
		return c, fmt.Errorf("tool: SandboxConfig.CallMemoryBytes = %d is under the 16 MiB minimum (bytes, not MiB)", c.CallMemoryBytes)
	case c.CallProcesses < 0:
		return c, fmt.Errorf("tool: SandboxConfig.CallProcesses = %d, want > 0", c.CallProcesses)
	case c.CallCPUTime < 0:
		return c, fmt.Errorf("tool: SandboxConfig.CallCPUTime = %v, want > 0", c.CallCPUTime)
	case c.BudgetMechanism < BudgetAuto || c.BudgetMechanism > BudgetWatchdog:
		return c, fmt.Errorf("tool: SandboxConfig.BudgetMechanism = %d is not a known mechanism", int(c.BudgetMechanism))
	case c.CgroupParent != "" && (!path.IsAbs(c.CgroupParent) || path.Clean(c.CgroupParent) != c.CgroupParent):
		return c, fmt.Errorf("tool: SandboxConfig.CgroupParent = %q, want a clean absolute cgroup path such as /agentrl.slice", c.CgroupParent)
	}
	return c, nil
}
