//go:build linux

package tool

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// workerSource is the Python program each pooled interpreter runs; see the
// comment at its top and the package documentation.
//
//go:embed worker.py
var workerSource string

// workerSourceFD is the descriptor on which a starting worker reads
// workerSource, and workerBootstrap the program on its command line that
// reads it, closes the descriptor and runs it as the interpreter's main
// module. The source (32 KiB) is not put on the command line itself, where
// every listing of processes (ps, top, /proc/<pid>/cmdline) would show it.
const (
	workerSourceFD  = 5
	workerBootstrap = "f=open(5,'rb');src=f.read();f.close();del f;exec(compile(src,'<agentrl sandbox worker>','exec'))"
)

// nobody is the host uid and gid that code runs as when the sandbox is
// started by root: unprivileged, and not root's user, so that RLIMIT_NPROC
// applies (the kernel exempts root from it).
const nobody = 65534

// Sandbox is a pool of pre-forked, isolated Python interpreters. It is safe
// for concurrent use; at most Workers executions run at once and the others
// wait for a free worker (or for their context).
type Sandbox struct {
	cfg       SandboxConfig
	python    string
	mode      workerMode
	isolation Isolation
	budget    *budgetPlan

	// grace is how long past a call's timeout Go waits for the worker's
	// answer before it kills the worker.
	grace time.Duration
	// monitored, when set (by tests), sees each call's monitor once the
	// call is over.
	monitored func(*callMonitor)

	slots   chan *worker // idle workers; nil marks a slot whose worker must be started
	stop    chan struct{}
	refills sync.WaitGroup

	mu     sync.Mutex
	closed bool
	live   map[*worker]struct{}
}

// workerMode is how workers are started: with namespaces or not, and how
// the per-call child gives up privileges.
type workerMode struct {
	namespaces bool
	drop       string // "setuid", "capabilities" or "none"
	uid        int    // uid the code runs as, inside the sandbox
	hostUID    int    // the same, on the host
	reason     string // why namespaces are not used
}

// NewSandbox starts a pool of cfg.Workers interpreters and returns when all
// are ready. It returns ErrNoPython (wrapped) when no interpreter is found,
// ErrNamespacesUnavailable when cfg requires namespaces the kernel
// refuses, and ErrBudgetUnavailable when cfg forces a call budget
// mechanism that does not work here. Close it to stop the workers and
// remove the sandbox's cgroups.
func NewSandbox(ctx context.Context, cfg SandboxConfig) (*Sandbox, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	python, err := resolvePython(ctx, cfg.Python)
	if err != nil {
		return nil, err
	}
	budget, err := newBudgetPlan(cfg, python)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{
		cfg:    cfg,
		python: python,
		budget: budget,
		grace:  5 * time.Second,
		slots:  make(chan *worker, cfg.Workers),
		stop:   make(chan struct{}),
		live:   map[*worker]struct{}{},
	}
	euid := os.Geteuid()
	rlimitsMode := workerMode{drop: "none", uid: euid, hostUID: euid}
	if euid == 0 {
		rlimitsMode = workerMode{drop: "setuid", uid: nobody, hostUID: nobody}
	}
	var first *worker
	if cfg.Isolation != IsolationRlimitsOnly {
		s.mode = workerMode{namespaces: true, drop: "capabilities", uid: 0, hostUID: euid}
		if euid == 0 {
			s.mode = workerMode{namespaces: true, drop: "setuid", uid: nobody, hostUID: nobody}
		}
		first, err = s.startWorker(ctx)
		if err != nil {
			first = nil
			if ctx.Err() != nil {
				budget.close()
				return nil, ctx.Err()
			}
			if cfg.Isolation == IsolationRequireNamespaces {
				budget.close()
				return nil, fmt.Errorf("%w: %v", ErrNamespacesUnavailable, err)
			}
			rlimitsMode.reason = err.Error()
		}
	}
	if first == nil {
		s.mode = rlimitsMode
		if cfg.Isolation == IsolationRlimitsOnly {
			s.mode.reason = "namespaces disabled by SandboxConfig.Isolation"
		}
		first, err = s.startWorker(ctx)
		if err != nil {
			budget.close()
			return nil, err
		}
	}
	s.isolation = Isolation{Level: IsolationRlimits, UID: s.mode.hostUID, Reason: s.mode.reason}
	if s.mode.namespaces {
		s.isolation = Isolation{Level: IsolationNamespaces, NoNetwork: true, PrivateFS: true, PIDNamespace: true, UID: s.mode.hostUID}
		if !first.hello.Proc {
			s.isolation.Reason = "the kernel refused a /proc mount; the sandbox has none"
		}
	}
	s.isolation.Budget = budget.describe()
	s.slots <- first
	// Start the rest of the pool concurrently; a failure here is a real one
	// (the first worker of the same mode started).
	errs := make(chan error, cfg.Workers-1)
	for i := 1; i < cfg.Workers; i++ {
		go func() {
			w, err := s.startWorker(ctx)
			s.slots <- w // nil on failure, so that Close finds every slot
			errs <- err
		}()
	}
	for i := 1; i < cfg.Workers; i++ {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Isolation reports the isolation the sandbox's workers have.
func (s *Sandbox) Isolation() Isolation { return s.isolation }

// Python reports the interpreter the sandbox runs.
func (s *Sandbox) Python() string { return s.python }

// resolvePython finds the interpreter and follows shims (pyenv, asdf) to
// the real executable: the sandbox has no shell and no shim directory.
func resolvePython(ctx context.Context, python string) (string, error) {
	if python == "" {
		p, err := exec.LookPath("python3")
		if err != nil {
			return "", fmt.Errorf("%w on PATH: %v", ErrNoPython, err)
		}
		python = p
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-I", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("%w: running %s: %v", ErrNoPython, python, err)
	}
	real := strings.TrimSpace(string(out))
	if real == "" {
		return python, nil
	}
	return real, nil
}

// Close stops every worker, waiting for executions in flight to end (they
// fail), and removes the sandbox's cgroups; the error says which could not
// be removed. It is safe to call more than once.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	for w := range s.live {
		w.kill()
	}
	s.mu.Unlock()
	s.refills.Wait()
	var errs []error
	for i := 0; i < s.cfg.Workers; i++ {
		if w := <-s.slots; w != nil {
			w.kill()
			w.wait()
			errs = append(errs, w.groupErr)
		}
	}
	errs = append(errs, s.budget.close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tool: closing the sandbox: %w", err)
	}
	return nil
}

// Execute runs req.Code in a pooled worker. Failures of the code (errors,
// timeouts, limits) come back in the result; the error is non-nil only when
// the sandbox cannot run it: ctx ended, the sandbox was closed, the
// language is not Python, or a worker could not be started.
func (s *Sandbox) Execute(ctx context.Context, req ExecRequest) (ExecResult, error) {
	if req.Language != "" && !strings.EqualFold(req.Language, "python") && !strings.EqualFold(req.Language, "python3") {
		return ExecResult{}, fmt.Errorf("%w: local sandbox runs python, not %q", ErrUnsupportedLanguage, req.Language)
	}
	if req.Timeout < 0 || req.MemoryBytes < 0 {
		return ExecResult{}, fmt.Errorf("tool: ExecRequest Timeout %v and MemoryBytes %d must not be negative", req.Timeout, req.MemoryBytes)
	}
	var w *worker
	select {
	case w = <-s.slots:
	case <-ctx.Done():
		return ExecResult{}, ctx.Err()
	case <-s.stop:
		return ExecResult{}, ErrClosed
	}
	if s.isClosed() {
		s.release(w, false)
		return ExecResult{}, ErrClosed
	}
	if w == nil || w.exited() || !w.childAlive() {
		if w != nil {
			w.kill()
			w.wait()
			s.forget(w)
		}
		var err error
		w, err = s.startWorker(ctx)
		if err != nil {
			s.slots <- nil
			return ExecResult{}, fmt.Errorf("tool: starting sandbox worker: %w", err)
		}
	}
	res, healthy, err := s.run(ctx, w, req)
	s.release(w, healthy)
	if err != nil {
		return ExecResult{}, err
	}
	res.Isolation = s.isolation
	return res, nil
}

func (s *Sandbox) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// release returns w to the pool once it is ready again, or replaces it in
// the background when it is unhealthy or has served its share of calls.
// A worker answers before it cleans up after a call (kills what the call
// left, empties its scratch directories, forks its next child); it goes
// back to the pool only when its ready frame says that is done, so no
// request ever reaches a worker that still holds a previous call's state.
func (s *Sandbox) release(w *worker, healthy bool) {
	if w != nil && healthy && !w.cleaning && !s.isClosed() {
		// The request never reached the worker (it was refused before).
		s.slots <- w
		return
	}
	if w != nil && healthy && w.calls < s.cfg.MaxCallsPerWorker {
		s.mu.Lock()
		if !s.closed {
			s.refills.Add(1)
			s.mu.Unlock()
			go s.awaitReady(w)
			return
		}
		s.mu.Unlock()
	}
	s.replace(w)
}

// readyTimeout bounds a worker's clean-up after a call: killing what the
// call left and emptying its scratch space take milliseconds; a worker that
// takes this long is stuck and is replaced.
const readyTimeout = 60 * time.Second

// awaitReady waits for w's ready frame, then puts w back into the pool, or
// replaces it when the frame does not come or reports a failed clean-up.
func (s *Sandbox) awaitReady(w *worker) {
	defer s.refills.Done()
	w.resp.SetDeadline(time.Now().Add(readyTimeout))
	var r wireReady
	if err := readFrame(w.resp, &r, 1<<20); err == nil && r.Ready && !s.isClosed() && s.prepare(w) == nil {
		w.cleaning = false
		s.slots <- w
		return
	}
	s.replace(w)
}

// replace stops w, if any, and starts a worker in its slot in the
// background (or leaves the slot empty when the sandbox is closed).
func (s *Sandbox) replace(w *worker) {
	if w != nil {
		w.kill()
		w.wait()
		s.forget(w)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.slots <- nil
		return
	}
	s.refills.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.refills.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		nw, err := s.startWorker(ctx)
		if err != nil {
			nw = nil // the next Execute retries, and reports the failure
		}
		s.slots <- nw
	}()
}

// wire types: the frames exchanged with worker.py.
type wireLimits struct {
	CPU    int64 `json:"cpu"`
	AS     int64 `json:"as"`
	NProc  int   `json:"nproc"`
	FSize  int64 `json:"fsize"`
	NoFile int   `json:"nofile"`
}

type wireFile struct {
	Name string `json:"name"`
	Len  int    `json:"len"`
}

type wireRequest struct {
	CodeLen   int        `json:"code_len"`
	StdinLen  int        `json:"stdin_len"`
	FilesLen  int        `json:"files_len"`
	Files     []wireFile `json:"files"`
	Timeout   float64    `json:"timeout"`
	MaxOutput int        `json:"max_output"`
	Limits    wireLimits `json:"limits"`
}

type wireResponse struct {
	StdoutLen     int     `json:"stdout_len"`
	StderrLen     int     `json:"stderr_len"`
	TimedOut      bool    `json:"timed_out"`
	OutputLimited bool    `json:"output_limited"`
	ExitCode      int     `json:"exit_code"`
	Signal        int     `json:"signal"`
	Duration      float64 `json:"duration"`
	Error         string  `json:"error"`
}

// wireReady is the frame a worker sends once it has cleaned up after a call
// and forked the child for the next one.
type wireReady struct {
	Ready bool   `json:"ready"`
	Error string `json:"error"`
}

type workerHello struct {
	OK         bool   `json:"ok"`
	Error      string `json:"error"`
	PID        int    `json:"pid"`
	Python     string `json:"python"`
	Proc       bool   `json:"proc"`
	Filesystem string `json:"filesystem"`
	Network    string `json:"network"`
}

type workerConfig struct {
	Namespaces bool     `json:"namespaces"`
	PIDNS      bool     `json:"pid_ns"`
	Drop       string   `json:"drop"`
	UID        int      `json:"uid"`
	TmpfsBytes int64    `json:"tmpfs_bytes"`
	Workdir    string   `json:"workdir"`
	Tmpdir     string   `json:"tmpdir"`
	Scratch    []string `json:"scratch"`
	ROPaths    []string `json:"ro_paths"`
	Preload    []string `json:"preload"`
}

// run sends one request to w and reads its answer. healthy reports whether
// w may serve again.
func (s *Sandbox) run(ctx context.Context, w *worker, req ExecRequest) (res ExecResult, healthy bool, err error) {
	timeout := req.Timeout
	if timeout == 0 {
		timeout = s.cfg.Timeout
	}
	mem := req.MemoryBytes
	if mem == 0 {
		mem = s.cfg.MemoryBytes
	}
	cpu := s.cfg.CPUTime
	if cpu > timeout {
		cpu = timeout
	}
	names := make([]string, 0, len(req.Files))
	for name := range req.Files {
		names = append(names, name)
	}
	slices.Sort(names)
	wr := wireRequest{
		CodeLen:   len(req.Code),
		StdinLen:  len(req.Stdin),
		Timeout:   timeout.Seconds(),
		MaxOutput: s.cfg.MaxOutputBytes,
		Limits: wireLimits{
			CPU:    int64((cpu + time.Second - 1) / time.Second),
			AS:     max(mem, 0),
			NProc:  s.cfg.MaxProcesses,
			FSize:  s.cfg.MaxFileBytes,
			NoFile: s.cfg.MaxOpenFiles,
		},
	}
	var files bytes.Buffer
	for _, name := range names {
		if name == "" || strings.HasPrefix(name, "/") || strings.Contains("/"+name+"/", "/../") {
			return ExecResult{}, true, fmt.Errorf("tool: ExecRequest.Files: bad name %q (want a relative path inside the working directory)", name)
		}
		wr.Files = append(wr.Files, wireFile{Name: name, Len: len(req.Files[name])})
		files.Write(req.Files[name])
	}
	wr.FilesLen = files.Len()

	stopWatch := context.AfterFunc(ctx, w.kill)
	defer stopWatch()
	// The worker enforces the timeout itself; this deadline only catches a
	// worker that stopped answering.
	w.resp.SetDeadline(time.Now().Add(timeout + s.grace))
	start := time.Now()
	w.calls++
	w.cleaning = true
	monitor := s.budget.startMonitor(w.cmd.Process.Pid, w.group, w.child, w.base)
	finish := sync.OnceValue(monitor.finish)
	defer finish()
	if err := writeFrame(w.req, wr, []byte(req.Code), []byte(req.Stdin), files.Bytes()); err != nil {
		return s.workerFailed(ctx, w, start, fmt.Errorf("sending request: %w", err))
	}
	var resp wireResponse
	if err := readFrame(w.resp, &resp, 1<<20); err != nil {
		return s.workerFailed(ctx, w, start, fmt.Errorf("reading response: %w", err))
	}
	if resp.StdoutLen < 0 || resp.StderrLen < 0 || resp.StdoutLen+resp.StderrLen > s.cfg.MaxOutputBytes {
		return s.workerFailed(ctx, w, start, fmt.Errorf("response claims %d+%d output bytes, cap %d", resp.StdoutLen, resp.StderrLen, s.cfg.MaxOutputBytes))
	}
	out := make([]byte, resp.StdoutLen+resp.StderrLen)
	if _, err := io.ReadFull(w.resp, out); err != nil {
		return s.workerFailed(ctx, w, start, fmt.Errorf("reading output: %w", err))
	}
	usage := finish()
	if s.monitored != nil {
		s.monitored(monitor)
	}
	if resp.Error != "" {
		return ExecResult{
			Status:   StatusSandboxError,
			ExitCode: -1,
			Duration: time.Since(start),
			Message:  "the sandbox could not run the code: " + resp.Error,
		}, false, nil
	}
	res = ExecResult{
		Stdout:          toValidUTF8(out[:resp.StdoutLen]),
		Stderr:          toValidUTF8(out[resp.StdoutLen:]),
		ExitCode:        resp.ExitCode,
		OutputTruncated: resp.OutputLimited,
		Duration:        time.Duration(resp.Duration * float64(time.Second)),
	}
	switch {
	case resp.TimedOut:
		res.Status = StatusTimeout
		res.Message = fmt.Sprintf("execution timed out after %v", timeout)
	case resp.OutputLimited:
		res.Status = StatusOutputLimit
		res.Message = fmt.Sprintf("output exceeded %d bytes; the program was killed", s.cfg.MaxOutputBytes)
	case resp.Signal != 0:
		res.Status = StatusSignaled
		res.Signal = signalName(resp.Signal)
		res.Message = "killed by " + res.Signal
		if resp.Signal == int(syscall.SIGXCPU) {
			res.Message = "CPU time limit exceeded (SIGXCPU)"
		}
	case resp.ExitCode != 0:
		res.Status = StatusError
	default:
		res.Status = StatusOK
	}
	if resp.Signal != 0 || resp.TimedOut {
		res.ExitCode = -1
		if resp.Signal != 0 {
			res.Signal = signalName(resp.Signal)
		}
	}
	s.applyUsage(&res, usage)
	return res, true, nil
}

// applyUsage files what the call used, and says in the result which of
// its budgets stopped it: memory first (the call is then
// StatusMemoryLimit, whatever else happened), then CPU time and
// processes (StatusSignaled: the monitor killed it); a refused fork only
// adds a note.
func (s *Sandbox) applyUsage(res *ExecResult, u CallUsage) {
	res.Usage = u
	lim := s.budget.limits
	killed := func(status ExecStatus, msg string) {
		res.Status, res.Message = status, msg
		if res.Signal != "" || status == StatusSignaled {
			res.ExitCode, res.Signal = -1, "SIGKILL"
		}
	}
	switch {
	case u.KilledForMemory && lim.memory > 0:
		killed(StatusMemoryLimit, fmt.Sprintf("memory limit exceeded: the program's processes together used more than their budget of %s and were killed", formatBytes(lim.memory)))
	case u.KilledForMemory:
		killed(StatusMemoryLimit, "out of memory: the kernel killed the program's processes")
	case u.KilledForCPU:
		killed(StatusSignaled, fmt.Sprintf("CPU time limit exceeded: the program's processes together used more than %v of CPU time and were killed", lim.cpu))
	case u.KilledForProcesses:
		killed(StatusSignaled, fmt.Sprintf("process limit exceeded: the program had more than %d processes and threads and was killed", lim.procs))
	case u.ProcessLimit:
		note := fmt.Sprintf("the program reached its limit of %d processes and threads; creating more failed", lim.procs)
		if res.Message != "" {
			note = res.Message + "; " + note
		}
		res.Message = note
	}
}

// formatBytes writes n in the largest binary unit that divides it, or in
// bytes.
func formatBytes(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n > 0 && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// workerFailed turns a broken exchange with a worker into a result or an
// error: a cancelled context is the caller's error; anything else is a
// worker that died under the code (it killed its parent outside a PID
// namespace, say) or stopped answering, which the model sees as a failed
// execution while the pool replaces the worker.
func (s *Sandbox) workerFailed(ctx context.Context, w *worker, start time.Time, cause error) (ExecResult, bool, error) {
	w.kill()
	if err := ctx.Err(); err != nil {
		return ExecResult{}, false, err
	}
	if s.isClosed() {
		return ExecResult{}, false, ErrClosed
	}
	msg := "the sandbox worker died during execution"
	if errors.Is(cause, os.ErrDeadlineExceeded) {
		msg = "the sandbox worker stopped answering and was killed"
	}
	return ExecResult{
		Status:   StatusSandboxError,
		ExitCode: -1,
		Duration: time.Since(start),
		Message:  msg + " (" + cause.Error() + ")",
	}, false, nil
}

// worker is one running worker.py process.
type worker struct {
	cmd     *exec.Cmd
	req     *os.File // to the worker's fd 3
	resp    *os.File // from the worker's fd 4
	stderr  *tailBuffer
	hostDir string // working directory on the host (rlimits mode)
	hello   workerHello
	calls   int
	// cleaning: the worker was sent a request and owes a ready frame once
	// it has cleaned up after it.
	cleaning bool
	// group holds the worker's next call's processes (nil under the
	// watchdog); child is that call's main process, forked by the
	// worker ahead of the call; base is the group's counters before it.
	group    *callGroup
	child    *callChild
	base     budgetSample
	groupErr error // removing group failed
	done     chan struct{}
	once     sync.Once
}

// prepare finds the child a ready worker forked for its next call, moves
// it into the worker's cgroup and reads the cgroup's counters, before the
// worker may take the call.
func (s *Sandbox) prepare(w *worker) error {
	c, err := findChild(w.cmd.Process.Pid, s.budget.childrenFile)
	if err != nil {
		return fmt.Errorf("tool: sandbox worker: %w", err)
	}
	w.child.release()
	w.child = c
	if w.group != nil {
		if err := w.group.place(c.pid); err != nil {
			return fmt.Errorf("tool: sandbox worker: %w", err)
		}
		w.group.resetPeak()
	}
	w.base = s.budget.sample(w.cmd.Process.Pid, w.group, false)
	return nil
}

// childAlive reports whether the child w forked for its next call is
// still there, idle: one killed from outside is neither in the call's
// cgroup nor watched, so the worker is replaced (the worker itself
// refuses to serve a call without it).
func (w *worker) childAlive() bool {
	return w.child != nil && w.child.alive(w.cmd.Process.Pid)
}

// startWorker starts one worker and waits for its hello.
func (s *Sandbox) startWorker(ctx context.Context) (*worker, error) {
	m := s.mode
	wc := workerConfig{
		Namespaces: m.namespaces,
		PIDNS:      m.namespaces,
		Drop:       m.drop,
		UID:        m.uid,
		TmpfsBytes: s.cfg.ScratchBytes,
		ROPaths:    s.cfg.ReadOnlyPaths,
		Preload:    s.cfg.Preload,
	}
	w := &worker{stderr: &tailBuffer{max: 4096}, done: make(chan struct{})}
	g, err := s.budget.newGroup()
	if err != nil {
		return nil, fmt.Errorf("tool: sandbox worker's cgroup: %w", err)
	}
	w.group = g
	if m.namespaces {
		wc.Workdir, wc.Tmpdir = "/work", "/tmp"
		wc.Scratch = []string{"/work", "/tmp", "/dev/shm"}
	} else {
		dir, err := os.MkdirTemp("", "agentrl-sandbox-")
		if err != nil {
			w.cleanup()
			return nil, fmt.Errorf("tool: sandbox working directory: %w", err)
		}
		w.hostDir = dir
		if m.drop == "setuid" {
			if err := os.Chown(dir, m.hostUID, m.hostUID); err != nil {
				w.cleanup()
				return nil, fmt.Errorf("tool: sandbox working directory: %w", err)
			}
		}
		wc.Workdir, wc.Tmpdir = dir, dir
		wc.Scratch = []string{dir}
	}
	cfgJSON, err := json.Marshal(wc)
	if err != nil {
		w.cleanup()
		return nil, err
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		w.cleanup()
		return nil, err
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		w.cleanup()
		return nil, err
	}
	srcR, srcW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		respR.Close()
		respW.Close()
		w.cleanup()
		return nil, err
	}
	cmd := exec.Command(s.python, "-I", "-c", workerBootstrap, string(cfgJSON))
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{reqR, respW, srcR} // fds 3, 4 and workerSourceFD
	cmd.Stderr = w.stderr
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = sysProcAttr(m)
	err = cmd.Start()
	reqR.Close()
	respW.Close()
	srcR.Close()
	if err != nil {
		reqW.Close()
		respR.Close()
		srcW.Close()
		w.cleanup()
		return nil, fmt.Errorf("tool: starting %s: %w", s.python, err)
	}
	// The pipe may hold less than the source: the worker reads it while
	// it is written. A worker that dies first closes the read end, and
	// the write then fails (EPIPE) instead of blocking.
	go func() {
		_, _ = io.WriteString(srcW, workerSource)
		srcW.Close()
	}()
	w.cmd, w.req, w.resp = cmd, reqW, respR
	go func() {
		cmd.Wait()
		close(w.done)
	}()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		w.kill()
		w.wait()
		return nil, ErrClosed
	}
	s.live[w] = struct{}{}
	s.mu.Unlock()

	stopWatch := context.AfterFunc(ctx, w.kill)
	defer stopWatch()
	respR.SetDeadline(time.Now().Add(60 * time.Second))
	var hello workerHello
	if err := readFrame(respR, &hello, 1<<20); err != nil {
		w.kill()
		w.wait()
		s.forget(w)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("tool: sandbox worker did not start: %v; stderr: %q", err, w.stderr.String())
	}
	if !hello.OK {
		w.kill()
		w.wait()
		s.forget(w)
		return nil, fmt.Errorf("tool: sandbox worker set-up failed: %s", hello.Error)
	}
	w.hello = hello
	if err := s.prepare(w); err != nil {
		w.kill()
		w.wait()
		s.forget(w)
		return nil, err
	}
	return w, nil
}

func (s *Sandbox) forget(w *worker) {
	s.mu.Lock()
	delete(s.live, w)
	s.mu.Unlock()
}

// sysProcAttr returns how a worker is started: in its own process group,
// killed when the thread that started it dies, and under namespaces with
// uid maps when m says so.
func sysProcAttr(m workerMode) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if !m.namespaces {
		return attr
	}
	attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
		syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	if m.drop == "setuid" {
		// Started by root: the worker is root inside (to set up mounts and
		// reach an interpreter under a private home), and each snippet
		// runs as nobody, mapped to the host's nobody.
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: nobody, HostID: nobody, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: nobody, HostID: nobody, Size: 1}}
		attr.GidMappingsEnableSetgroups = true
	} else {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return attr
}

// kill ends the worker and, under a PID namespace, everything in it (the
// kernel kills a namespace's processes when its init dies). Without one it
// also kills the worker's process group.
func (w *worker) kill() {
	if w.cmd == nil || w.cmd.Process == nil {
		return
	}
	syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	w.cmd.Process.Kill()
}

// wait waits for the worker to exit and releases what it held.
func (w *worker) wait() {
	if w.cmd != nil {
		<-w.done
	}
	w.cleanup()
}

func (w *worker) cleanup() {
	w.once.Do(func() {
		if w.req != nil {
			w.req.Close()
		}
		if w.resp != nil {
			w.resp.Close()
		}
		if w.hostDir != "" {
			os.RemoveAll(w.hostDir)
		}
		w.child.release()
		w.groupErr = w.group.remove()
	})
}

func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// writeFrame writes a length-prefixed JSON header followed by payloads.
func writeFrame(wr io.Writer, header any, payloads ...[]byte) error {
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	n := 4 + len(h)
	for _, p := range payloads {
		n += len(p)
	}
	buf := make([]byte, 4, n)
	binary.BigEndian.PutUint32(buf, uint32(len(h)))
	buf = append(buf, h...)
	for _, p := range payloads {
		buf = append(buf, p...)
	}
	_, err = wr.Write(buf)
	return err
}

// readFrame reads a length-prefixed JSON header into v.
func readFrame(r io.Reader, v any, maxLen int) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > maxLen {
		return fmt.Errorf("frame header of %d bytes exceeds %d", n, maxLen)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// tailBuffer keeps the last max bytes written to it (a worker's stderr,
// for diagnostics).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func toValidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func signalName(n int) string {
	if n <= 0 {
		return ""
	}
	name := map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL", syscall.SIGXCPU: "SIGXCPU", syscall.SIGSEGV: "SIGSEGV",
		syscall.SIGABRT: "SIGABRT", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGTERM: "SIGTERM",
		syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGILL: "SIGILL",
		syscall.SIGINT: "SIGINT", syscall.SIGPIPE: "SIGPIPE", syscall.SIGHUP: "SIGHUP",
	}[syscall.Signal(n)]
	if name == "" {
		name = fmt.Sprintf("signal %d", n)
	}
	return name
}
