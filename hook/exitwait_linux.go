//go:build linux

package hook

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit blocks until p has exited, leaving it unreaped (WNOWAIT), so
// its pid, and its group's id, stay its own until Wait reaps it.
func awaitExit(p *os.Process) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err == nil
		}
	}
}
