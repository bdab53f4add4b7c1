//go:build !unix

package shell

import (
	"os"
	"os/exec"
)

// Without process groups, only the shell itself can be killed.
func ownProcessGroup(cmd *exec.Cmd) {}

func killGroup(p *os.Process) { _ = p.Kill() }

func signaled(ps *os.ProcessState) (string, bool) { return "", false }
