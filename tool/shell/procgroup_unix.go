//go:build unix

package shell

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup starts the command as the leader of a new process group,
// so that it and everything it forks can be killed at once.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the process group that p leads, with SIGKILL straight
// away: a command that overran its time gets no chance to ignore the
// request, and the model is told it was killed. The group id is p's pid,
// so the caller must not have reaped p (see Bash.Run): until then no other
// process can get that pid, nor lead a group with that id. A group with no
// live member fails the kill harmlessly with ESRCH.
func killGroup(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
}

func signaled(ps *os.ProcessState) (string, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return "", false
	}
	return ws.Signal().String(), true
}
