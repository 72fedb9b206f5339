// Package tool defines the Tool interface that the rollout engine calls when
// the policy emits a tool call, a Registry that lists tool schemas for chat
// templates and dispatches calls by name, sessions for tools that keep
// state per conversation, and the tools themselves: a local sandboxed code
// interpreter for model-written Python, a client for SandboxFusion
// clusters, and an exact arithmetic calculator (tool/mcp adds the tools
// of MCP servers).
//
// Model-written code never touches the host: the local sandbox runs it with
// no network, a private filesystem, resource limits and a wall-clock
// timeout, and every failure of it comes back as a Result the model sees.
//
// # Tools and the registry
//
// A Tool has a name, an OpenAI function schema kept as ordered JSON (chat
// templates render keys in the order given; FunctionSchema builds one), and
// Call. Registry.Call checks the model's arguments against the schema
// (required fields, types, enums, nested objects) before the tool runs, so
// a malformed call becomes a failed Result that says what was wrong, never
// a crash; a tool that panics is recovered too.
//
// # Caching deterministic tools
//
// The n samples of a GRPO group mostly make the same call: the same
// expression, the same query. Cache wraps a tool whose result is a
// function of its arguments and runs each distinct call once (arguments
// compared as JSON values; identical calls in flight share one run;
// failures and errors are not kept). On a VM whose forks are slow, the
// main job's 7,839 code-interpreter calls ran 1,293 times with it, and
// its RL stage took 2 min 9 s instead of 5 min 23 s, with the same
// weights to the bit (docs/benchmarks.md).
//
// # Sessions
//
// A tool whose calls within one conversation share state that other
// conversations must not see — a server process, a working directory —
// implements Stateful: its SessionOpener opens a Session per
// conversation, and the conversation calls the session's instances of the
// tools.
// Registry.OpenSessions makes the registry of one conversation (the
// rollout engine calls it for each trajectory) and the function that
// closes its sessions; a session that cannot be opened fails the calls
// to its tools (ErrNoSession), never the conversation. Package tool/mcp's
// tools are Stateful when an MCP server keeps state per trajectory.
//
// # The code interpreter
//
// NewCodeInterpreter returns Open-AgentRL's code_interpreter tool: one
// required string parameter "code"; a ```python fence around it is
// unwrapped; the model reads stdout followed by stderr, cut to an
// OutputBudget (characters, or tokens of any TokenCodec) keeping the head
// and the tail around a marker. NewCodeInterpreterOn runs the same tool on
// any Executor, such as the SandboxFusion client.
//
// # The local sandbox
//
// Sandbox keeps a warm pool of Python worker processes (worker.py, embedded
// with go:embed). No Docker, no cgo and no re-exec of the Go binary are
// needed, so the package works inside any program and any test binary:
//
//  1. Go starts `python3 -I -c <worker.py>` with clone flags for new user,
//     mount, PID, network, IPC and UTS namespaces and uid/gid maps
//     (syscall.SysProcAttr). The worker is PID 1 of its namespace.
//  2. The worker builds the sandbox's file system itself, through ctypes
//     calls to mount(2) and pivot_root(2), before it serves anything: a
//     fresh tmpfs root holding read-only bind mounts of /usr, /bin, /lib*,
//     a few files of /etc, the interpreter's prefix and module path and any
//     SandboxConfig.ReadOnlyPaths; size-capped writable tmpfs at /work (the
//     working directory), /tmp and /dev/shm; /dev/null and friends; a /proc
//     of the namespace's own processes. The host root is detached, so
//     /etc/shadow, /home, the host's /tmp and the project are simply absent.
//     The network namespace has only a loopback interface, and it is down:
//     every connect fails with ENETUNREACH at once.
//  3. Each execution runs in a child the worker forked ahead of time, while
//     it was idle: the child has dropped every privilege (when started by
//     root it becomes nobody, mapped to the host's nobody, so that
//     RLIMIT_NPROC applies; otherwise it clears its capabilities), set
//     no_new_privs, its descriptors, environment and standard streams, and
//     waits for its request on a pipe. Once the request arrives it applies
//     the call's rlimits (CPU seconds, counted from then on; address space,
//     processes, file size, open files, no core dumps) and runs the code
//     with a fresh globals dict. A call thus pays no fork: a trivial
//     snippet round-trips in well under the cost of starting python3. The
//     worker never runs model code, so nothing a snippet changes —
//     globals, builtins, modules, environment — reaches the next call, and
//     a crash kills only the child.
//  4. The worker reads the child's stdout and stderr as they come, keeping at
//     most MaxOutputBytes and killing the child as soon as it writes more
//     (a gigabyte of output costs one cap's worth of reading). It answers
//     when the code has finished and its output is complete, or at the
//     wall-clock timeout. Then, before it accepts another request, the
//     worker, as PID 1, kills every process left in the namespace with
//     kill(-1, SIGKILL) — background daemons, setsid escapes and fork bombs
//     included — and reaps them, empties /work, /tmp and /dev/shm, forks
//     the next call's child and only then sends Go a ready frame; Go hands
//     a worker no request before that frame, so no call sees what an
//     earlier one left, and a worker that cannot clean up is replaced.
//  5. Go bounds concurrency by the pool size and keeps its own deadline on
//     every answer. If a worker dies or stops answering, Go kills it (the
//     kernel then kills everything in its PID namespace) and starts a
//     replacement in the background; the model sees a failed execution.
//     Cancelling the context does the same. Workers die with the process
//     that started them (PR_SET_PDEATHSIG, and EOF on their request pipe).
//
// Where namespaces are unavailable (a container without unprivileged user
// namespaces, say), IsolationAuto falls back to rlimits only: the worker
// runs on the host file system and network, becomes a child subreaper so
// that it can still kill everything a snippet leaves behind, runs code as
// nobody when started by root, and still applies every rlimit, the timeout
// and the output cap. ExecResult.Isolation and the tool's "isolation"
// metadata say which isolation an execution had, and why it is weaker.
// Started by root without namespaces, snippets run as nobody, so the
// interpreter's files must be readable by nobody (a pyenv build under a
// private /root is not: only the modules the worker preloaded import).
// Without namespaces and without root, a snippet shares the caller's uid
// and can read what the caller can read and signal its processes; use
// IsolationRequireNamespaces to refuse that.
//
// # The call budget
//
// The rlimits bound each process on its own: a snippet that forks
// children that each fill their own address space would otherwise take
// MaxProcesses × MemoryBytes of the host. So each call also has a budget
// across all of its processes — CallMemoryBytes (by default half of the
// host's memory shared among the workers, at most 2 GiB), CallProcesses
// and CallCPUTime — enforced by the first mechanism that works here,
// which NewSandbox finds by trying each for real (BudgetMechanism forces
// one):
//
//   - cgroup v2, where the process may enable the memory and pids
//     controllers under its cgroup (a cgroup namespace's root, or an empty
//     delegated cgroup named by CgroupParent): memory.max with
//     memory.swap.max 0 and memory.oom.group, pids.max, CPU time from
//     cpu.stat, cgroup.kill;
//   - cgroup v1, where the memory controller is writable:
//     memory.limit_in_bytes and memory.memsw.limit_in_bytes, OOM kills
//     read from memory.oom_control, the pids and cpuacct controllers where
//     they are writable too;
//   - a watchdog that polls /proc every 10 ms and sums the resident
//     anonymous and shared memory, threads and CPU time of every process
//     below the worker; once the memory sum passes the budget it is
//     recounted from proportional set sizes (smaps_rollup), so that the
//     pages forked interpreters share count once. The worker is the PID
//     namespace's init, or a child subreaper without one, so double forks
//     and setsid stay below it.
//
// Each worker has its own cgroup, made under the sandbox's. The worker
// itself stays outside: once it reports ready, Go moves the child it
// forked for the next call into the cgroup (the kernel puts everything
// the call forks there too) before any request reaches it, so an
// out-of-memory kill takes the call, never the worker, and the pool goes
// on answering without a restart. A monitor goroutine samples each call
// and kills it when the kernel killed one of its processes for memory
// (cgroup v1 kills only one), when the watchdog's memory sum is over the
// budget, when its CPU time is, or, without a pids controller, when it
// has too many processes. The result says so: StatusMemoryLimit for
// memory, StatusSignaled for CPU and processes, with ExecResult.Usage
// (peak memory, CPU time, processes, which budget) and a Message the code
// interpreter shows the model; under a pids controller a fork past the
// budget fails and the call goes on, with Usage.ProcessLimit set.
// Isolation.Budget names the mechanism and the limits. Cgroups are
// removed when their worker ends and at Close; those of a process that
// died without closing are removed by the next sandbox under the same
// parent.
//
// # SandboxFusion
//
// SandboxFusion is a client of bytedance/SandboxFusion's POST /run_code,
// the engine for sandboxes at cluster scale: it retries transport errors,
// timed-out attempts, 429 and 5xx with exponential backoff and jitter
// (honouring Retry-After), bounds the requests in flight, and maps the
// answer's status and run_result onto ExecResult. Its Check, called at
// start, fails at once for a URL where no SandboxFusion server answers
// (GET /v1/ping), rather than at the first tool call after the retries.
//
// # The calculator
//
// Calculator evaluates arithmetic exactly over big integers and rationals
// in pure Go (+ − × ÷ // % ^, parentheses, sqrt, abs). Every intermediate
// value, the expression's length and its nesting are bounded, so no input
// can make it hang. It is the fallback where no python3 exists
// (NewCodeInterpreter then fails with ErrNoPython).
//
// tool depends on nothing else in agentrl except internal packages.
package tool
