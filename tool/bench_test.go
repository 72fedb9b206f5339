//go:build linux

package tool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentrl/agentrl/internal/cputime"
)

// procCPU is a running process's CPU time plus that of the children it
// reaped (a worker and every snippet it forked), from /proc/pid/stat.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
		var v int64
		fmt.Sscan(f[i], &v)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// poolCPU is the CPU time of this process and of the sandbox's workers.
func poolCPU(sb *Sandbox) time.Duration {
	d := cputime.WithChildren()
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for w := range sb.live {
		d += procCPU(w.cmd.Process.Pid)
	}
	return d
}

// Benchmark snippets: a trivial print, and 50 ms of CPU time measured by
// the process's own CPU clock (so the work is the same on any machine).
const (
	benchPrint = "print(1+1)"
	benchCPU   = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.05:\n    pass\nprint('done')"
)

// BenchmarkSandbox compares a pooled worker (with namespaces, and with
// rlimits only) against starting a fresh `python3 -I -c` per execution,
// the cheapest fresh-process approach (no isolation at all). The time per
// op of a pool is the round trip of one call to a ready worker (what a
// caller waits for); exec/s is what one worker sustains back to back,
// clean-up after each call and the fork of its next child included; and
// cpu-ms/exec is the CPU time each execution costs, workers, children and
// the Go side included. Wall-clock numbers follow the machine's load; CPU
// time much less so. Run with
//
//	go test -run x -bench Sandbox -benchtime 100x ./tool/
func BenchmarkSandbox(b *testing.B) {
	for _, snippet := range []struct{ name, code string }{{"print", benchPrint}, {"cpu50ms", benchCPU}} {
		for _, mode := range []struct {
			name string
			iso  IsolationMode
		}{{"pool-namespaces", IsolationRequireNamespaces}, {"pool-rlimits", IsolationRlimitsOnly}} {
			b.Run(snippet.name+"/"+mode.name, func(b *testing.B) {
				sb, err := NewSandbox(context.Background(), SandboxConfig{Workers: 1, Isolation: mode.iso})
				if err != nil {
					b.Skip(err)
				}
				defer sb.Close()
				ctx := context.Background()
				cpu0 := poolCPU(sb)
				start := time.Now()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					// The worker answers first and cleans up after; the
					// time per op is the round trip of a call that finds
					// its worker ready, as a caller whose worker had a
					// moment since its last call sees it.
					b.StopTimer()
					waitPoolReady(sb)
					b.StartTimer()
					r, err := sb.Execute(ctx, ExecRequest{Code: snippet.code})
					if err != nil || r.Status != StatusOK {
						b.Fatal(err, r)
					}
				}
				b.StopTimer()
				waitPoolReady(sb)
				// Back to back, one worker serves this many calls a second:
				// the round trip plus the clean-up after it.
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "exec/s")
				b.ReportMetric(float64(poolCPU(sb)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/exec")
			})
		}
		b.Run(snippet.name+"/fresh-process", func(b *testing.B) {
			python, err := resolvePython(context.Background(), "")
			if errors.Is(err, ErrNoPython) {
				b.Skip(err)
			}
			cpu0 := cputime.WithChildren()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if out, err := exec.Command(python, "-I", "-c", snippet.code).Output(); err != nil || len(out) == 0 {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "exec/s")
			b.ReportMetric(float64(cputime.WithChildren()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/exec")
		})
	}
}

// waitPoolReady waits, blocked rather than polling (its CPU time is
// measured), until every worker of sb is back in the pool, ready for a call.
func waitPoolReady(sb *Sandbox) {
	ws := make([]*worker, sb.cfg.Workers)
	for i := range ws {
		ws[i] = <-sb.slots
	}
	for _, w := range ws {
		sb.slots <- w
	}
}

// BenchmarkSandboxParallel measures the pool's throughput with one worker
// per CPU and as many concurrent callers.
func BenchmarkSandboxParallel(b *testing.B) {
	sb, err := NewSandbox(context.Background(), SandboxConfig{})
	if err != nil {
		b.Skip(err)
	}
	defer sb.Close()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := sb.Execute(context.Background(), ExecRequest{Code: benchPrint})
			if err != nil || r.Status != StatusOK {
				b.Error(err, r)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "exec/s")
}

func BenchmarkCalculator(b *testing.B) {
	c := &Calculator{}
	for i := 0; i < b.N; i++ {
		if _, err := c.Evaluate("(123456789123456789 * 987654321987654321 + 2^100) % 1000000007 / 7"); err != nil {
			b.Fatal(err)
		}
	}
}
