//go:build linux

package shell

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit blocks until p has exited and reports true, leaving p
// unreaped (WNOWAIT): p stays a zombie, holding its pid, and so its
// process group's id, until exec.Cmd.Wait reaps it. It reports false only
// if waitid fails, which it does not for a child nobody else reaps; the
// caller then takes the order of platforms without waitid.
func awaitExit(p *os.Process) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err == nil
		}
	}
}
