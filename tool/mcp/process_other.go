//go:build !linux

package mcp

import (
	"os/exec"
	"syscall"
)

// setProcAttr leaves the server in this process's group: process groups
// and the parent-death signal are used on Linux only.
func setProcAttr(cmd *exec.Cmd) {}

// signal sends sig to the server's process (not to what it started).
func (p *process) signal(sig syscall.Signal) {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}
