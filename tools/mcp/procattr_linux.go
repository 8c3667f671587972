package mcp

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts a stdio server in its own process group (a terminal's Ctrl-C reaches
// the node, which then closes the server, not the server directly) and has the kernel
// kill it when the node dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
