//go:build unix

package hook

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup makes the command the leader of a new process group, so
// it and everything it forks can be killed at once.
func ownProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the group p leads with SIGKILL. p must not have been
// reaped (see endCommand); a group with no member left fails harmlessly.
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }
