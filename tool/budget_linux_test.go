//go:build linux

package tool

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCgroup2Files runs a cgroup v2 worker group against a directory of
// plain files standing in for cgroupfs, where no kernel offers cgroup v2
// with controllers (this project's machines mount v1 memory and pids): the
// group writes the limits the plan holds, moves a process by writing
// cgroup.procs, kills through cgroup.kill, and reads its counters from
// memory.events, cpu.stat, pids.current and pids.events.
func TestCgroup2Files(t *testing.T) {
	sandboxDir := t.TempDir()
	p := &budgetPlan{
		mech:   BudgetCgroup2,
		limits: callLimits{memory: 256 << 20, procs: 16, cpu: time.Second},
		v2Dir:  sandboxDir, v2Path: "/agentrl.slice/agentrl-1-ab",
	}
	g, err := p.newGroup()
	require.NoError(t, err)
	dir := filepath.Join(sandboxDir, "w1")
	assert.Equal(t, []string{dir}, g.dirs)
	assert.Equal(t, "/agentrl.slice/agentrl-1-ab/w1", g.path)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		return string(b)
	}
	assert.Equal(t, "268435456", read("memory.max"))
	assert.Equal(t, "16", read("pids.max"))
	assert.Equal(t, "1", read("memory.oom.group"))
	assert.NoFileExists(t, filepath.Join(dir, "memory.swap.max"), "written only where the kernel has swap accounting")

	require.NoError(t, g.place(4242))
	assert.Equal(t, "4242", read("cgroup.procs"))

	// 3 OOM kills, one of them of the whole group; 1.5 s of CPU; 7
	// processes; 2 refused forks; 100 MiB in use.
	for name, text := range map[string]string{
		"memory.events":  "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 1\n",
		"cpu.stat":       "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n",
		"pids.current":   "7\n",
		"pids.events":    "max 2\n",
		"memory.current": "104857600\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	s := p.sample(os.Getpid(), g, true)
	assert.Equal(t, int64(3), s.ooms)
	assert.Equal(t, 1500*time.Millisecond, s.cpu)
	assert.Equal(t, 7, s.procs)
	assert.Equal(t, int64(2), s.refusals)
	assert.Equal(t, int64(100<<20), s.memory)

	// No per-call peak (memory.peak is not writable here): -1, and the
	// monitor's samples stand in.
	g.resetPeak()
	assert.Equal(t, int64(-1), g.peakMemory())

	g.kill()
	assert.Equal(t, "1", read("cgroup.kill"))

	// A plan without a memory budget leaves memory.max at "max".
	p.limits.memory = 0
	g2, err := p.newGroup()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(sandboxDir, "w2", "memory.max"))
	require.NoError(t, err)
	assert.Equal(t, "max", string(b))
	_ = g2
}

// TestMonitorCheck: which budget a sample breaks, for each way the
// mechanisms measure.
func TestMonitorCheck(t *testing.T) {
	lim := callLimits{memory: 100, procs: 10, cpu: time.Second}
	cgroup := &callGroup{primary: "/sys/fs/cgroup/x", pidsDir: "/sys/fs/cgroup/x"}
	cgroupNoPids := &callGroup{primary: "/sys/fs/cgroup/x"}
	base := budgetSample{cpu: 2 * time.Second, ooms: 5, refusals: 1, memory: -1}
	cases := []struct {
		name    string
		group   *callGroup
		s       budgetSample
		want    int32
		refused bool
	}{
		{"cgroup, under every budget", cgroup, budgetSample{cpu: 2500 * time.Millisecond, ooms: 5, refusals: 1, procs: 10, memory: -1}, verdictNone, false},
		{"cgroup, the kernel killed for memory", cgroup, budgetSample{cpu: 2 * time.Second, ooms: 6, refusals: 1, memory: -1}, verdictMemory, false},
		{"cgroup, memory level is not the test", cgroup, budgetSample{cpu: 2 * time.Second, ooms: 5, refusals: 1, memory: 1000}, verdictNone, false},
		{"cgroup, CPU over by a little", cgroup, budgetSample{cpu: 3*time.Second + 1, ooms: 5, refusals: 1, memory: -1}, verdictCPU, false},
		{"cgroup, CPU exactly at the budget", cgroup, budgetSample{cpu: 3 * time.Second, ooms: 5, refusals: 1, memory: -1}, verdictNone, false},
		{"cgroup, a fork refused", cgroup, budgetSample{cpu: 2 * time.Second, ooms: 5, refusals: 2, procs: 10, memory: -1}, verdictNone, true},
		{"cgroup, more processes than the budget are the controller's", cgroup, budgetSample{cpu: 2 * time.Second, ooms: 5, refusals: 1, procs: 11, memory: -1}, verdictNone, false},
		{"cgroup without pids, too many processes", cgroupNoPids, budgetSample{cpu: 2 * time.Second, ooms: 5, procs: 11, memory: -1}, verdictProcesses, false},
		{"watchdog, memory over", nil, budgetSample{cpu: 2 * time.Second, memory: 101}, verdictMemory, false},
		{"watchdog, memory at the budget", nil, budgetSample{cpu: 2 * time.Second, memory: 100}, verdictNone, false},
		{"watchdog, too many processes", nil, budgetSample{cpu: 2 * time.Second, procs: 11, memory: 1}, verdictProcesses, false},
		{"memory before CPU", nil, budgetSample{cpu: 9 * time.Second, memory: 101}, verdictMemory, false},
	}
	for _, c := range cases {
		m := &callMonitor{plan: &budgetPlan{limits: lim}, group: c.group, base: base}
		assert.Equal(t, c.want, m.check(c.s), c.name)
		assert.Equal(t, c.refused, m.refused, c.name)
	}
}

// TestSampleTreeCountsTheCall: the watchdog's walk from an idle worker
// finds the child it forked for its next call, with its thread and
// memory, whether the kernel lists children or /proc is scanned.
func TestSampleTreeCountsTheCall(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Workers: 1, BudgetMechanism: BudgetWatchdog, Isolation: IsolationRlimitsOnly})
	w := <-sb.slots
	defer func() { sb.slots <- w }()
	worker := w.cmd.Process.Pid
	s, err := sampleTree(worker, sb.budget.childrenFile, true)
	require.NoError(t, err)
	// An idle worker has one process below it: the child forked for the
	// next call, one thread, holding some memory of its own.
	require.Len(t, s.procs, 1)
	assert.Equal(t, w.child.pid, s.procs[0].pid)
	assert.Equal(t, 1, s.threads)
	assert.Positive(t, s.memory)
	// The same with /proc scanned for parents, as on kernels without the
	// children files.
	s2, err := sampleTree(worker, false, true)
	require.NoError(t, err)
	require.Len(t, s2.procs, 1)
	assert.Equal(t, s.procs[0].pid, s2.procs[0].pid)
}

// BenchmarkBudgetOverhead times what the call budget adds to the critical
// path of a call that ends within one poll interval: checking the idle
// child, starting the monitor, and the final sample (by mechanism: the
// cgroup's counter files, or the watchdog's walk of the tree).
func BenchmarkBudgetOverhead(b *testing.B) {
	for _, m := range []BudgetMechanism{BudgetCgroup2, BudgetCgroup1, BudgetWatchdog} {
		b.Run(m.String(), func(b *testing.B) {
			sb, err := NewSandbox(context.Background(), SandboxConfig{Workers: 1, BudgetMechanism: m})
			if err != nil {
				b.Skip(err)
			}
			defer sb.Close()
			w := <-sb.slots
			defer func() { sb.slots <- w }()
			pid := w.cmd.Process.Pid
			b.ResetTimer()
			for range b.N {
				if !w.childAlive() {
					b.Fatal("the idle child is gone")
				}
				sb.budget.startMonitor(pid, w.group, w.child, w.base).finish()
			}
		})
	}
}
