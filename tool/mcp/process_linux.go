package mcp

import (
	"os/exec"
	"syscall"
)

// setProcAttr starts the server in a process group of its own, so that
// it and whatever it starts can be signalled together, and has the kernel
// kill it if the thread that started it (this process) dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signal sends sig to the server's process group.
func (p *process) signal(sig syscall.Signal) {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}
