package mcp

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stderrTail is how much of a server's standard error is kept.
const stderrTail = 2048

// process is a stdio server's process. Go owns its pipes (not exec's, so
// that reaping the process never closes what the MCP connection reads),
// and a goroutine reaps it as soon as it exits.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // the server's standard input, our end
	stdout *os.File // the server's standard output, our end
	stderr *tail
	exited chan struct{} // closed once the process has exited
	err    error         // cmd.Wait's, set before exited is closed
}

// startProcess starts argv in dir with env added to this process's
// environment; its standard error goes to the kept tail and to extra.
func startProcess(argv, env []string, dir string, extra io.Writer) (*process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Dir = dir
	p := &process{cmd: cmd, stderr: &tail{max: stderrTail}, exited: make(chan struct{})}
	if extra != nil {
		cmd.Stderr = io.MultiWriter(p.stderr, extra)
	} else {
		cmd.Stderr = p.stderr
	}
	// A child the server leaves holding its standard error (npx runs the
	// server as one) must not keep Wait from returning.
	cmd.WaitDelay = time.Second
	setProcAttr(cmd)

	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	p.stdin, p.stdout = inW, outR
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Read and Write make the pipes the MCP connection's stream; Close closes
// both, which tells a well-behaved server to exit.
func (p *process) Read(b []byte) (int, error)  { return p.stdout.Read(b) }
func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }
func (p *process) Close() error {
	p.stdin.Close()
	p.stdout.Close()
	return nil
}

// stop ends the process the way the MCP specification asks of a client:
// close its input, wait up to grace for it to exit, send SIGTERM, wait
// again, then SIGKILL. Whatever is left of its process group afterwards
// (children of a launcher such as npx) is killed too.
func (p *process) stop(grace time.Duration) {
	p.Close()
	if !p.waitExit(grace) {
		p.signal(syscall.SIGTERM)
		if !p.waitExit(grace) {
			p.signal(syscall.SIGKILL)
			<-p.exited
		}
	}
	p.signal(syscall.SIGKILL)
}

// kill kills the process and its group at once, for a server that stopped
// answering, and waits for it to exit.
func (p *process) kill() {
	p.signal(syscall.SIGKILL)
	<-p.exited
	p.Close()
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// describe says how the process ended, if it has, with the tail of its
// standard error: what a model and a log need to know of a server that
// died.
func (p *process) describe() string {
	var b strings.Builder
	select {
	case <-p.exited:
		if p.err != nil {
			fmt.Fprintf(&b, "the server exited (%v)", p.err)
		} else {
			b.WriteString("the server exited")
		}
	default:
		b.WriteString("the server stopped answering")
	}
	if s := strings.TrimSpace(p.stderr.String()); s != "" {
		fmt.Fprintf(&b, "; its standard error ends: %s", s)
	}
	return b.String()
}

// tail is an io.Writer keeping the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut {
		return "…" + strings.ToValidUTF8(string(t.buf), "")
	}
	return string(t.buf)
}
