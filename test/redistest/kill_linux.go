package redistest

import (
	"os/exec"
	"syscall"
)

// killWithParent has the kernel kill the server when the thread that
// started it exits: a test binary that dies on a timeout runs no cleanups,
// and would leave the server running, holding its port. The thread is the
// one launch locks for as long as the server runs.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
