//go:build linux

package tool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// soakKind is one kind of call in the soak corpus: its code (with %d for
// the call's number), its timeout and what its result may be.
type soakKind struct {
	name    string
	code    string
	timeout time.Duration
	ok      func(res ExecResult, n int, sb *Sandbox) bool
	// cpuKill: the call must end killed for CPU time. The CPU budget
	// must not bind for the others (soakCPUBudget).
	cpuKill bool
}

// soakCorpus mixes benign and hostile calls; a sandbox with a 128 MiB call
// budget, 32 processes and a CPU budget per call (soakCPUBudget) stops
// every hostile one. Every call but the sleep gets the timeout long, so
// that a loaded machine (a load average of 100 on 2 cores, say) does not
// end it first: those that must meet a budget, and the benign ones, whose
// few tens of milliseconds of CPU time (a traceback's formatting, say)
// took more than the sandbox's 500 ms default under a load average of 20;
// the sleep meets a 300 ms timeout. A fork burst holds its
// children for a second, so that the watchdog sees it even when a loaded
// machine delays its samples (a burst that ends between two samples
// passes the watchdog unseen; RLIMIT_NPROC is the hard bound there). privateFS says whether
// the code has a private /tmp and /dev/shm to write to as well as its
// working directory (without namespaces they are the host's).
func soakCorpus(privateFS bool, long time.Duration) []soakKind {
	scratch := "['.']"
	if privateFS {
		scratch = "['.', '/tmp', '/dev/shm']"
	}
	kinds := []soakKind{
		{"print", "print(sum(range(%d)))", long, func(r ExecResult, n int, _ *Sandbox) bool {
			return r.Status == StatusOK && r.Stdout == fmt.Sprintf("%d\n", n*(n-1)/2)
		}, false},
		{"exception", "raise ValueError('call %d')", long, func(r ExecResult, n int, _ *Sandbox) bool {
			return r.Status == StatusError && strings.Contains(r.Stderr, fmt.Sprintf("ValueError: call %d", n))
		}, false},
		{"sleep past the timeout", "import time\nprint(%d, flush=True)\ntime.sleep(60)", 300 * time.Millisecond, func(r ExecResult, n int, _ *Sandbox) bool {
			return r.Status == StatusTimeout && r.Stdout == fmt.Sprintf("%d\n", n)
		}, false},
		{"busy loop", "n = %d\nwhile True:\n    n += 1", long, func(r ExecResult, _ int, _ *Sandbox) bool {
			return r.Usage.KilledForCPU && r.Status == StatusSignaled
		}, true},
		{"memory hog in four processes", `
import os, time
for i in range(3):
    if os.fork() == 0:
        break
x = b'x' * (%d %% 7 + 60 << 20)
time.sleep(60)`, long, func(r ExecResult, _ int, _ *Sandbox) bool {
			return r.Status == StatusMemoryLimit && r.Usage.KilledForMemory
		}, false},
		{"fork burst", `
import os, time
for i in range(%d %% 10 + 60):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    except OSError:
        pass
time.sleep(1)
print('survived')`, long, func(r ExecResult, _ int, _ *Sandbox) bool {
			return r.Usage.ProcessLimit
		}, false},
		{"big output", "import sys\nsys.stdout.write('%d' * 10**7)", long, func(r ExecResult, _ int, _ *Sandbox) bool {
			return r.Status == StatusOutputLimit
		}, false},
		{"files", `
import os
scratch = SCRATCH
left = sum(len(os.listdir(d)) for d in scratch)
for d in scratch:
    with open(os.path.join(d, 'f%d'), 'wb') as f:
        f.write(b'x' * (1 << 20))
    os.mkdir(os.path.join(d, 'dir'))
print(left)`, long, func(r ExecResult, _ int, _ *Sandbox) bool {
			return r.Status == StatusOK && r.Stdout == "0\n"
		}, false},
		{"network", "import socket\nsocket.create_connection(('192.0.2.%%d' %% (%d %% 250 + 1), 80), timeout=0.2)", long, func(r ExecResult, _ int, sb *Sandbox) bool {
			if sb.Isolation().NoNetwork {
				return r.Status == StatusError && strings.Contains(r.Stderr, "OSError")
			}
			return r.Status == StatusError || r.Status == StatusTimeout
		}, false},
	}
	for i := range kinds {
		kinds[i].code = strings.ReplaceAll(kinds[i].code, "SCRATCH", scratch)
	}
	return kinds
}

// soakMinCPU is the soak's smallest CPU budget per call, and
// soakCPUMargin how many times the CPU time that a call not meant to meet
// the CPU budget used in soakCPUBudget's measurement the budget must be.
const (
	soakMinCPU    = 300 * time.Millisecond
	soakCPUMargin = 2
)

// soakTimeout is the timeout of the calls that must meet a budget: 100
// times the CPU budget, and at least 10 s, so that the busy loop meets its
// CPU budget first even on a loaded machine (under a load average of 33
// on 2 cores it got 1.3 s of CPU time in 43 s). Calls end at their budget,
// so a long timeout costs nothing where the machine is not that slow.
func soakTimeout(cpu time.Duration) time.Duration { return max(10*time.Second, 100*cpu) }

// soakSandbox starts the soak's sandbox, skipping the test where the
// machine lacks Python or the budget mechanism asked for.
func soakSandbox(t *testing.T, cfg SandboxConfig) *Sandbox {
	t.Helper()
	sb, err := NewSandbox(context.Background(), cfg)
	if errors.Is(err, ErrNoPython) || errors.Is(err, ErrBudgetUnavailable) {
		t.Skip(err)
	}
	require.NoError(t, err)
	return sb
}

// soakCPUBudget returns the CPU budget per call for the soak on this
// machine. Hostile calls meant to meet another budget use CPU time on the
// way: the memory hog's four processes fill their pages (and, on cgroup
// v1, make the kernel reclaim before it kills), the fork burst starts 32
// Python processes. On the machine the soak was written on that took
// well under 300 ms; on a slower one (an AMD EPYC with 2 shared cores)
// 500–710 ms, so that a fixed 300 ms budget killed them for CPU first and
// the soak failed without the sandbox being wrong. So the CPU time each
// such call takes here is measured first, twice per kind, in a sandbox
// like cfg whose CPU budget cannot bind (a minute, above every call's
// timeout), which also checks that each kind ends as the soak expects
// with CPU time out of the way; the soak's budget is then soakCPUMargin
// times the largest measurement, and at least soakMinCPU. That keeps the
// CPU budget from being the binding limit for those calls, whatever the
// machine, while the busy loop, which never ends by itself, must still
// be killed for CPU time.
func soakCPUBudget(t *testing.T, cfg SandboxConfig, callers int) time.Duration {
	t.Helper()
	cal := cfg
	cal.CallCPUTime, cal.CPUTime = time.Minute, time.Minute
	sb := soakSandbox(t, cal)
	defer sb.Close()
	corpus := soakCorpus(sb.Isolation().PrivateFS, soakTimeout(soakMinCPU))
	type job struct{ k, n int }
	var jobs []job
	for k, kind := range corpus {
		if !kind.cpuKill {
			jobs = append(jobs, job{k, 0}, job{k, 1})
		}
	}
	var mu sync.Mutex
	var most time.Duration
	var wg sync.WaitGroup
	next := make(chan job)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				kind := corpus[j.k]
				ctx, cancel := context.WithTimeout(context.Background(), kind.timeout+2*time.Minute)
				r, err := sb.Execute(ctx, ExecRequest{Code: fmt.Sprintf(kind.code, j.n), Timeout: kind.timeout})
				cancel()
				mu.Lock()
				if assert.NoError(t, err, kind.name) {
					assert.True(t, kind.ok(r, j.n, sb), "%s without a binding CPU budget: %s %q %q %q %+v",
						kind.name, r.Status, trim(r.Stdout), trim(r.Stderr), r.Message, r.Usage)
					most = max(most, r.Usage.CPUTime)
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	budget := max(soakMinCPU, soakCPUMargin*most).Round(10 * time.Millisecond)
	t.Logf("calls not meant to meet the CPU budget used at most %v of CPU time here: CPU budget per call %v",
		most.Round(time.Millisecond), budget)
	return budget
}

// envInt reads a positive integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	require.Positive(t, v, name)
	return v
}

// hostSnapshot is what the soak checks for leaks: the test process's own
// memory, goroutines and descriptors, the mounts it sees, and the
// sandbox's traces in the host's temporary directory.
type hostSnapshot struct {
	heap       uint64 // live Go heap after a collection
	rss        int64  // VmRSS
	goroutines int
	fds        int
	mounts     []string
	temp       []string // the entries of os.TempDir()
}

func takeSnapshot(t *testing.T) hostSnapshot {
	t.Helper()
	// Collect, and return freed pages to the system, so that RSS shows
	// what is live rather than what the runtime kept for later.
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := hostSnapshot{heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine()}
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			s.rss, err = parseKB(rest)
			require.NoError(t, err)
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	s.fds = len(fds)
	mi, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	for line := range strings.SplitSeq(strings.TrimSpace(string(mi)), "\n") {
		// Mount ids change; what is mounted where must not.
		if f := strings.Fields(line); len(f) > 4 {
			s.mounts = append(s.mounts, strings.Join(f[3:], " "))
		}
	}
	slices.Sort(s.mounts)
	entries, err := os.ReadDir(os.TempDir())
	require.NoError(t, err)
	for _, e := range entries {
		s.temp = append(s.temp, e.Name())
	}
	return s
}

// TestSandboxSoak runs a mixed benign and hostile corpus (soakCorpus)
// from many concurrent callers through one sandbox, checks every result,
// and then that nothing leaked: no process below the test process, no
// mount, no temporary file or directory, no cgroup, no descriptor or
// goroutine, and the test process's memory flat.
//
// By default it is short (54 calls, 8 callers, 2 workers: a few seconds).
// AGENTRL_SOAK=1 runs the long version and logs the figures recorded in
// docs/benchmarks.md; AGENTRL_SOAK_CALLS (default 3000),
// AGENTRL_SOAK_CALLERS (16) and AGENTRL_SOAK_WORKERS (4) size it;
// AGENTRL_SOAK_BUDGET (auto, cgroup2, cgroup1 or watchdog) and
// AGENTRL_SOAK_ISOLATION (auto or rlimits) choose the sandbox, for the
// short run too:
//
//	AGENTRL_SOAK=1 go test -run TestSandboxSoak -v -timeout 30m ./tool/
func TestSandboxSoak(t *testing.T) {
	long := os.Getenv("AGENTRL_SOAK") == "1"
	calls, callers, workers := 54, 8, 2
	if long {
		calls = envInt(t, "AGENTRL_SOAK_CALLS", 3000)
		callers = envInt(t, "AGENTRL_SOAK_CALLERS", 16)
		workers = envInt(t, "AGENTRL_SOAK_WORKERS", 4)
	} else if testing.Short() {
		calls = 18
	}
	mech := BudgetAuto
	if name := os.Getenv("AGENTRL_SOAK_BUDGET"); name != "" {
		i := slices.IndexFunc([]BudgetMechanism{BudgetAuto, BudgetCgroup2, BudgetCgroup1, BudgetWatchdog},
			func(m BudgetMechanism) bool { return m.String() == name })
		require.GreaterOrEqual(t, i, 0, "AGENTRL_SOAK_BUDGET=%q", name)
		mech = BudgetMechanism(i)
	}
	iso := IsolationAuto
	switch name := os.Getenv("AGENTRL_SOAK_ISOLATION"); name {
	case "", "auto":
	case "rlimits":
		iso = IsolationRlimitsOnly
	default:
		t.Fatalf("AGENTRL_SOAK_ISOLATION=%q, want auto or rlimits", name)
	}
	cfg := SandboxConfig{
		Isolation: iso,
		Workers:   workers, Timeout: 500 * time.Millisecond, CallCPUTime: soakMinCPU,
		// RLIMIT_NPROC counts every process of the uid the code runs as,
		// across workers (nobody's, when started by root): it is set
		// well above the per-call budget, which is what the fork bursts
		// must meet.
		MemoryBytes: 512 << 20, CallMemoryBytes: 128 << 20, MaxProcesses: 1024, CallProcesses: 32,
		BudgetMechanism: mech,
	}

	// The sandbox's temporary files go to a folder of the test's own, so
	// that the leak check below sees what this sandbox leaves and nothing
	// that other processes (other packages' tests, run at the same time
	// by go test ./...) create in the host's temporary directory.
	// Open to all, sticky, as /tmp is: a sandbox started by root hands
	// its working directory there to nobody.
	tmp := t.TempDir()
	require.NoError(t, os.Chmod(tmp, 0o777|os.ModeSticky))
	t.Setenv("TMPDIR", tmp)
	before := takeSnapshot(t)
	cfg.CallCPUTime = soakCPUBudget(t, cfg, callers)
	// Each process's RLIMIT_CPU above the call's budget, so that the
	// busy loop (one process) meets the call's budget.
	cfg.CPUTime = 2 * cfg.CallCPUTime
	sb := soakSandbox(t, cfg)
	closed := false
	defer func() {
		if !closed {
			sb.Close()
		}
	}()
	cgroupDirs := slicesClone(sb.budget.dirs)
	corpus := soakCorpus(sb.Isolation().PrivateFS, soakTimeout(cfg.CallCPUTime))
	t.Logf("isolation %s, budget %+v", sb.Isolation().Level, sb.Isolation().Budget)

	// Each result is checked and tallied as it comes, and dropped: the
	// test process keeps a few numbers per call, not its output.
	var mu sync.Mutex
	var latencies []time.Duration
	byKind := make([][]time.Duration, len(corpus))
	statuses := map[ExecStatus]int{}
	usage := map[string]int{}
	bad := map[string][]string{}
	record := func(k, n int, r ExecResult, err error, latency time.Duration) {
		name := corpus[k].name
		mu.Lock()
		defer mu.Unlock()
		latencies = append(latencies, latency)
		byKind[k] = append(byKind[k], r.Duration)
		if err != nil {
			bad[name] = append(bad[name], err.Error())
			return
		}
		statuses[r.Status]++
		for key, on := range map[string]bool{"killed_for_memory": r.Usage.KilledForMemory, "killed_for_cpu": r.Usage.KilledForCPU,
			"killed_for_processes": r.Usage.KilledForProcesses, "process_limit": r.Usage.ProcessLimit} {
			if on {
				usage[key]++
			}
		}
		if !corpus[k].ok(r, n, sb) {
			bad[name] = append(bad[name], fmt.Sprintf("call %d: %s %q %q %q %+v", n, r.Status, trim(r.Stdout), trim(r.Stderr), r.Message, r.Usage))
		}
	}
	// round runs calls [from, to) from the callers, concurrently.
	round := func(from, to int) {
		jobs := make(chan int)
		var wg sync.WaitGroup
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range jobs {
					k := n % len(corpus)
					ctx, cancel := context.WithTimeout(context.Background(), corpus[k].timeout+2*time.Minute)
					t0 := time.Now()
					res, err := sb.Execute(ctx, ExecRequest{Code: fmt.Sprintf(corpus[k].code, n), Timeout: corpus[k].timeout})
					cancel()
					record(k, n, res, err, time.Since(t0))
				}
			}()
		}
		for n := from; n < to; n++ {
			jobs <- n
		}
		close(jobs)
		wg.Wait()
	}
	// The first tenth of the calls (two rounds of the corpus at least)
	// warms the pool and the Go runtime up — the callers' stacks, the
	// buffers that output of each size needs: the memory baseline is
	// taken after it, and the rest must leave memory where it was.
	start := time.Now()
	warmCalls := min(max(calls/10, 2*len(corpus)), calls)
	round(0, warmCalls)
	warm := takeSnapshot(t)
	round(warmCalls, calls)
	elapsed := time.Since(start)

	for kind, list := range bad {
		t.Errorf("%s: %d unexpected results, e.g. %v", kind, len(list), list[:min(3, len(list))])
	}
	slices.Sort(latencies)
	pct := func(p float64) time.Duration { return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))] }
	t.Logf("%d calls from %d callers on %d workers in %v: %.1f calls/s, latency p50 %v, p99 %v, max %v",
		calls, callers, workers, elapsed.Round(time.Millisecond), float64(calls)/elapsed.Seconds(),
		pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	t.Logf("statuses %v; budget kills and refusals %v", statuses, usage)
	var medians []string
	for i, d := range byKind {
		if len(d) > 0 {
			slices.Sort(d)
			medians = append(medians, fmt.Sprintf("%s %v", corpus[i].name, d[len(d)/2].Round(10*time.Microsecond)))
		}
	}
	t.Logf("median run time by kind (the sandbox's Duration): %s", strings.Join(medians, ", "))

	// The pool still answers, with nothing left but idle workers.
	assertHealthy(t, sb)
	after := takeSnapshot(t)
	require.NoError(t, sb.Close())
	closed = true
	final := takeSnapshot(t)
	t.Logf("test process: heap %.1f → %.1f MiB, RSS %.1f → %.1f MiB, goroutines %d → %d, descriptors %d → %d (after the warm-up → after the calls)",
		mib(warm.heap), mib(after.heap), mib(uint64(warm.rss)), mib(uint64(after.rss)), warm.goroutines, after.goroutines, warm.fds, after.fds)

	assert.Empty(t, descendants(os.Getpid()), "processes left after Close")
	assert.Equal(t, before.mounts, final.mounts, "mounts changed")
	assert.Equal(t, before.temp, final.temp, "temporary files left")
	for _, d := range cgroupDirs {
		assert.NoDirExists(t, d, "cgroup left")
	}
	// Descriptors and goroutines return to where they were once the
	// workers are gone (a leaked pidfd or monitor shows here).
	assert.Equal(t, before.fds, final.fds, "descriptors leaked")
	assert.LessOrEqual(t, final.goroutines, before.goroutines, "goroutines leaked")
	// Memory flat: each call allocates a few KiB of Go objects (frames,
	// output, result); a leak of a single 1 KiB object per call after the
	// warm-up would grow the heap by 1 KiB × calls (2.6 MiB over the 2700
	// calls after a 3000-call run's warm-up), so the tolerance is half of
	// that, at least 2 MiB so that the short run's noise (the collector's
	// pacing, sync.Pool) passes. RSS, with freed
	// pages returned, may hold 16 MiB more: the runtime's own structures
	// and the stacks of callers that grew while calls were in flight.
	heapTol := max(uint64(calls-warmCalls)<<10/2, 2<<20)
	assert.LessOrEqual(t, after.heap, warm.heap+heapTol, "Go heap grew: %d → %d bytes", warm.heap, after.heap)
	assert.LessOrEqual(t, after.rss, warm.rss+int64(heapTol)+16<<20, "RSS grew: %d → %d bytes", warm.rss, after.rss)
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
