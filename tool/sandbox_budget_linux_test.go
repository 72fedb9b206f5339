//go:build linux

package tool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// budgetSandbox starts a sandbox with cfg's budget mechanism forced,
// skipping the test when the mechanism does not work here. When the test
// ends it closes the sandbox and checks that no cgroup directory of it is
// left.
func budgetSandbox(t *testing.T, cfg SandboxConfig) *Sandbox {
	t.Helper()
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = 512 << 20
	}
	sb, err := NewSandbox(context.Background(), cfg)
	if errors.Is(err, ErrNoPython) {
		t.Skipf("no python3 interpreter: %v", err)
	}
	if errors.Is(err, ErrBudgetUnavailable) {
		t.Skipf("%v is not available here: %v", cfg.BudgetMechanism, err)
	}
	require.NoError(t, err)
	require.Equal(t, cfg.BudgetMechanism.String(), sb.Isolation().Budget.Mechanism)
	dirs := slicesClone(sb.budget.dirs)
	t.Cleanup(func() {
		require.NoError(t, sb.Close())
		assert.Empty(t, descendants(os.Getpid()), "processes left behind after Close")
		for _, d := range dirs {
			assert.NoDirExists(t, d, "cgroup left behind after Close")
		}
	})
	return sb
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// forBudgets runs f in a subtest for each budget mechanism, each with its
// own sandbox; a mechanism that does not work here skips with the reason.
func forBudgets(t *testing.T, cfg SandboxConfig, f func(t *testing.T, sb *Sandbox)) {
	t.Helper()
	for _, m := range []BudgetMechanism{BudgetCgroup2, BudgetCgroup1, BudgetWatchdog} {
		t.Run(m.String(), func(t *testing.T) {
			c := cfg
			c.BudgetMechanism = m
			f(t, budgetSandbox(t, c))
		})
	}
}

// lastMonitor records the monitor of each call on sb, for the tests to
// read what it saw (its samples' span, above all).
func lastMonitor(sb *Sandbox) func() *callMonitor {
	var mu sync.Mutex
	var last *callMonitor
	sb.monitored = func(m *callMonitor) {
		mu.Lock()
		last = m
		mu.Unlock()
	}
	return func() *callMonitor {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// touchRatePerCPU bounds how fast one CPU can fill fresh anonymous memory:
// page faults on 4 KiB pages with a memset behind them. Python's
// b'x' * n runs at ≈ 1.7 GB/s on this project's machines; 4 GiB/s leaves
// more than twice that for faster hosts.
const touchRatePerCPU = 4 << 30

// cgroupForceSlack bounds how far a cgroup's recorded peak may pass its
// limit: the kernel lets a task that is already dying (SIGKILL pending,
// or the OOM victim) finish the charge it is making, so that it can exit.
// Each process has at most one charge in flight: a transparent huge page
// (2 MiB) or a batch of 64 pages (256 KiB), 2.25 MiB at most.
func cgroupForceSlack(procs int) int64 { return int64(procs) * (2<<20 + 64<<12) }

// TestBudgetMemory: the call's processes together are bounded by
// CallMemoryBytes, however the memory is spread among them; the call is
// killed, says so, the host never saw much more than the budget, and the
// pool answers afterwards.
func TestBudgetMemory(t *testing.T) {
	const budget = 256 << 20
	cases := []struct {
		name, code string
		procs      int   // most processes holding memory at once
		step       int64 // bytes a process touches in one go
		period     time.Duration
	}{
		{
			// Eight children each touch 200 MiB: 1.6 GiB in all, each far
			// under its own RLIMIT_AS (512 MiB).
			name: "multi-process hog",
			code: `
import os, time
kids = []
for i in range(8):
    pid = os.fork()
    if pid == 0:
        x = b'x' * (200 << 20)
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
print('all children done')`,
			procs: 9, step: 200 << 20,
		},
		{
			// 10 MiB every 50 ms until killed.
			name: "slow leak",
			code: `
import time
leak = []
while True:
    leak.append(b'x' * (10 << 20))
    time.sleep(0.05)`,
			procs: 1, step: 10 << 20, period: 50 * time.Millisecond,
		},
		{
			// The leak runs in a grandchild in its own session, whose
			// parent has exited: it is no child of the call's main
			// process, and no member of its process group.
			name: "double fork and setsid",
			code: `
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        leak = []
        while True:
            leak.append(b'x' * (10 << 20))
            time.sleep(0.05)
    os._exit(0)
time.sleep(30)`,
			procs: 1, step: 10 << 20, period: 50 * time.Millisecond,
		},
	}
	for _, iso := range []IsolationMode{IsolationAuto, IsolationRlimitsOnly} {
		if iso == IsolationRlimitsOnly && testing.Short() {
			continue
		}
		name := map[IsolationMode]string{IsolationAuto: "auto", IsolationRlimitsOnly: "rlimits"}[iso]
		t.Run(name, func(t *testing.T) {
			forBudgets(t, SandboxConfig{Timeout: 20 * time.Second, CallMemoryBytes: budget, Isolation: iso}, func(t *testing.T, sb *Sandbox) {
				monitor := lastMonitor(sb)
				for _, c := range cases {
					t.Run(c.name, func(t *testing.T) {
						start := time.Now()
						res := run(t, sb, c.code)
						elapsed := time.Since(start)
						m := monitor()
						t.Logf("%v: peak %d MiB, %d samples, longest span %v, CPU %v, in %v", sb.Isolation().Budget.Mechanism,
							res.Usage.PeakMemoryBytes>>20, m.samples, m.maxSpan, res.Usage.CPUTime, elapsed)
						assert.Equal(t, StatusMemoryLimit, res.Status, "%+v", res)
						assert.True(t, res.Usage.KilledForMemory)
						assert.Contains(t, res.Message, "memory limit exceeded")
						assert.Contains(t, res.Message, "256 MiB")
						assert.Less(t, elapsed, 15*time.Second, "killed long before the 20 s timeout")
						assert.Positive(t, res.Usage.PeakMemoryBytes)
						slack := cgroupForceSlack(c.procs)
						if sb.budget.mech == BudgetWatchdog {
							// The watchdog's peak is a sample. The one before it
							// was under the budget, and between the start of
							// that sample and the end of this one (the span)
							// the call's processes can touch at most what
							// their CPUs touch in that time — and, for a call
							// that touches one step per period, at most the
							// steps that start within the span.
							cpus := min(runtime.NumCPU(), c.procs)
							slack = int64(float64(cpus*touchRatePerCPU) * m.maxSpan.Seconds())
							if c.period > 0 {
								slack = min(slack, c.step*(1+int64(m.maxSpan/c.period)))
							}
						}
						assert.LessOrEqual(t, res.Usage.PeakMemoryBytes, int64(budget)+slack,
							"peak %d MiB over the budget %d MiB + slack %d MiB", res.Usage.PeakMemoryBytes>>20, budget>>20, slack>>20)
						assertHealthy(t, sb)
					})
				}
			})
		})
	}
}

// TestBudgetProcesses: a burst of children stops at CallProcesses: under
// cgroups the fork that would pass it fails, under the watchdog the call
// is killed once it is seen past it; either way the result says so and
// the pool answers.
func TestBudgetProcesses(t *testing.T) {
	const limit = 16
	// Forks one child every 5 ms, up to 40, each sleeping; reports the
	// first refused fork, then waits.
	code := `
import os, time
n = 0
for i in range(40):
    try:
        pid = os.fork()
    except OSError as e:
        print('refused after', n, 'children', flush=True)
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
    time.sleep(0.005)
time.sleep(1)
print('done', n)`
	// RLIMIT_NPROC counts every process of the user the code runs as
	// (without a user namespace, across the host): set far above the
	// budget, so that the budget is what the burst meets.
	forBudgets(t, SandboxConfig{Timeout: 10 * time.Second, CallProcesses: limit, MaxProcesses: 4096}, func(t *testing.T, sb *Sandbox) {
		res := run(t, sb, code)
		t.Logf("%+v", res.Usage)
		assert.True(t, res.Usage.ProcessLimit, "%+v", res)
		assert.Contains(t, res.Message, fmt.Sprintf("%d processes", limit))
		if sb.budget.pidsControlled() {
			// The main process and 15 children make 16: the 16th fork fails.
			assert.Equal(t, StatusOK, res.Status, "%+v", res)
			assert.Equal(t, "refused after 15 children\ndone 15\n", res.Stdout)
			assert.False(t, res.Usage.KilledForProcesses)
			assert.LessOrEqual(t, res.Usage.PeakProcesses, limit)
		} else {
			// Seen with more than 16, killed: one fork every 5 ms at most
			// passes the limit between two samples.
			assert.Equal(t, StatusSignaled, res.Status, "%+v", res)
			assert.True(t, res.Usage.KilledForProcesses)
			assert.Greater(t, res.Usage.PeakProcesses, limit)
			assert.NotContains(t, res.Stdout, "done")
		}
		assertHealthy(t, sb)
	})
}

// TestBudgetCPU: busy loops in four processes together pass CallCPUTime
// long before any of them reaches its own RLIMIT_CPU or the timeout; the
// call is killed for CPU and the pool answers.
func TestBudgetCPU(t *testing.T) {
	const budget = 500 * time.Millisecond
	code := `
import os
for i in range(3):
    if os.fork() == 0:
        break
while True:
    pass`
	forBudgets(t, SandboxConfig{Timeout: 20 * time.Second, CallCPUTime: budget}, func(t *testing.T, sb *Sandbox) {
		monitor := lastMonitor(sb)
		start := time.Now()
		res := run(t, sb, code)
		elapsed := time.Since(start)
		t.Logf("%+v in %v", res.Usage, elapsed)
		assert.Equal(t, StatusSignaled, res.Status, "%+v", res)
		assert.Equal(t, "SIGKILL", res.Signal)
		assert.True(t, res.Usage.KilledForCPU)
		assert.Contains(t, res.Message, "CPU time limit exceeded")
		assert.Less(t, elapsed, 15*time.Second, "killed before the 20 s timeout")
		// Killed once a sample saw more than the budget; the four
		// processes cannot use more than the CPUs in the sample's span and
		// until the kill lands (counted generously as one more second).
		assert.GreaterOrEqual(t, res.Usage.CPUTime, budget)
		m := monitor()
		most := budget + time.Duration(min(runtime.NumCPU(), 4))*(m.maxSpan+time.Second)
		assert.LessOrEqual(t, res.Usage.CPUTime, most)
		assertHealthy(t, sb)
	})
}

// TestBudgetBenignCallsPass: calls well within their budget pass under
// every mechanism, and report what they used.
func TestBudgetBenignCallsPass(t *testing.T) {
	forBudgets(t, SandboxConfig{CallMemoryBytes: 128 << 20, CallProcesses: 48, CallCPUTime: 5 * time.Second}, func(t *testing.T, sb *Sandbox) {
		// Forty forked interpreters share their parent's pages: each
		// shows several MiB of RssAnon (more than 128 MiB in all), but
		// together they add little, and the budget must see that. The
		// children wait on a pipe that the parent closes half a second
		// after the last fork, so that all of them are alive together
		// however slowly a loaded machine forks them (a fixed sleep in
		// each child let the first ones exit before the last were
		// made, and a poll then saw fewer than 41).
		res := run(t, sb, `
import os, time
r, w = os.pipe()
kids = []
for i in range(40):
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    kids.append(pid)
time.sleep(0.5)
os.close(w)
for pid in kids:
    os.waitpid(pid, 0)
print(len(kids))`)
		require.Equal(t, StatusOK, res.Status, "%+v", res)
		assert.Equal(t, "40\n", res.Stdout)
		assert.False(t, res.Usage.KilledForMemory)
		assert.GreaterOrEqual(t, res.Usage.PeakProcesses, 41, "forty children and their parent were seen")
		t.Logf("forty forks: %+v", res.Usage)

		res = run(t, sb, `
import os, time
x = b'x' * (32 << 20)
kids = [os.fork() for _ in range(1)]
if kids[0] == 0:
    y = b'y' * (16 << 20)
    os._exit(0)
os.waitpid(kids[0], 0)
t = time.process_time()
while time.process_time() - t < 0.1:
    pass
print(len(x))`)
		require.Equal(t, StatusOK, res.Status, "%+v", res)
		assert.Equal(t, fmt.Sprintf("%d\n", 32<<20), res.Stdout)
		assert.Equal(t, CallUsage{}, CallUsage{
			KilledForMemory: res.Usage.KilledForMemory, KilledForCPU: res.Usage.KilledForCPU,
			ProcessLimit: res.Usage.ProcessLimit, KilledForProcesses: res.Usage.KilledForProcesses,
		})
		// The loop alone burns 0.1 s of CPU.
		assert.GreaterOrEqual(t, res.Usage.CPUTime, 100*time.Millisecond)
		assert.Empty(t, res.Message)
	})
}

// TestBudgetIsolationReport: the mechanism in force and the limits are in
// the isolation metadata of the sandbox and of every result.
func TestBudgetIsolationReport(t *testing.T) {
	cfg := SandboxConfig{CallMemoryBytes: 300 << 20, CallProcesses: 20, CallCPUTime: 3 * time.Second}
	forBudgets(t, cfg, func(t *testing.T, sb *Sandbox) {
		b := sb.Isolation().Budget
		assert.Equal(t, int64(300<<20), b.MemoryBytes)
		assert.Equal(t, 20, b.Processes)
		assert.Equal(t, 3*time.Second, b.CPUTime)
		if b.Mechanism == "watchdog" {
			assert.Contains(t, b.Reason, "SandboxConfig.BudgetMechanism")
		}
		res := run(t, sb, "print(1)")
		assert.Equal(t, sb.Isolation(), res.Isolation)
	})
	// Auto picks the first that works, and says why it passed over the
	// others.
	sb := newTestSandbox(t, SandboxConfig{})
	b := sb.Isolation().Budget
	t.Logf("auto: %+v", b)
	assert.Contains(t, []string{"cgroup2", "cgroup1", "watchdog"}, b.Mechanism)
	if b.Mechanism != "cgroup2" {
		assert.Contains(t, b.Reason, "cgroup2 unavailable")
	}
}

// TestBudgetUnavailable: forcing a cgroup mechanism under a cgroup that
// does not exist fails with ErrBudgetUnavailable, naming what failed.
func TestBudgetUnavailable(t *testing.T) {
	for _, m := range []BudgetMechanism{BudgetCgroup2, BudgetCgroup1} {
		_, err := NewSandbox(context.Background(), SandboxConfig{Workers: 1, BudgetMechanism: m, CgroupParent: "/agentrl-no-such-cgroup/x"})
		if errors.Is(err, ErrNoPython) {
			t.Skip(err)
		}
		require.ErrorIs(t, err, ErrBudgetUnavailable, "%v", m)
		assert.Contains(t, err.Error(), m.String())
	}
}

// TestBudgetCgroupCleanup: a worker's cgroup goes with the worker, the
// sandbox's with Close, and a sandbox of a process that died without
// closing is removed by the next sandbox under the same parent.
func TestBudgetCgroupCleanup(t *testing.T) {
	for _, m := range []BudgetMechanism{BudgetCgroup2, BudgetCgroup1} {
		t.Run(m.String(), func(t *testing.T) {
			sb := budgetSandbox(t, SandboxConfig{Workers: 2, BudgetMechanism: m, MaxCallsPerWorker: 1})
			parent := filepath.Dir(sb.budget.dirs[0])
			// Each call recycles its worker: the old cgroup must go.
			for range 4 {
				require.Equal(t, StatusOK, run(t, sb, "print(1)").Status)
			}
			assertHealthy(t, sb)
			waitPoolReady(sb) // the last call's worker is replaced in the background
			groups := func() []string {
				e, err := os.ReadDir(sb.budget.dirs[0])
				require.NoError(t, err)
				var out []string
				for _, d := range e {
					if d.IsDir() {
						out = append(out, d.Name())
					}
				}
				return out
			}
			assert.Len(t, groups(), 2, "one cgroup per live worker")

			// A stale sandbox cgroup of a pid that does not exist (pid_max
			// is at most 4194304).
			stale := filepath.Join(parent, "agentrl-4194305-0000")
			require.NoError(t, os.Mkdir(stale, 0o755))
			require.NoError(t, os.Mkdir(filepath.Join(stale, "w1"), 0o755))
			other, err := NewSandbox(context.Background(), SandboxConfig{Workers: 1, BudgetMechanism: m})
			require.NoError(t, err)
			assert.NoDirExists(t, stale, "a dead process's cgroup is removed")
			otherDirs := slicesClone(other.budget.dirs)
			require.NoError(t, other.Close())
			for _, d := range otherDirs {
				assert.NoDirExists(t, d)
			}
		})
	}
}

// TestCodeInterpreterBudget: the model reads why its code was killed.
func TestCodeInterpreterBudget(t *testing.T) {
	ci, err := NewCodeInterpreter(SandboxConfig{Workers: 1, Timeout: 10 * time.Second, CallMemoryBytes: 128 << 20, MemoryBytes: 512 << 20, MaxProcesses: 4096})
	if errors.Is(err, ErrNoPython) {
		t.Skip(err)
	}
	require.NoError(t, err)
	defer ci.Close()
	res, err := ci.Call(context.Background(), []byte(`{"code": "import os\nfor i in range(4):\n    os.fork()\nx = b'x' * (100 << 20)\nimport time\ntime.sleep(5)"}`))
	require.NoError(t, err)
	assert.True(t, res.Failed)
	assert.Contains(t, res.Content, "Error: memory limit exceeded: the program's processes together used more than their budget of 128 MiB and were killed")
	assert.Equal(t, "memory_limit", res.Metadata["status"])
	assert.Equal(t, true, res.Metadata["killed_for_memory"])
	assert.NotEmpty(t, res.Metadata["budget"])
	assert.True(t, strings.HasPrefix(res.Content, "Error:") || strings.Contains(res.Content, "\nError:"))
}
