//go:build linux

package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestSandbox starts a sandbox for a test, skipping the test when no
// python3 exists, and closes it (checking that no process is left) when
// the test ends.
func newTestSandbox(t testing.TB, cfg SandboxConfig) *Sandbox {
	t.Helper()
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = 512 << 20
	}
	sb, err := NewSandbox(context.Background(), cfg)
	if errors.Is(err, ErrNoPython) {
		t.Skipf("no python3 interpreter: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, sb.Close())
		assert.Empty(t, descendants(os.Getpid()), "processes left behind after Close")
	})
	return sb
}

// forModes runs f in a subtest for each isolation mode, each with its own
// sandbox, closed when the subtest ends: namespaces where the kernel
// allows them ("auto"), and rlimits only.
func forModes(t *testing.T, cfg SandboxConfig, f func(t *testing.T, sb *Sandbox)) {
	t.Helper()
	for _, mode := range []IsolationMode{IsolationAuto, IsolationRlimitsOnly} {
		name := map[IsolationMode]string{IsolationAuto: "auto", IsolationRlimitsOnly: "rlimits"}[mode]
		t.Run(name, func(t *testing.T) {
			c := cfg
			c.Isolation = mode
			f(t, newTestSandbox(t, c))
		})
	}
}

func run(t testing.TB, sb *Sandbox, code string) ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sb.Execute(ctx, ExecRequest{Code: code})
	require.NoError(t, err)
	return res
}

// assertHealthy checks that the pool still serves, and that the only
// processes the test process has below it are the pool's idle workers,
// each with at most one child: the one it forked ahead of time for its
// next call, idle until the call comes.
func assertHealthy(t *testing.T, sb *Sandbox) {
	t.Helper()
	for i := 0; i < sb.cfg.Workers+1; i++ {
		res := run(t, sb, "print(6*7)")
		require.Equal(t, StatusOK, res.Status, "pool no longer serves: %+v", res)
		require.Equal(t, "42\n", res.Stdout)
	}
	// Workers being replaced in the background may still be starting, and
	// the last call's child may still be exiting.
	deadline := time.Now().Add(5 * time.Second)
	for {
		extra := strayProcesses(sb)
		if len(extra) == 0 || time.Now().After(deadline) {
			assert.Empty(t, extra, "processes other than the idle workers and their pre-forked children: %v", describe(extra))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// strayProcesses lists the live processes below the test process other
// than sb's live workers and one child of each.
func strayProcesses(sb *Sandbox) []int {
	workers := map[int]bool{}
	sb.mu.Lock()
	for w := range sb.live {
		if !w.exited() {
			workers[w.cmd.Process.Pid] = true
		}
	}
	sb.mu.Unlock()
	parents := procParents()
	children := map[int]int{}
	var extra []int
	for _, p := range descendants(os.Getpid()) {
		if workers[p] {
			continue
		}
		if pp := parents[p]; workers[pp] && children[pp] == 0 {
			children[pp]++
			continue
		}
		extra = append(extra, p)
	}
	return extra
}

// sharesCallerUID reports that the sandbox runs code as the calling user
// on the host's file system: rlimits only, started without root.
func sharesCallerUID(sb *Sandbox) bool {
	return !sb.Isolation().PrivateFS && sb.Isolation().UID == os.Geteuid()
}

// procParents maps each live (non-zombie) process to its parent, from /proc.
func procParents() map[int]int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
	}
	return parent
}

// descendants lists the live (non-zombie) processes below pid, from /proc.
func descendants(pid int) []int {
	parent := procParents()
	var out []int
	for p := range parent {
		for q, n := parent[p], 0; q != 0 && n < 64; q, n = parent[q], n+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func describe(pids []int) []string {
	var out []string
	for _, p := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		s := strings.ReplaceAll(string(b), "\x00", " ")
		if len(s) > 60 {
			s = s[:60]
		}
		out = append(out, fmt.Sprintf("%d %q", p, s))
	}
	return out
}

// cmdlineContains reports the processes anywhere on the host whose command
// line contains marker.
func cmdlineContains(marker string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), marker) {
			st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			if !strings.Contains(string(st), ") Z ") {
				out = append(out, p)
			}
		}
	}
	return out
}

func TestSandboxRunsCode(t *testing.T) {
	forModes(t, SandboxConfig{}, func(t *testing.T, sb *Sandbox) {
		cases := []struct {
			name, code, stdin string
			files             map[string][]byte
			status            ExecStatus
			exit              int
			stdout            string
			stderrHas         string
		}{
			{name: "print", code: "print(1+1)", status: StatusOK, stdout: "2\n"},
			{name: "big int", code: "print(2**100)", status: StatusOK, stdout: "1267650600228229401496703205376\n"},
			{name: "stderr", code: "import sys\nsys.stderr.write('oops\\n')\nprint('out')", status: StatusOK, stdout: "out\n", stderrHas: "oops"},
			{name: "exception", code: "x = 1\n1/0", status: StatusError, exit: 1, stderrHas: "ZeroDivisionError: division by zero"},
			{name: "traceback shows the line", code: "def f():\n    return undefined_name\nf()", status: StatusError, exit: 1, stderrHas: "    return undefined_name"},
			{name: "syntax error", code: "print(", status: StatusError, exit: 1, stderrHas: "SyntaxError"},
			{name: "exit code", code: "import sys\nprint('a')\nsys.exit(3)", status: StatusError, exit: 3, stdout: "a\n"},
			{name: "exit zero", code: "raise SystemExit", status: StatusOK},
			{name: "stdin", code: "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))", stdin: "1 2 3\n4", status: StatusOK, stdout: "10\n"},
			{name: "input()", code: "a = input()\nprint(a[::-1])", stdin: "abc\n", status: StatusOK, stdout: "cba\n"},
			{name: "files", code: "print(open('data/in.txt').read().upper())", files: map[string][]byte{"data/in.txt": []byte("hello")}, status: StatusOK, stdout: "HELLO\n"},
			{name: "unicode", code: "print('π≈3.14159')", status: StatusOK, stdout: "π≈3.14159\n"},
			{name: "invalid utf-8 becomes U+FFFD", code: "import sys\nsys.stdout.buffer.write(b'a\\xffb')", status: StatusOK, stdout: "a\uFFFDb"},
			{name: "__name__ is __main__", code: "print(__name__)", status: StatusOK, stdout: "__main__\n"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				res, err := sb.Execute(ctx, ExecRequest{Code: c.code, Stdin: c.stdin, Files: c.files})
				require.NoError(t, err)
				assert.Equal(t, c.status, res.Status, "%+v", res)
				assert.Equal(t, c.exit, res.ExitCode)
				if c.stdout != "" || c.status == StatusOK {
					assert.Equal(t, c.stdout, res.Stdout)
				}
				assert.Contains(t, res.Stderr, c.stderrHas)
				assert.Equal(t, sb.Isolation(), res.Isolation)
			})
		}
	})
}

func TestSandboxIsolationReport(t *testing.T) {
	t.Run("rlimits", func(t *testing.T) {
		iso := newTestSandbox(t, SandboxConfig{Isolation: IsolationRlimitsOnly, Workers: 1}).Isolation()
		assert.Equal(t, IsolationRlimits, iso.Level)
		assert.False(t, iso.NoNetwork)
		assert.False(t, iso.PrivateFS)
		assert.NotEmpty(t, iso.Reason)
	})
	auto := newTestSandbox(t, SandboxConfig{Workers: 1})
	var iso Isolation
	if auto.Isolation().Level != IsolationNamespaces {
		t.Logf("namespaces unavailable here: %s", auto.Isolation().Reason)
		_, err := NewSandbox(context.Background(), SandboxConfig{Workers: 1, Isolation: IsolationRequireNamespaces})
		require.ErrorIs(t, err, ErrNamespacesUnavailable)
		return
	}
	iso = auto.Isolation()
	assert.True(t, iso.NoNetwork && iso.PrivateFS && iso.PIDNamespace, "%+v", iso)
	// The code runs as an unprivileged user, as seen from inside.
	res := run(t, auto, "import os\nprint(os.getuid() != 0 or os.getpid() == 2, os.getpid() < 10)")
	assert.Equal(t, "True True\n", res.Stdout, "%+v", res)
}

func TestSandboxNoPython(t *testing.T) {
	_, err := NewSandbox(context.Background(), SandboxConfig{Python: filepath.Join(t.TempDir(), "no-python3")})
	require.ErrorIs(t, err, ErrNoPython)
	_, err = NewCodeInterpreter(SandboxConfig{Python: filepath.Join(t.TempDir(), "no-python3")})
	require.ErrorIs(t, err, ErrNoPython)
}

func TestSandboxBadRequests(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Workers: 1, ScratchBytes: 1 << 20})
	ctx := context.Background()
	_, err := sb.Execute(ctx, ExecRequest{Code: "1", Language: "cpp"})
	require.ErrorIs(t, err, ErrUnsupportedLanguage)
	for _, name := range []string{"/etc/x", "../x", "a/../../x", ""} {
		_, err = sb.Execute(ctx, ExecRequest{Code: "1", Files: map[string][]byte{name: nil}})
		require.Error(t, err, "file name %q", name)
	}
	_, err = sb.Execute(ctx, ExecRequest{Code: "1", Timeout: -time.Second})
	require.Error(t, err)
	if sb.Isolation().PrivateFS {
		// A file larger than the scratch space fails the call, not the pool.
		res, err := sb.Execute(ctx, ExecRequest{Code: "print(1)", Files: map[string][]byte{"big": make([]byte, 2<<20)}})
		require.NoError(t, err)
		assert.Equal(t, StatusSandboxError, res.Status)
		assert.Contains(t, res.Message, "could not run the code")
	}
	assertHealthy(t, sb)
}

func TestSandboxConfigErrors(t *testing.T) {
	for _, cfg := range []SandboxConfig{
		{Workers: -1}, {Timeout: -1}, {MaxProcesses: -2}, {MaxOutputBytes: -1}, {Isolation: 7},
		{Budget: OutputBudget{Tokens: 10}},
	} {
		_, err := NewCodeInterpreter(cfg)
		require.Error(t, err, "%+v", cfg)
	}
}

// TestSandboxNoStateLeaks: whatever one call changes — globals, builtins,
// modules, sys.path, environment, files, working directory — the next
// call on the same worker starts clean.
func TestSandboxNoStateLeaks(t *testing.T) {
	forModes(t, SandboxConfig{Workers: 1}, func(t *testing.T, sb *Sandbox) {
		dirty := `
import builtins, math, sys, os, json, random
counter = 41
builtins.leaked = 'yes'
math.pi = 3
json.dumps = None
sys.path.append('/evil')
sys.modules['fractions'] = None
os.environ['LEAK'] = '1'
sys.setrecursionlimit(50)
random.seed(1)
open('left.txt', 'w').write('x')
os.mkdir('dir')
os.chmod('dir', 0)
os.chdir('/')
print('dirty')
`
		res := run(t, sb, dirty)
		require.Equal(t, "dirty\n", res.Stdout, "%+v", res)
		check := `
import builtins, math, sys, os, json, fractions
print('counter' in globals(), hasattr(builtins, 'leaked'), math.pi, json.dumps([1]),
      '/evil' in sys.path, 'LEAK' in os.environ, sys.getrecursionlimit() > 50,
      sorted(os.listdir('.')), os.getcwd() != '/', fractions.Fraction(1, 2))
`
		res = run(t, sb, check)
		assert.Equal(t, "False False 3.141592653589793 [1] False False True [] True 1/2\n", res.Stdout, "%+v", res)
		// Two calls seeding nothing draw different random numbers: the
		// generator is reseeded in every fork, not copied.
		a := run(t, sb, "import random\nprint(random.random())").Stdout
		b := run(t, sb, "import random\nprint(random.random())").Stdout
		assert.NotEqual(t, a, b)
		if sb.Isolation().PIDNamespace {
			// Shared memory, POSIX and System V, does not survive the call.
			res = run(t, sb, `
import ctypes
from multiprocessing import shared_memory
m = shared_memory.SharedMemory(name='leak', create=True, size=16)
libc = ctypes.CDLL(None)
print(libc.shmget(4242, 4096, 0o1600) >= 0)`)
			require.Equal(t, "True\n", res.Stdout, "%+v", res)
			res = run(t, sb, `
import ctypes, os
print(os.listdir('/dev/shm'), ctypes.CDLL(None).shmget(4242, 0, 0))`)
			assert.Equal(t, "[] -1\n", res.Stdout, "%+v", res)
		}
		assertHealthy(t, sb)
	})
}

// The adversarial tests: each attack runs, the host is unharmed, and the
// pool keeps serving afterwards (assertHealthy also checks that no process
// is left behind).

func TestAdversarialForkBomb(t *testing.T) {
	forModes(t, SandboxConfig{Timeout: time.Second, MaxProcesses: 32}, func(t *testing.T, sb *Sandbox) {
		res := run(t, sb, `
import os
n = 0
while True:
    try:
        os.fork()
        n += 1
    except OSError:
        pass
`)
		assert.Contains(t, []ExecStatus{StatusTimeout, StatusSignaled}, res.Status, "%+v", res)
		assertHealthy(t, sb)
	})
}

func TestAdversarialMemoryBomb(t *testing.T) {
	// The wall clock is not what is tested: filling 256 MiB took over the
	// default 3 s on a loaded 2-core machine, and the call timed out
	// before the memory limit was reached.
	forModes(t, SandboxConfig{MemoryBytes: 256 << 20, Timeout: 60 * time.Second}, func(t *testing.T, sb *Sandbox) {
		// One huge allocation fails at once under RLIMIT_AS.
		res := run(t, sb, "x = bytearray(10**10)")
		assert.Equal(t, StatusError, res.Status, "%+v", res)
		assert.Contains(t, res.Stderr, "MemoryError")
		// Growing allocations stop at the limit too.
		res = run(t, sb, "a = []\nwhile True:\n    a.append(bytearray(1 << 24))")
		assert.Equal(t, StatusError, res.Status, "%+v", res)
		assert.Contains(t, res.Stderr, "MemoryError")
		assertHealthy(t, sb)
	})
}

// TestAdversarialInfiniteLoop runs under the default isolation only: the
// CPU limit is the same rlimit in both modes, and a CPU-bound second of it
// is the slowest thing in this file on a loaded machine.
func TestAdversarialInfiniteLoop(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Timeout: 15 * time.Second, CPUTime: time.Second})
	// The CPU-time limit (1 s) stops a busy loop before the wall clock (15 s).
	res := run(t, sb, "while True:\n    pass")
	assert.Equal(t, StatusSignaled, res.Status, "%+v", res)
	assert.Contains(t, []string{"SIGXCPU", "SIGKILL"}, res.Signal)
	assert.Equal(t, -1, res.ExitCode)
	assertHealthy(t, sb)
}

func TestAdversarialSleepForever(t *testing.T) {
	forModes(t, SandboxConfig{Timeout: 300 * time.Millisecond}, func(t *testing.T, sb *Sandbox) {
		res := run(t, sb, "import time\nprint('before', flush=True)\ntime.sleep(10**6)")
		assert.Equal(t, StatusTimeout, res.Status, "%+v", res)
		assert.Equal(t, "before\n", res.Stdout, "output written before the timeout is kept")
		// A per-request timeout overrides the sandbox's.
		ctx := context.Background()
		res, err := sb.Execute(ctx, ExecRequest{Code: "import time\ntime.sleep(0.4)\nprint('done')", Timeout: 5 * time.Second})
		require.NoError(t, err)
		assert.Equal(t, StatusOK, res.Status, "%+v", res)
		// Closing stdout and stderr does not end the call early.
		res = run(t, sb, "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(10**6)")
		assert.Equal(t, StatusTimeout, res.Status, "%+v", res)
		assertHealthy(t, sb)
	})
}

func TestAdversarialWriteOutsideWorkDir(t *testing.T) {
	hostDir := t.TempDir() // 0700, owned by the test's user
	forModes(t, SandboxConfig{}, func(t *testing.T, sb *Sandbox) {
		targets := []string{"/usr/sandbox-escape", "/etc/sandbox-escape", "/sandbox-escape", filepath.Join(hostDir, "escape")}
		if sharesCallerUID(sb) {
			// Rlimits only, without root: the code is the caller's user
			// and may write where the caller may (documented).
			targets = targets[:3]
		}
		for _, target := range targets {
			res := run(t, sb, fmt.Sprintf("open(%q, 'w').write('pwned')", target))
			assert.Equal(t, StatusError, res.Status, "writing %s: %+v", target, res)
			assert.Regexp(t, "PermissionError|FileNotFoundError|OSError", res.Stderr)
			_, err := os.Stat(target)
			assert.True(t, os.IsNotExist(err), "%s exists on the host", target)
		}
		if sb.Isolation().PrivateFS {
			// The scratch space is bounded: filling /tmp stops at its size.
			res := run(t, sb, "b = b'x' * (1 << 20)\nwith open('/tmp/fill', 'wb') as f:\n    for _ in range(200):\n        f.write(b)")
			assert.Equal(t, StatusError, res.Status, "%+v", res)
		}
		// Inside the working directory writing works, up to the file-size limit.
		res := run(t, sb, "open('ok.txt', 'w').write('fine')\nprint(open('ok.txt').read())")
		assert.Equal(t, "fine\n", res.Stdout, "%+v", res)
		assertHealthy(t, sb)
	})
}

func TestAdversarialFileSizeLimit(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{MaxFileBytes: 1 << 20, Workers: 1})
	res := run(t, sb, "with open('big', 'wb') as f:\n    f.write(b'x' * (2 << 20))")
	assert.NotEqual(t, StatusOK, res.Status, "%+v", res)
	assertHealthy(t, sb)
}

func TestAdversarialReadSecrets(t *testing.T) {
	self, err := filepath.Abs("sandbox_linux_test.go")
	require.NoError(t, err)
	secret := filepath.Join(t.TempDir(), "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("TOP-SECRET"), 0o644))
	forModes(t, SandboxConfig{}, func(t *testing.T, sb *Sandbox) {
		res := run(t, sb, "print(open('/etc/shadow').read())")
		assert.Equal(t, StatusError, res.Status, "%+v", res)
		assert.Regexp(t, "PermissionError|FileNotFoundError", res.Stderr)
		assert.NotContains(t, res.Stdout, "root:")
		if sharesCallerUID(sb) {
			t.Log("rlimits only, without root: the code runs as the caller and reads what it reads; skipping the rest")
			return
		}
		// The test's temporary directory is 0700: hidden or forbidden either way.
		res = run(t, sb, fmt.Sprintf("print(open(%q).read())", secret))
		assert.Equal(t, StatusError, res.Status, "%+v", res)
		assert.NotContains(t, res.Stdout, "TOP-SECRET")
		if !sb.Isolation().PrivateFS {
			t.Log("no mount namespace: the project's world-readable files are visible; skipping that check")
			return
		}
		for _, path := range []string{self, filepath.Dir(self), filepath.Dir(filepath.Dir(self))} {
			res = run(t, sb, fmt.Sprintf("import os\np = %q\nprint(open(p).read() if os.path.isfile(p) else os.listdir(p))", path))
			assert.Equal(t, StatusError, res.Status, "reading %s: %+v", path, res)
			assert.Contains(t, res.Stderr, "FileNotFoundError")
		}
		// Host processes are invisible: /proc shows the sandbox's own.
		res = run(t, sb, "import os\nps = [int(p) for p in os.listdir('/proc') if p.isdigit()]\nprint(len(ps), 1 in ps, os.getpid() in ps)")
		assert.Equal(t, "2 True True\n", res.Stdout, "%+v", res)
		assertHealthy(t, sb)
	})
}

func TestAdversarialNetwork(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{})
	if !sb.Isolation().NoNetwork {
		t.Skip("no network namespace here: the sandbox cannot cut the network")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, addr := range []string{"127.0.0.1", "192.0.2.1"} { // 192.0.2.1 is TEST-NET-1: never routed
		t.Run(addr, func(t *testing.T) {
			code := fmt.Sprintf(`
import socket, time
t = time.monotonic()
s = socket.socket()
s.settimeout(2)
try:
    s.connect((%q, %d))
    print("connected")
except OSError as e:
    print("refused", e.errno, round(time.monotonic() - t, 1))
`, addr, port)
			res := run(t, sb, code)
			// ENETUNREACH (101) at once: inside the namespace not even loopback is up.
			assert.Equal(t, "refused 101 0.0\n", res.Stdout, "%+v", res)
		})
	}
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = ln.Accept()
	require.Error(t, err, "the sandbox reached the host's loopback")
	assertHealthy(t, sb)
}

func TestAdversarialGigabyteStdout(t *testing.T) {
	forModes(t, SandboxConfig{MaxOutputBytes: 1 << 20, Timeout: 20 * time.Second}, func(t *testing.T, sb *Sandbox) {
		start := time.Now()
		res := run(t, sb, "import sys\nb = b'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.buffer.write(b)")
		elapsed := time.Since(start)
		assert.Equal(t, StatusOutputLimit, res.Status, "%+v", res.Message)
		assert.True(t, res.OutputTruncated)
		assert.LessOrEqual(t, len(res.Stdout)+len(res.Stderr), 1<<20)
		assert.Greater(t, len(res.Stdout), 1<<19, "the output up to the cap is kept")
		t.Logf("stopped after %v", elapsed) // reading a gigabyte would take far longer than the cap
		// The same through stderr, and printing line by line.
		res = run(t, sb, "import sys\nwhile True:\n    print('y' * 1000, file=sys.stderr)")
		assert.Equal(t, StatusOutputLimit, res.Status)
		assertHealthy(t, sb)
	})
}

func TestAdversarialKillParent(t *testing.T) {
	forModes(t, SandboxConfig{}, func(t *testing.T, sb *Sandbox) {
		for _, sig := range []string{"SIGKILL", "SIGTERM", "SIGINT", "SIGSTOP"} {
			res := run(t, sb, fmt.Sprintf("import os, signal\nos.kill(os.getppid(), signal.%s)\nprint('alive')", sig))
			// Under a PID namespace the worker is init, which its
			// namespace cannot kill; without one a nobody snippet may
			// not signal a root worker, and a same-uid worker dies and
			// is replaced. All three leave a working pool.
			assert.Contains(t, []ExecStatus{StatusOK, StatusError, StatusSandboxError}, res.Status, "%s: %+v", sig, res)
			assertHealthy(t, sb)
		}
		if sb.Isolation().PIDNamespace {
			// kill(-1) reaches only the namespace, and only the snippet itself there.
			res := run(t, sb, "import os, signal\nos.kill(-1, signal.SIGKILL)")
			assert.Contains(t, []ExecStatus{StatusSignaled, StatusError}, res.Status, "%+v", res)
			assertHealthy(t, sb)
		}
	})
}

func TestAdversarialBackgroundProcesses(t *testing.T) {
	forModes(t, SandboxConfig{}, func(t *testing.T, sb *Sandbox) {
		marker := fmt.Sprintf("%d.%d", 900000+os.Getpid()%1000, time.Now().UnixNano()%1000000)
		code := fmt.Sprintf(`
import os, time
# A daemon: double fork, new session, exec sleep.
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/bin/sleep', ['sleep', %q])
    os._exit(0)
# A child in its own process group that ignores SIGTERM and holds stdout.
if os.fork() == 0:
    os.setpgid(0, 0)
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.execv('/bin/sleep', ['sleep', %q])
time.sleep(0.2)
print('parent done')
`, marker, marker)
		res := run(t, sb, code)
		assert.Equal(t, StatusOK, res.Status, "%+v", res)
		assert.Equal(t, "parent done\n", res.Stdout)
		assert.Empty(t, cmdlineContains(marker), "background processes survived the call")
		assertHealthy(t, sb)
	})
}

func TestAdversarialChangeGlobalsBetweenCalls(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Workers: 1})
	// Each call tries to poison the interpreter for the next one.
	attacks := []string{
		"import builtins\nbuiltins.print = lambda *a, **k: None",
		"import builtins\nbuiltins.__import__ = None",
		"import sys\nsys.stdout = None\nsys.modules.clear()",
		"import gc\nfor o in gc.get_objects():\n    if isinstance(o, dict) and '__builtins__' in o:\n        o['__builtins__'] = {}",
		"globals().clear()",
		"import os\nos.chdir('/')\nos.umask(0o777)",
	}
	for i, a := range attacks {
		run(t, sb, a)
		res := run(t, sb, "import os\nprint(len(os.listdir('.')), 'ok')")
		require.Equal(t, "0 ok\n", res.Stdout, "after attack %d: %+v", i, res)
	}
	assertHealthy(t, sb)
}

// TestSandboxBoundedConcurrency: with one worker, a second call waits for
// the first, so a short context ends it while it waits.
func TestSandboxBoundedConcurrency(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Workers: 1})
	started := make(chan struct{})
	done := make(chan ExecResult)
	go func() {
		close(started)
		res, _ := sb.Execute(context.Background(), ExecRequest{Code: "import time\ntime.sleep(1)\nprint('first')"})
		done <- res
	}()
	<-started
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := sb.Execute(ctx, ExecRequest{Code: "print('second')"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "first\n", (<-done).Stdout)
	assertHealthy(t, sb)
}

// TestSandboxCancel: cancelling a call in flight returns the context's
// error at once; the worker is replaced.
func TestSandboxCancel(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Workers: 1, Timeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := sb.Execute(ctx, ExecRequest{Code: "import time\ntime.sleep(100)"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assertHealthy(t, sb)
}

func TestSandboxClose(t *testing.T) {
	sb, err := NewSandbox(context.Background(), SandboxConfig{Workers: 2})
	if errors.Is(err, ErrNoPython) {
		t.Skip(err)
	}
	require.NoError(t, err)
	done := make(chan error)
	go func() {
		_, err := sb.Execute(context.Background(), ExecRequest{Code: "import time\ntime.sleep(100)"})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, sb.Close())
	require.ErrorIs(t, <-done, ErrClosed)
	_, err = sb.Execute(context.Background(), ExecRequest{Code: "print(1)"})
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, sb.Close())
	assert.Empty(t, descendants(os.Getpid()))
}

func TestSandboxRecyclesWorkers(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Workers: 1, MaxCallsPerWorker: 2, Isolation: IsolationRlimitsOnly})
	pids := map[string]bool{}
	for i := 0; i < 6; i++ {
		// os.getppid() is the worker's host pid without a PID namespace.
		pids[run(t, sb, "import os\nprint(os.getppid())").Stdout] = true
	}
	assert.Len(t, pids, 3, "six calls, two per worker")
	assertHealthy(t, sb)
}

func TestCodeInterpreterLocal(t *testing.T) {
	ci, err := NewCodeInterpreter(SandboxConfig{Workers: 1, Timeout: time.Second})
	if errors.Is(err, ErrNoPython) {
		t.Skip(err)
	}
	require.NoError(t, err)
	defer ci.Close()
	small, err := NewCodeInterpreterOn(ci.Executor(), OutputBudget{Chars: 100})
	require.NoError(t, err)
	ctx := context.Background()
	cases := []struct {
		name, args, content string
		failed              bool
		status              string
	}{
		{"plain", `{"code": "print(1+1)"}`, "2\n", false, "ok"},
		{"fenced", `{"code": "` + "```python\\nx = 6\\nprint(x*7)\\n```" + `"}`, "42\n", false, "ok"},
		{"stdout then stderr", `{"code": "import sys\nprint('a')\nsys.stderr.write('b\\n')"}`, "a\nb\n", false, "ok"},
		{"error", `{"code": "raise ValueError('bad')"}`, "Traceback (most recent call last):\n  File \"<code>\", line 1, in <module>\n    raise ValueError('bad')\nValueError: bad\n", true, "error"},
		{"timeout", `{"code": "import time\ntime.sleep(5)"}`, "Error: execution timed out after 1s", true, "timeout"},
		{"truncated", `{"code": "print('a' * 50 + 'b' * 100 + 'c' * 50)"}`, "", false, "ok"},
		{"missing code", `{"cod": "1"}`, "Error: invalid arguments for code_interpreter: missing required field \"code\"", true, ""},
		{"code not a string", `{"code": 1}`, "Error: invalid arguments for code_interpreter: field \"code\" must be a string", true, ""},
		{"not JSON", `print(1)`, "Error: invalid arguments for code_interpreter: arguments must be a JSON object", true, ""},
		{"arguments as a JSON string", `"{\"code\": \"print(3)\"}"`, "3\n", false, "ok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := ci
			if c.name == "truncated" {
				tl = small
			}
			res, err := tl.Call(ctx, []byte(c.args))
			require.NoError(t, err)
			if c.name == "truncated" {
				// 201 characters ("a"*50 + "b"*100 + "c"*50 + "\n") over a
				// budget of 100: the first 50 and the last 50 are kept.
				assert.Equal(t, strings.Repeat("a", 50)+"\n...[101 characters truncated]...\n"+strings.Repeat("c", 49)+"\n", res.Content)
				assert.Equal(t, true, res.Metadata["truncated"])
			} else {
				assert.Equal(t, c.content, res.Content)
			}
			assert.Equal(t, c.failed, res.Failed)
			if c.status != "" {
				assert.Equal(t, c.status, res.Metadata["status"])
				assert.NotEmpty(t, res.Metadata["isolation"])
			}
			assert.Greater(t, res.Duration, time.Duration(0))
		})
	}
}

// TestNoLeftoverHostProcessesAfterWorkerDeath: a worker killed from the
// host takes its whole namespace with it.
func TestSandboxWorkerKilledFromHost(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Workers: 1})
	done := make(chan ExecResult)
	go func() {
		res, _ := sb.Execute(context.Background(), ExecRequest{Code: "import os, time\nfor _ in range(5):\n    os.fork()\ntime.sleep(100)"})
		done <- res
	}()
	time.Sleep(300 * time.Millisecond)
	sb.mu.Lock()
	for w := range sb.live {
		syscall.Kill(w.cmd.Process.Pid, syscall.SIGKILL)
	}
	sb.mu.Unlock()
	res := <-done
	assert.Equal(t, StatusSandboxError, res.Status, "%+v", res)
	if sb.Isolation().PIDNamespace {
		assertHealthy(t, sb)
	}
}

// TestSandboxWorkerStopsAnswering: a worker frozen mid-call (SIGSTOP from
// the host) is killed at the Go-side deadline and replaced.
func TestSandboxWorkerStopsAnswering(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Workers: 1, Timeout: 200 * time.Millisecond})
	sb.grace = 300 * time.Millisecond
	done := make(chan ExecResult)
	go func() {
		res, _ := sb.Execute(context.Background(), ExecRequest{Code: "import time\ntime.sleep(100)"})
		done <- res
	}()
	time.Sleep(100 * time.Millisecond)
	sb.mu.Lock()
	for w := range sb.live {
		syscall.Kill(w.cmd.Process.Pid, syscall.SIGSTOP)
	}
	sb.mu.Unlock()
	res := <-done
	assert.Equal(t, StatusSandboxError, res.Status, "%+v", res)
	assert.Contains(t, res.Message, "stopped answering")
	assertHealthy(t, sb)
}

// TestSandboxConcurrentMixedLoad: many callers at once, mixing good code,
// errors and self-inflicted kills, each get their own correct answer.
func TestSandboxConcurrentMixedLoad(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Workers: 2})
	type job struct {
		code   string
		status ExecStatus
		stdout string
	}
	jobs := []job{
		{"print(sum(range(%d)))", StatusOK, ""},
		{"raise KeyError(%d)", StatusError, ""},
		{"import os, signal\nprint(%d, flush=True)\nos.kill(os.getpid(), signal.SIGKILL)", StatusSignaled, ""},
		{"import sys\nsys.exit(%d %% 200 + 1)", StatusError, ""},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				n := g*10 + i
				j := jobs[n%len(jobs)]
				res, err := sb.Execute(context.Background(), ExecRequest{Code: fmt.Sprintf(j.code, n)})
				if err != nil {
					errs <- err.Error()
					continue
				}
				want := map[int]string{0: fmt.Sprintf("%d\n", n*(n-1)/2), 2: fmt.Sprintf("%d\n", n)}[n%len(jobs)]
				if res.Status != j.status || res.Stdout != want {
					errs <- fmt.Sprintf("job %d: got %s %q, want %s %q", n, res.Status, res.Stdout, j.status, want)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	assertHealthy(t, sb)
}

func TestSandboxReadOnlyPaths(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	require.NoError(t, os.Mkdir(data, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755)) // the test's own temporary directory
	require.NoError(t, os.WriteFile(filepath.Join(data, "numbers.txt"), []byte("1 2 3\n"), 0o644))
	forModes(t, SandboxConfig{ReadOnlyPaths: []string{data}}, func(t *testing.T, sb *Sandbox) {
		res := run(t, sb, fmt.Sprintf("print(sum(map(int, open(%q).read().split())))", filepath.Join(data, "numbers.txt")))
		assert.Equal(t, "6\n", res.Stdout, "%+v", res)
		res = run(t, sb, fmt.Sprintf("open(%q, 'w').write('x')", filepath.Join(data, "new.txt")))
		if !sharesCallerUID(sb) {
			assert.Equal(t, StatusError, res.Status, "%+v", res)
			assert.Regexp(t, "Read-only file system|PermissionError", res.Stderr)
			assert.NoFileExists(t, filepath.Join(data, "new.txt"))
		}
		if sb.Isolation().PrivateFS {
			// The path sits in the sandbox's scratch /tmp: cleaning /tmp
			// between calls keeps it, and removes the rest.
			res = run(t, sb, "import os\nopen('/tmp/junk', 'w').write('x')\nprint(sorted(os.listdir('/tmp')))")
			require.Equal(t, StatusOK, res.Status, "%+v", res)
			top := strings.Split(strings.TrimPrefix(data, "/tmp/"), "/")[0]
			res = run(t, sb, "import os\nprint(os.listdir('/tmp'))")
			assert.Equal(t, fmt.Sprintf("['%s']\n", top), res.Stdout)
			res = run(t, sb, fmt.Sprintf("import shutil\nshutil.rmtree(%q)", "/tmp/"+top))
			assert.Equal(t, StatusError, res.Status, "the snippet cannot remove the read-only path")
			res = run(t, sb, fmt.Sprintf("print(open(%q).read())", filepath.Join(data, "numbers.txt")))
			assert.Equal(t, "1 2 3\n\n", res.Stdout)
		}
		assertHealthy(t, sb)
	})
}

func TestSandboxPreload(t *testing.T) {
	sb := newTestSandbox(t, SandboxConfig{Preload: []string{"json"}})
	res := run(t, sb, "import sys\nprint('json' in sys.modules, 'fractions' in sys.modules)")
	assert.Equal(t, "True False\n", res.Stdout, "%+v", res)
	_, err := NewSandbox(context.Background(), SandboxConfig{Workers: 1, Preload: []string{"no_such_module_xyz"}})
	require.ErrorContains(t, err, "No module named 'no_such_module_xyz'")
}

// TestSandboxPreforkedChildNoLeaks: the child that serves a call is forked
// before the call arrives, so whatever an earlier call changed must not
// reach it. Each call first checks that it starts clean, then poisons
// everything it can: modules, builtins, environment, rlimits, umask, signal
// dispositions, files in every scratch directory, and a background process
// that would keep writing files after the call. Two workers serve the calls
// concurrently, so that every call runs while the other worker's next child
// is already forked and idle, and each worker's own next child is forked
// between its calls.
func TestSandboxPreforkedChildNoLeaks(t *testing.T) {
	forModes(t, SandboxConfig{Workers: 2}, func(t *testing.T, sb *Sandbox) {
		scratch := []string{".", "/tmp", "/dev/shm"}
		if !sb.Isolation().PrivateFS {
			scratch = []string{"."} // the host's /tmp is shared, and not the sandbox's to empty
		}
		code := fmt.Sprintf(`
import os, sys, json, builtins, resource, signal, time
scratch = %s
# Clean start: what a fresh python3 would see.
clean = (not hasattr(builtins, 'poisoned') and json.dumps([1]) == '[1]' and 'LEAK' not in os.environ
         and ('fractions' not in sys.modules or sys.modules['fractions'] is not None))
umask = os.umask(0o22)
nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
handler = signal.getsignal(signal.SIGUSR1)
left = {d: os.listdir(d) for d in scratch}
print(clean, oct(umask), nofile, handler == signal.SIG_DFL, left, os.getcwd() == os.path.abspath('.'))
sys.stdout.flush()
# Poison.
builtins.poisoned = True
json.dumps = lambda *a, **k: 'poisoned'
sys.modules['fractions'] = None
os.environ['LEAK'] = '1'
os.umask(0o777)
resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
for d in scratch:
    os.umask(0)
    open(os.path.join(d, 'left-behind'), 'w').write('x')
if os.fork() == 0:
    os.setsid()
    os.close(1)
    os.close(2)
    for i in range(200):
        time.sleep(0.01)
        try:
            open(os.path.join(scratch[0], 'late-%%d' %% i), 'w').write('x')
        except OSError:
            pass
    os._exit(0)
`, pyList(scratch))
		want := fmt.Sprintf("True 0o22 %d True %s True\n", sb.cfg.MaxOpenFiles, pyEmptyDirs(scratch))
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 6; i++ {
					res, err := sb.Execute(context.Background(), ExecRequest{Code: code})
					if err != nil {
						errs <- err.Error()
						return
					}
					if res.Status != StatusOK || res.Stdout != want {
						errs <- fmt.Sprintf("goroutine %d call %d: got %s %q %q, want %q", g, i, res.Status, res.Stdout, res.Stderr, want)
					}
					time.Sleep(30 * time.Millisecond) // give a surviving background process time to write
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		assertHealthy(t, sb)
	})
}

// pyList renders strings as a Python list literal.
func pyList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// pyEmptyDirs renders the dict {dir: []} that Python prints for empty
// directories.
func pyEmptyDirs(dirs []string) string {
	q := make([]string, len(dirs))
	for i, d := range dirs {
		q[i] = "'" + d + "': []"
	}
	return "{" + strings.Join(q, ", ") + "}"
}

// TestWorkerCommandLineIsShort: a worker's command line, which ps and top
// show, is the interpreter, its flags, the short bootstrap and the
// configuration, not the worker's 32 KiB source; and the worker serves
// calls.
func TestWorkerCommandLineIsShort(t *testing.T) {
	forModes(t, SandboxConfig{Workers: 2}, func(t *testing.T, sb *Sandbox) {
		assert.Equal(t, "42\n", run(t, sb, "print(6*7)").Stdout)
		sb.mu.Lock()
		var pids []int
		for w := range sb.live {
			pids = append(pids, w.cmd.Process.Pid)
		}
		sb.mu.Unlock()
		require.NotEmpty(t, pids)
		for _, pid := range pids {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			require.NoError(t, err)
			args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
			require.Len(t, args, 5, "%q", args)
			assert.Equal(t, []string{sb.python, "-I", "-c", workerBootstrap}, args[:4])
			assert.True(t, json.Valid([]byte(args[4])), "the configuration: %q", args[4])
			assert.Less(t, len(b), 2048, "command line of %d bytes", len(b))
			assert.NotContains(t, string(b), "def read_exact")
		}
	})
}

// TestWorkerBootstrap: the bootstrap runs what it reads from
// workerSourceFD as the main module, with the command line's arguments,
// and closes the descriptor before it does.
func TestWorkerBootstrap(t *testing.T) {
	python, err := resolvePython(context.Background(), "")
	if errors.Is(err, ErrNoPython) {
		t.Skip(err)
	}
	require.NoError(t, err)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	// More than a pipe holds (64 KiB), so that the reading must overlap
	// the writing.
	src := fmt.Sprintf("import os, sys\nprint(__name__, sys.argv[1:], %d in [int(n) for n in os.listdir('/proc/self/fd')])\n", workerSourceFD) +
		strings.Repeat("#"+strings.Repeat("x", 99)+"\n", 1000)
	go func() {
		_, _ = io.WriteString(w, src)
		w.Close()
	}()
	cmd := exec.Command(python, "-I", "-c", workerBootstrap, "cfg")
	// fds 3 and 4 stand for the request and response pipes.
	cmd.ExtraFiles = []*os.File{nil, nil, r}
	out, err := cmd.CombinedOutput()
	r.Close()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "__main__ ['cfg'] False\n", string(out))
}
