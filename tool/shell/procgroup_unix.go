//go:build unix

package shell

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup starts the command as the leader of a new process group,
// so that it and everything it forks can be killed at once, and makes
// cancellation (a timeout or the caller's context) kill that whole group.
// SIGKILL straight away: a command that overran its time gets no chance to
// ignore the request, and the model is told it was killed.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		killProcessGroup(cmd.Process.Pid)
		return nil
	}
}

// killProcessGroup kills the group led by pid. It is called once more after
// the leader was reaped to end background jobs; the group id cannot have
// been reused while any of its members lives, and kill on an empty group
// fails harmlessly with ESRCH.
func killProcessGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

func signaled(ps *os.ProcessState) (string, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return "", false
	}
	return ws.Signal().String(), true
}
