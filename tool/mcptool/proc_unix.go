//go:build unix

package mcptool

import (
	"os/exec"
	"syscall"
)

// ownGroup puts a stdio server in a process group of its own, so what it
// starts (npx starts node, uvx starts python) can be ended with it, and a
// terminal's Ctrl-C reaches deputy, which ends its servers itself.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills whatever is left of a server's process group once the
// server itself was closed: a grandchild that ignored its closed stdin.
func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH: nothing left
}
