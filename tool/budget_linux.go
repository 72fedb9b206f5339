//go:build linux

package tool

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The call budget: each call's processes together are bounded in memory,
// processes and CPU time, by cgroup v2, cgroup v1 or a watchdog that polls
// /proc (BudgetMechanism). The worker itself stays outside the budget: Go
// puts only the child the worker forked for the next call into the
// worker's cgroup, once the worker says it is ready and before any request
// reaches it, so every process the call starts is born inside, whatever
// it forks, and an out-of-memory kill never takes the worker.
//
// During a call a monitor goroutine samples the call every budgetPoll. It
// kills the call when the kernel killed one of its processes for memory
// (cgroup v1 kills one process, and the rest of the call would run on),
// when the watchdog's memory sum is over the budget, when the call's CPU
// time is, or, where no pids controller refuses forks, when it has more
// processes than its budget. Killing the call's main process is enough
// for the worker to kill and reap the rest; the monitor also kills what it
// can see at once, through pidfds, so that nothing it did not verify as
// the call's is ever signalled.

// budgetPoll is how often a call's monitor samples the call. Memory under
// the watchdog can overshoot the budget by what the call allocates in
// one poll (a few hundred MiB/s per CPU at most when pages are touched
// from Python, so a few MiB per CPU).
const budgetPoll = 10 * time.Millisecond

// clockTick is the unit of CPU times in /proc/<pid>/stat: USER_HZ, which
// the kernel fixes at 100 for user space on every architecture Go runs on.
const clockTick = 10 * time.Millisecond

// callLimits are one call's budgets; 0 means none.
type callLimits struct {
	memory int64
	procs  int
	cpu    time.Duration
}

// budgetPlan is how a sandbox enforces call budgets: the mechanism in
// force, and the sandbox's own cgroup directories under which each
// worker's cgroup is made.
type budgetPlan struct {
	mech   BudgetMechanism // BudgetCgroup2, BudgetCgroup1 or BudgetWatchdog
	limits callLimits
	reason string
	poll   time.Duration
	// childrenFile: the kernel has /proc/<pid>/task/<tid>/children;
	// without it the watchdog scans all of /proc for parents.
	childrenFile bool

	// The sandbox's cgroup directories, removed by close: for cgroup2
	// one, for cgroup1 one per hierarchy in use.
	dirs []string
	// cgroup2: the sandbox's directory and its path in the hierarchy.
	v2Dir, v2Path string
	// cgroup1: the sandbox's directory in the memory hierarchy and its
	// path there; pids and cpuacct directories, "" where the watchdog's
	// counting stands in.
	memDir, memPath, pidsDir, cpuDir string

	seq atomic.Int64
}

// pidsControlled reports whether a pids controller enforces the process
// budget (forks past it fail) rather than the watchdog's counting (the
// call is killed).
func (p *budgetPlan) pidsControlled() bool { return p.v2Dir != "" || p.pidsDir != "" }

// describe returns the budget as Isolation reports it.
func (p *budgetPlan) describe() CallBudget {
	return CallBudget{Mechanism: p.mech.String(), MemoryBytes: p.limits.memory, Processes: p.limits.procs,
		CPUTime: p.limits.cpu, Reason: p.reason}
}

// newBudgetPlan picks the mechanism cfg asks for, or the first that works
// here, trying each for real: a cgroup mechanism must create the
// sandbox's cgroup, a probe cgroup with the limits written, and move a
// live process into it.
func newBudgetPlan(cfg SandboxConfig, python string) (*budgetPlan, error) {
	p := &budgetPlan{
		limits: callLimits{memory: max(cfg.CallMemoryBytes, 0), procs: cfg.CallProcesses, cpu: cfg.CallCPUTime},
		poll:   budgetPoll,
	}
	_, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d/children", os.Getpid(), os.Getpid()))
	p.childrenFile = err == nil
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, fmt.Errorf("tool: naming the sandbox's cgroup: %w", err)
	}
	name := fmt.Sprintf("agentrl-%d-%s", os.Getpid(), hex.EncodeToString(suffix[:]))
	order := map[BudgetMechanism][]BudgetMechanism{
		BudgetAuto:     {BudgetCgroup2, BudgetCgroup1, BudgetWatchdog},
		BudgetCgroup2:  {BudgetCgroup2},
		BudgetCgroup1:  {BudgetCgroup1},
		BudgetWatchdog: {BudgetWatchdog},
	}[cfg.BudgetMechanism]
	var reasons []string
	for _, m := range order {
		var err error
		switch m {
		case BudgetCgroup2:
			err = p.tryCgroup2(cfg.CgroupParent, name, python)
		case BudgetCgroup1:
			err = p.tryCgroup1(cfg.CgroupParent, name, python)
		}
		if err == nil {
			p.mech = m
			if m == BudgetWatchdog && cfg.BudgetMechanism == BudgetWatchdog {
				reasons = append(reasons, "the watchdog was chosen by SandboxConfig.BudgetMechanism")
			}
			if p.reason != "" {
				reasons = append(reasons, p.reason)
			}
			p.reason = strings.Join(reasons, "; ")
			return p, nil
		}
		p.close()
		if cfg.BudgetMechanism != BudgetAuto {
			return nil, fmt.Errorf("%w: %v: %v", ErrBudgetUnavailable, m, err)
		}
		reasons = append(reasons, fmt.Sprintf("%v unavailable: %v", m, err))
	}
	return nil, fmt.Errorf("%w: no mechanism works", ErrBudgetUnavailable)
}

// cgroupSetup is what /proc/self says about cgroups.
type cgroupSetup struct {
	mounts  []mountEntry
	cgroups []procCgroup
}

func readCgroupSetup() (cgroupSetup, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return cgroupSetup{}, err
	}
	mounts, err := parseMountinfo(mi)
	if err != nil {
		return cgroupSetup{}, fmt.Errorf("/proc/self/mountinfo: %w", err)
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return cgroupSetup{}, err
	}
	cgroups, err := parseProcCgroup(cg)
	if err != nil {
		return cgroupSetup{}, fmt.Errorf("/proc/self/cgroup: %w", err)
	}
	return cgroupSetup{mounts: mounts, cgroups: cgroups}, nil
}

// v2Dir returns the directory of cgroup v2 path p (this process's own
// when p is ""), preferring the mount at /sys/fs/cgroup.
func (c cgroupSetup) v2Dir(p string) (string, string, error) {
	if p == "" {
		for _, e := range c.cgroups {
			if e.ID == 0 && len(e.Controllers) == 0 {
				p = e.Path
			}
		}
		if p == "" {
			return "", "", errors.New("this process is in no cgroup v2 hierarchy")
		}
	}
	var found []string
	for _, m := range c.mounts {
		if m.FSType != "cgroup2" {
			continue
		}
		if d, ok := cgroupDir(m, p); ok {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", "", fmt.Errorf("no cgroup2 mount shows %s", p)
	}
	for _, d := range found {
		if strings.HasPrefix(d, "/sys/fs/cgroup") {
			return d, p, nil
		}
	}
	return found[0], p, nil
}

// v1Dir returns the directory of cgroup v1 path p (this process's own
// when p is "") in the hierarchy of controller ctl.
func (c cgroupSetup) v1Dir(ctl, p string) (string, string, error) {
	if p == "" {
		for _, e := range c.cgroups {
			if slices.Contains(e.Controllers, ctl) {
				p = e.Path
			}
		}
		if p == "" {
			return "", "", fmt.Errorf("no cgroup v1 %s hierarchy holds this process", ctl)
		}
	}
	for _, m := range c.mounts {
		if m.FSType == "cgroup" && slices.Contains(m.Super, ctl) {
			if d, ok := cgroupDir(m, p); ok {
				return d, p, nil
			}
		}
	}
	return "", "", fmt.Errorf("no cgroup v1 %s mount shows %s", ctl, p)
}

// tryCgroup2 sets the plan up on cgroup v2 under parent.
func (p *budgetPlan) tryCgroup2(parent, name, python string) error {
	setup, err := readCgroupSetup()
	if err != nil {
		return err
	}
	dir, cgPath, err := setup.v2Dir(parent)
	if err != nil {
		return err
	}
	ctl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	have := strings.Fields(string(ctl))
	for _, c := range []string{"memory", "pids"} {
		if !slices.Contains(have, c) {
			return fmt.Errorf("%s does not offer the %s controller (cgroup.controllers: %q)", dir, c, strings.TrimSpace(string(ctl)))
		}
	}
	if err := enableControllers(dir); err != nil {
		return fmt.Errorf("%w (a cgroup that holds processes cannot hand controllers to its children: set SandboxConfig.CgroupParent to an empty delegated cgroup)", err)
	}
	removeStale(dir)
	sb := filepath.Join(dir, name)
	if err := os.Mkdir(sb, 0o755); err != nil {
		return err
	}
	p.dirs = append(p.dirs, sb)
	if err := enableControllers(sb); err != nil {
		return err
	}
	p.v2Dir, p.v2Path = sb, cgPath+"/"+name
	return p.probe(python)
}

// enableControllers makes sure the memory and pids controllers are on in
// dir's cgroup.subtree_control.
func enableControllers(dir string) error {
	f := filepath.Join(dir, "cgroup.subtree_control")
	cur, err := os.ReadFile(f)
	if err != nil {
		return err
	}
	var add []string
	for _, c := range []string{"memory", "pids"} {
		if !slices.Contains(strings.Fields(string(cur)), c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := os.WriteFile(f, []byte(strings.Join(add, " ")), 0o644); err != nil {
		return fmt.Errorf("enabling the memory and pids controllers in %s: %w", f, err)
	}
	return nil
}

// tryCgroup1 sets the plan up on the cgroup v1 memory controller, with
// the pids and cpuacct controllers where they are writable.
func (p *budgetPlan) tryCgroup1(parent, name, python string) error {
	setup, err := readCgroupSetup()
	if err != nil {
		return err
	}
	dir, cgPath, err := setup.v1Dir("memory", parent)
	if err != nil {
		return err
	}
	removeStale(dir)
	sb := filepath.Join(dir, name)
	if err := os.Mkdir(sb, 0o755); err != nil {
		return fmt.Errorf("the memory controller is not writable: %w", err)
	}
	p.dirs = append(p.dirs, sb)
	p.memDir, p.memPath = sb, cgPath+"/"+name
	var missing []string
	for _, ctl := range []string{"pids", "cpuacct"} {
		d, _, err := setup.v1Dir(ctl, parent)
		if err == nil {
			removeStale(d)
			d = filepath.Join(d, name)
			err = os.Mkdir(d, 0o755)
		}
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s controller unavailable (%v)", ctl, err))
			continue
		}
		p.dirs = append(p.dirs, d)
		if ctl == "pids" {
			p.pidsDir = d
		} else {
			p.cpuDir = d
		}
	}
	if err := p.probe(python); err != nil {
		// Try again without the optional controllers: one of them may be
		// what refuses.
		if p.pidsDir == "" && p.cpuDir == "" {
			return err
		}
		for _, d := range p.dirs[1:] {
			os.Remove(d)
		}
		p.dirs = p.dirs[:1]
		p.pidsDir, p.cpuDir = "", ""
		missing = []string{fmt.Sprintf("pids and cpuacct controllers unusable (%v)", err)}
		if err := p.probe(python); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		p.reason = "cgroup1: " + strings.Join(missing, "; ") + "; the watchdog counts processes and CPU time instead"
	}
	return nil
}

// probe makes a worker's cgroup with the limits written, moves a live
// process into it, and removes it.
func (p *budgetPlan) probe(python string) error {
	g, err := p.newGroup()
	if err != nil {
		return err
	}
	if g == nil {
		return errors.New("no cgroup to probe")
	}
	defer g.remove()
	cmd := exec.Command(python, "-I", "-S", "-c", "import sys; sys.stdin.read()")
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting a probe process: %w", err)
	}
	err = g.place(cmd.Process.Pid)
	in.Close()
	cmd.Process.Kill()
	cmd.Wait()
	return err
}

// close removes the sandbox's cgroup directories (the workers' are gone
// by then).
func (p *budgetPlan) close() error {
	var errs []error
	for i := len(p.dirs) - 1; i >= 0; i-- {
		if err := rmdirRetry(p.dirs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	p.dirs = nil
	p.v2Dir, p.v2Path, p.memDir, p.memPath, p.pidsDir, p.cpuDir = "", "", "", "", "", ""
	return errors.Join(errs...)
}

// removeStale removes the empty cgroups that sandboxes of processes that
// no longer exist left under dir (a process killed before Close).
func removeStale(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "agentrl-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue
		}
		sb := filepath.Join(dir, e.Name())
		kids, _ := os.ReadDir(sb)
		for _, k := range kids {
			if k.IsDir() {
				os.Remove(filepath.Join(sb, k.Name())) // fails, harmlessly, on one with processes
			}
		}
		os.Remove(sb)
	}
}

// rmdirRetry removes a cgroup directory, waiting a little for processes
// that are still exiting to leave it.
func rmdirRetry(dir string) error {
	var err error
	for i := 0; i < 200; i++ {
		err = os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %s: %w", dir, err)
}

// callGroup is one worker's cgroup (one directory per hierarchy for
// cgroup v1), which holds the processes of the call in progress.
type callGroup struct {
	plan *budgetPlan
	dirs []string // created, removed in reverse order
	// primary lists the call's processes (cgroup.procs) and holds its
	// memory limit; path is its path in the hierarchy, which
	// /proc/<pid>/cgroup shows for members.
	primary, path   string
	pidsDir, cpuDir string // "" where the watchdog counts instead
	peak            *os.File
	// open holds the counter files read at every sample, kept open and
	// read with pread (≈ 1 µs a read, against ≈ 15 µs to open, read and
	// close). One call at a time uses a group, but the monitor's
	// goroutine and the call's end may meet, hence the lock.
	mu   sync.Mutex
	open map[string]*os.File
	buf  []byte
}

// read returns the content of the group's file dir/name; false when it
// cannot be read.
func (g *callGroup) read(dir, name string) ([]byte, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	file := filepath.Join(dir, name)
	f := g.open[file]
	if f == nil {
		var err error
		if f, err = os.Open(file); err != nil {
			return nil, false
		}
		if g.open == nil {
			g.open = map[string]*os.File{}
		}
		g.open[file] = f
	}
	if g.buf == nil {
		g.buf = make([]byte, 4096)
	}
	n, err := f.ReadAt(g.buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false
	}
	return append([]byte(nil), g.buf[:n]...), true
}

// value reads a one-number file of the group; -1 when unreadable.
func (g *callGroup) value(dir, name string) int64 {
	b, ok := g.read(dir, name)
	if !ok {
		return -1
	}
	v, err := parseCgroupValue(b)
	if err != nil {
		return -1
	}
	return v
}

// keyed reads a "key value" file of the group; nil when unreadable.
func (g *callGroup) keyed(dir, name string) map[string]int64 {
	b, ok := g.read(dir, name)
	if !ok {
		return nil
	}
	m, _ := parseFlatKeyed(b)
	return m
}

// closeFiles closes the counter files.
func (g *callGroup) closeFiles() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range g.open {
		f.Close()
	}
	g.open = nil
}

// newGroup makes a worker's cgroup, with the call limits written; nil
// under the watchdog.
func (p *budgetPlan) newGroup() (*callGroup, error) {
	name := fmt.Sprintf("w%d", p.seq.Add(1))
	g := &callGroup{plan: p}
	mk := func(parent string) (string, error) {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("making cgroup %s: %w", d, err)
		}
		g.dirs = append(g.dirs, d)
		return d, nil
	}
	write := func(dir, file, v string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			return fmt.Errorf("writing %q to %s: %w", v, filepath.Join(dir, file), err)
		}
		return nil
	}
	fail := func(err error) (*callGroup, error) {
		g.remove()
		return nil, err
	}
	lim := p.limits
	if p.v2Dir != "" {
		d, err := mk(p.v2Dir)
		if err != nil {
			return fail(err)
		}
		g.primary, g.path, g.pidsDir, g.cpuDir = d, p.v2Path+"/"+name, d, d
		mem := "max"
		if lim.memory > 0 {
			mem = strconv.FormatInt(lim.memory, 10)
		}
		pids := "max"
		if lim.procs > 0 {
			pids = strconv.Itoa(lim.procs)
		}
		for _, kv := range [][2]string{{"memory.max", mem}, {"pids.max", pids}, {"memory.oom.group", "1"}} {
			if err := write(d, kv[0], kv[1]); err != nil {
				return fail(err)
			}
		}
		// No swap: the budget is memory, not memory plus swap. The file
		// is absent when the kernel has no swap accounting.
		if _, err := os.Stat(filepath.Join(d, "memory.swap.max")); err == nil {
			if err := write(d, "memory.swap.max", "0"); err != nil {
				return fail(err)
			}
		}
		return g, nil
	}
	if p.memDir == "" {
		return nil, nil // the watchdog: no cgroup
	}
	d, err := mk(p.memDir)
	if err != nil {
		return fail(err)
	}
	g.primary, g.path = d, p.memPath+"/"+name
	if lim.memory > 0 {
		v := strconv.FormatInt(lim.memory, 10)
		if err := write(d, "memory.limit_in_bytes", v); err != nil {
			return fail(err)
		}
		// memory+swap at the same limit: no swap beyond the budget. The
		// file is absent without swap accounting.
		if _, err := os.Stat(filepath.Join(d, "memory.memsw.limit_in_bytes")); err == nil {
			if err := write(d, "memory.memsw.limit_in_bytes", v); err != nil {
				return fail(err)
			}
		}
	}
	if p.pidsDir != "" {
		pd, err := mk(p.pidsDir)
		if err != nil {
			return fail(err)
		}
		g.pidsDir = pd
		if lim.procs > 0 {
			if err := write(pd, "pids.max", strconv.Itoa(lim.procs)); err != nil {
				return fail(err)
			}
		}
	}
	if p.cpuDir != "" {
		cd, err := mk(p.cpuDir)
		if err != nil {
			return fail(err)
		}
		g.cpuDir = cd
	}
	return g, nil
}

// v2 reports whether g is a cgroup v2 group.
func (g *callGroup) v2() bool { return g.plan.v2Dir != "" }

// place moves process pid into g, in every hierarchy.
func (g *callGroup) place(pid int) error {
	v := []byte(strconv.Itoa(pid))
	for _, d := range g.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), v, 0o644); err != nil {
			return fmt.Errorf("moving process %d into cgroup %s: %w", pid, d, err)
		}
	}
	return nil
}

// resetPeak starts a new peak measurement for the next call:
// memory.max_usage_in_bytes is reset for the whole cgroup (v1),
// memory.peak through a descriptor kept for the call (v2, Linux 6.12 on;
// older kernels refuse, and the monitor's samples stand in).
func (g *callGroup) resetPeak() {
	if g.primary == "" {
		return
	}
	if !g.v2() {
		os.WriteFile(filepath.Join(g.primary, "memory.max_usage_in_bytes"), []byte("0"), 0o644)
		return
	}
	if g.peak != nil {
		g.peak.Close()
		g.peak = nil
	}
	f, err := os.OpenFile(filepath.Join(g.primary, "memory.peak"), os.O_RDWR, 0)
	if err != nil {
		return
	}
	if _, err := f.Write([]byte("reset\n")); err != nil {
		f.Close()
		return
	}
	g.peak = f
}

// peakMemory returns the cgroup's memory peak since resetPeak, or -1
// when the kernel does not keep one per call.
func (g *callGroup) peakMemory() int64 {
	if g.primary == "" {
		return -1
	}
	if !g.v2() {
		return g.value(g.primary, "memory.max_usage_in_bytes")
	}
	if g.peak == nil {
		return -1
	}
	b := make([]byte, 64)
	n, err := g.peak.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return -1
	}
	v, err := parseCgroupValue(b[:n])
	if err != nil {
		return -1
	}
	return v
}

// members lists the processes in g.
func (g *callGroup) members() []int {
	b, err := os.ReadFile(filepath.Join(g.primary, "cgroup.procs"))
	if err != nil {
		return nil
	}
	pids, _ := parsePIDs(b)
	return pids
}

// kill kills every process in g: through cgroup.kill on cgroup v2 (Linux
// 5.14 on), else each member, verified as one through its pidfd, until
// none is left or the tries run out (a fork bomb outrunning the kills is
// stopped by its worker, which kills everything after the call).
func (g *callGroup) kill() {
	if g.primary == "" {
		return
	}
	if g.v2() {
		if err := os.WriteFile(filepath.Join(g.primary, "cgroup.kill"), []byte("1"), 0o644); err == nil {
			return
		}
	}
	for range 20 {
		pids := g.members()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			killIf(pid, func() bool { return g.holds(pid) })
		}
	}
}

// holds reports whether process pid is in g, from /proc/<pid>/cgroup.
func (g *callGroup) holds(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	cgs, err := parseProcCgroup(b)
	if err != nil {
		return false
	}
	for _, c := range cgs {
		if c.Path == g.path && (g.v2() == (c.ID == 0 && len(c.Controllers) == 0)) {
			return true
		}
	}
	return false
}

// remove kills what is left in g and removes its directories.
func (g *callGroup) remove() error {
	if g == nil {
		return nil
	}
	if g.peak != nil {
		g.peak.Close()
		g.peak = nil
	}
	g.closeFiles()
	g.kill()
	var errs []error
	for i := len(g.dirs) - 1; i >= 0; i-- {
		if err := rmdirRetry(g.dirs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	g.dirs = nil
	return errors.Join(errs...)
}

// killIf sends SIGKILL to pid if, once a pidfd pins the process down,
// same still holds: the check and the signal then concern one process,
// even if the pid is reused in between (os.Process uses a pidfd where the
// kernel has them, Linux 5.3 on).
func killIf(pid int, same func() bool) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	defer p.Release()
	if same() {
		p.Signal(syscall.SIGKILL)
	}
}

// readValue reads a one-number cgroup file; -1 when unreadable.
func readValue(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return -1
	}
	v, err := parseCgroupValue(b)
	if err != nil {
		return -1
	}
	return v
}

// readKeyed reads a "key value" cgroup file; nil when unreadable.
func readKeyed(file string) map[string]int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	m, _ := parseFlatKeyed(b)
	return m
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

// callChild is the process a worker forked for its next call: the call's
// main process.
type callChild struct {
	pid   int
	start int64       // its start time, which with pid identifies it
	proc  *os.Process // pinned through a pidfd
	// stat is its /proc/<pid>/stat, kept open: reads through it concern
	// this process only (and fail once it is reaped).
	stat *os.File
}

// findChild finds the one process a ready worker has below it, the child
// it forked for the next call, and pins it down.
func findChild(worker int, childrenFile bool) (*callChild, error) {
	ws, err := readStat(worker)
	if err != nil {
		return nil, fmt.Errorf("reading the worker's stat: %w", err)
	}
	kids := childrenOf(worker, ws.Threads, childrenFile)
	var live []int
	for _, k := range kids {
		if st, err := readStat(k); err == nil && st.State != 'Z' {
			live = append(live, k)
		}
	}
	if len(live) != 1 {
		return nil, fmt.Errorf("a ready worker has %d live children, want 1 (its next call's)", len(live))
	}
	pid := live[0]
	st, err := readStat(pid)
	if err != nil {
		return nil, fmt.Errorf("reading the worker's child: %w", err)
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return nil, fmt.Errorf("pinning the worker's child: %w", err)
	}
	// The worker reaps nothing while it is idle, so the pid cannot have
	// changed hands; check anyway, once the pidfd and the stat file are
	// open, that they are the process seen.
	stat, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		proc.Release()
		return nil, fmt.Errorf("the worker's child: %w", err)
	}
	c := &callChild{pid: pid, start: st.Start, proc: proc, stat: stat}
	if !c.alive(worker) {
		c.release()
		return nil, fmt.Errorf("the worker's child %d changed while it was pinned", pid)
	}
	return c, nil
}

// alive reports whether c is still the idle child of worker.
func (c *callChild) alive(worker int) bool {
	var b [512]byte
	n, err := c.stat.ReadAt(b[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	st, err := parseProcStat(b[:n])
	return err == nil && st.Start == c.start && st.PPID == worker && st.State != 'Z'
}

// release lets go of the child's pidfd and stat file.
func (c *callChild) release() {
	if c == nil {
		return
	}
	if c.proc != nil {
		c.proc.Release()
	}
	if c.stat != nil {
		c.stat.Close()
	}
}

// childrenOf lists the children of pid, a process with the given number
// of threads, from /proc/<pid>/task/<tid>/children, or by scanning every
// process's parent where the kernel lacks those files.
func childrenOf(pid, threads int, childrenFile bool) []int {
	if !childrenFile {
		return scanChildren(pid)
	}
	tids := []string{strconv.Itoa(pid)}
	if threads > 1 {
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return nil
		}
		tids = tids[:0]
		for _, e := range entries {
			tids = append(tids, e.Name())
		}
	}
	var out []int
	for _, t := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t))
		if err != nil {
			continue
		}
		kids, _ := parsePIDs(b)
		out = append(out, kids...)
	}
	return out
}

// scanChildren lists the children of pid by reading every process's
// parent.
func scanChildren(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(p); err == nil && st.PPID == pid {
			out = append(out, p)
		}
	}
	return out
}

// treeProc is one process below a worker, as the watchdog saw it.
type treeProc struct {
	pid    int
	st     procStat
	memory int64 // RssAnon + RssShmem + VmSwap, when read
}

// treeSample is the watchdog's view of the processes below a worker.
type treeSample struct {
	procs []treeProc
	// cpu: the CPU time of every process of the call so far, in ticks:
	// the live (and zombie) processes' own and reaped children's, plus
	// what the worker gained from reaping orphans (workerChildCPU).
	cpu            int64
	workerChildCPU int64
	threads        int   // of the live processes
	memory         int64 // RssAnon + RssShmem + VmSwap of the live processes; -1 unread
}

// sampleTree walks the processes below worker, breadth first (a parent
// before its children, so that a child reaped by its parent during the
// walk is missed for one sample rather than counted twice).
//
// A process the worker reaps during the walk would be counted neither in
// the worker's children's CPU, read first, nor in the walk: the worker's
// stat is read again after the walk, and the walk repeated (up to three
// times) when it changed. The worker reaps right after each call, so the
// last sample of a call meets this often.
func sampleTree(worker int, childrenFile, withMemory bool) (treeSample, error) {
	var s treeSample
	for range 3 {
		ws, err := readStat(worker)
		if err != nil {
			return treeSample{}, fmt.Errorf("reading the worker's stat: %w", err)
		}
		s = walkTree(worker, ws, childrenFile, withMemory)
		if again, err := readStat(worker); err == nil && again.ChildCPU == ws.ChildCPU {
			break
		}
	}
	return s, nil
}

// walkTree is one walk of sampleTree, below a worker whose stat is ws.
func walkTree(worker int, ws procStat, childrenFile, withMemory bool) treeSample {
	s := treeSample{workerChildCPU: ws.ChildCPU, cpu: ws.ChildCPU, memory: -1}
	if withMemory {
		s.memory = 0
	}
	seen := map[int]bool{worker: true}
	queue := childrenOf(worker, ws.Threads, childrenFile)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		st, err := readStat(pid)
		if err != nil {
			continue // gone
		}
		tp := treeProc{pid: pid, st: st}
		s.cpu += st.CPU + st.ChildCPU
		if st.State != 'Z' {
			s.threads += st.Threads
			if withMemory {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
					if m, err := parseProcStatusMemory(b); err == nil {
						tp.memory = m
						s.memory += m
					}
				}
			}
		}
		s.procs = append(s.procs, tp)
		if st.State == 'Z' {
			continue
		}
		queue = append(queue, childrenOf(pid, st.Threads, childrenFile)...)
	}
	return s
}

// proportionalMemory sums the call's memory with the pages its processes
// share counted once in all (PSS, from smaps_rollup), where the cheap sum
// of RssAnon counts them once per process: a fork shares all of its
// parent's pages, so thirty forked interpreters look like thirty times
// one. smaps_rollup walks the process's page tables (≈ 1 ms per 100 MiB),
// so the watchdog reads it only when the cheap sum is over the budget. A
// process that has lost its address space since the walk (it is exiting)
// counts nothing; one whose smaps_rollup may not be read (by the same
// user without privileges, when it is not dumpable) keeps its cheap
// value.
func proportionalMemory(t treeSample) int64 {
	var total int64
	for _, p := range t.procs {
		if p.st.State == 'Z' {
			continue
		}
		v := p.memory
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p.pid))
		switch {
		case err == nil:
			if m, err := parseSmapsRollupMemory(b); err == nil {
				v = m
			} else if len(b) == 0 {
				v = 0 // no address space left
			}
		case errors.Is(err, syscall.ESRCH), errors.Is(err, os.ErrNotExist):
			// Exiting (its memory is being freed), a zombie or gone
			// since it was walked: it holds nothing any more.
			v = 0
		}
		total += v
	}
	return total
}

// budgetSample is a call's use, as counters since the worker's start
// (CPU, kills, refusals) and levels (processes).
type budgetSample struct {
	cpu      time.Duration
	procs    int
	memory   int64 // the watchdog's sum, or cgroup v2's memory.current; -1 unread
	ooms     int64 // OOM kills in the cgroup
	refusals int64 // forks the pids controller refused
	tree     treeSample
}

// sample measures the call in progress on worker (pid) with group g (nil
// under the watchdog); memory says whether the watchdog is to sum the
// processes' memory (the last sample of a call, for its CPU time, need
// not).
func (p *budgetPlan) sample(worker int, g *callGroup, memory bool) budgetSample {
	s := budgetSample{memory: -1}
	needTree := g == nil || g.primary == "" || g.pidsDir == "" || g.cpuDir == ""
	if needTree {
		withMemory := memory && (g == nil || g.primary == "")
		if t, err := sampleTree(worker, p.childrenFile, withMemory); err == nil {
			s.tree = t
			s.cpu = time.Duration(t.cpu) * clockTick
			s.procs = t.threads
			s.memory = t.memory
		}
	}
	if g == nil || g.primary == "" {
		if p.limits.memory > 0 && s.memory > p.limits.memory {
			s.memory = proportionalMemory(s.tree)
		}
		return s
	}
	if g.v2() {
		s.memory = g.value(g.primary, "memory.current")
		ev := g.keyed(g.primary, "memory.events")
		s.ooms = ev["oom_kill"] + ev["oom_group_kill"]
		s.cpu = time.Duration(g.keyed(g.primary, "cpu.stat")["usage_usec"]) * time.Microsecond
		s.procs = int(max(g.value(g.primary, "pids.current"), 0))
		s.refusals = g.keyed(g.primary, "pids.events")["max"]
		return s
	}
	s.ooms = g.keyed(g.primary, "memory.oom_control")["oom_kill"]
	if g.cpuDir != "" {
		s.cpu = time.Duration(max(g.value(g.cpuDir, "cpuacct.usage"), 0))
	}
	if g.pidsDir != "" {
		s.procs = int(max(g.value(g.pidsDir, "pids.current"), 0))
		s.refusals = g.keyed(g.pidsDir, "pids.events")["max"]
	}
	return s
}

// Which budget a monitor killed a call for.
const (
	verdictNone int32 = iota
	verdictMemory
	verdictCPU
	verdictProcesses
)

// callMonitor watches one call.
type callMonitor struct {
	plan   *budgetPlan
	worker int
	group  *callGroup
	child  *callChild
	base   budgetSample
	start  time.Time
	timer  *time.Timer // starts run after the first poll interval
	stop   chan struct{}
	done   chan struct{}

	verdict atomic.Int32
	// Written by the monitor goroutine, read after done is closed.
	peakMemory int64
	peakProcs  int
	maxCPU     time.Duration // CPU time is cumulative: a sample that missed a process counts less
	refused    bool
	samples    int
	// maxSpan is the longest time from the start of one sample to the
	// end of the next: what bounds the watchdog's overshoot.
	maxSpan time.Duration
}

// startMonitor starts watching the call about to run on w's child;
// base is the group's state before the call.
func (p *budgetPlan) startMonitor(worker int, g *callGroup, child *callChild, base budgetSample) *callMonitor {
	m := &callMonitor{plan: p, worker: worker, group: g, child: child, base: base, start: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{})}
	// Most calls end within the first interval: they need no goroutine.
	m.timer = time.AfterFunc(p.poll, m.run)
	return m
}

func (m *callMonitor) run() {
	defer close(m.done)
	t := time.NewTicker(m.plan.poll)
	defer t.Stop()
	// The call starts under its budget: the span of the first sample
	// runs from the start.
	prev := m.start
	for first := true; ; first = false {
		if !first {
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
		select {
		case <-m.stop:
			return
		default:
		}
		begin := time.Now()
		s := m.plan.sample(m.worker, m.group, true)
		m.maxSpan = max(m.maxSpan, time.Since(prev))
		prev = begin
		m.samples++
		if v := m.check(s); v != verdictNone {
			m.verdict.Store(v)
			m.kill(s)
			return
		}
	}
}

// check records s and returns the budget it breaks, if any.
func (m *callMonitor) check(s budgetSample) int32 {
	lim := m.plan.limits
	m.peakMemory = max(m.peakMemory, s.memory)
	m.peakProcs = max(m.peakProcs, s.procs)
	m.maxCPU = max(m.maxCPU, s.cpu)
	if s.refusals > m.base.refusals {
		m.refused = true
	}
	cgroupMemory := m.group != nil && m.group.primary != ""
	switch {
	case cgroupMemory && s.ooms > m.base.ooms:
		return verdictMemory
	case !cgroupMemory && lim.memory > 0 && s.memory > lim.memory:
		return verdictMemory
	case lim.cpu > 0 && s.cpu-m.base.cpu > lim.cpu:
		return verdictCPU
	case (m.group == nil || m.group.pidsDir == "") && lim.procs > 0 && s.procs > lim.procs:
		return verdictProcesses
	}
	return verdictNone
}

// kill kills the call: its main process through its pidfd (the worker
// then kills and reaps everything else the call started), the cgroup's
// members, and what the last sample saw of the tree.
func (m *callMonitor) kill(s budgetSample) {
	if m.child != nil && m.child.proc != nil {
		m.child.proc.Signal(syscall.SIGKILL)
	}
	if m.group != nil && m.group.primary != "" {
		m.group.kill()
		return
	}
	for _, p := range s.tree.procs {
		pid, start := p.pid, p.st.Start
		killIf(pid, func() bool {
			st, err := readStat(pid)
			return err == nil && st.Start == start
		})
	}
}

// finish stops the monitor and returns what the call used.
func (m *callMonitor) finish() CallUsage {
	close(m.stop)
	if !m.timer.Stop() {
		<-m.done // run started, or is about to
	}
	final := m.plan.sample(m.worker, m.group, false)
	m.check(final)
	u := CallUsage{
		CPUTime:       max(m.maxCPU-m.base.cpu, 0),
		PeakProcesses: m.peakProcs,
		ProcessLimit:  m.refused,
	}
	switch v := m.verdict.Load(); {
	case v == verdictMemory || (m.group != nil && m.group.primary != "" && final.ooms > m.base.ooms):
		u.KilledForMemory = true
	case v == verdictCPU:
		u.KilledForCPU = true
	case v == verdictProcesses:
		u.KilledForProcesses, u.ProcessLimit = true, true
	}
	u.PeakMemoryBytes = max(m.peakMemory, 0)
	if m.group != nil {
		if pk := m.group.peakMemory(); pk >= 0 {
			u.PeakMemoryBytes = pk
		}
	}
	return u
}

// hostMemoryBytes returns the memory this process may use: MemTotal, or
// the memory limit of its cgroup when that is smaller (cgroup v1's
// hierarchical_memory_limit; the smallest memory.max from its cgroup v2
// up to the root); 0 when unknown.
func hostMemoryBytes() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	total, err := parseMemTotal(b)
	if err != nil {
		return 0
	}
	if lim := cgroupMemoryLimit(); lim > 0 && lim < total {
		total = lim
	}
	return total
}

// cgroupMemoryLimit returns the memory limit of this process's cgroup, or
// 0 when it has none or it cannot be read.
func cgroupMemoryLimit() int64 {
	setup, err := readCgroupSetup()
	if err != nil {
		return 0
	}
	var lim int64
	if dir, _, err := setup.v1Dir("memory", ""); err == nil {
		lim = max(readKeyed(filepath.Join(dir, "memory.stat"))["hierarchical_memory_limit"], 0)
	}
	if _, p, err := setup.v2Dir(""); err == nil {
		for q := p; ; q = filepath.Dir(q) {
			if dir, _, err := setup.v2Dir(q); err == nil {
				if v := readValue(filepath.Join(dir, "memory.max")); v > 0 && (lim == 0 || v < lim) {
					lim = v
				}
			}
			if q == "/" {
				break
			}
		}
	}
	return lim
}
