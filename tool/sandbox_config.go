package tool

import (
	"fmt"
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

// SandboxConfig configures the local sandbox and the code interpreter built
// on it. The zero value is usable: each zero field takes the default named
// on it (python3 on PATH, one worker per CPU, 10 s per execution, the
// rlimits given, IsolationAuto, the default preload, an OutputBudget of
// DefaultOutputChars).
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

// withDefaults fills the zero fields and checks the others.
func (c SandboxConfig) withDefaults() (SandboxConfig, error) {
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
	}
	return c, nil
}
