//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const supported = true

// errUnsupported is never returned on Linux.
var errUnsupported = errors.New("the sandbox needs Linux")

// pidfd is a process handle that cannot be confused with a later process
// given the same pid.
type pidfd int

func openPidfd(pid int) (pidfd, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return pidfd(fd), nil
}

// kill sends SIGKILL; a process that is already gone is not an error.
func (p pidfd) kill() {
	_ = unix.PidfdSendSignal(int(p), unix.SIGKILL, nil, 0)
}

// wait returns once the process has exited, or after limit (false). For
// the init of a PID namespace, exiting includes the kernel killing and
// reaping every other process of the namespace, so true means the whole
// namespace is gone.
func (p pidfd) wait(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(p), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == nil && n > 0 {
			return true
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return false
		}
	}
}

// exited reports whether the process has exited, without blocking.
func (p pidfd) exited() bool {
	fds := []unix.PollFd{{Fd: int32(p), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

func (p pidfd) close() { _ = unix.Close(int(p)) }

// setLimits sets the rlimits on pid (bwrap's init, before it forks the
// command, which inherits them). The hard CPU limit is a second above the
// soft one: SIGXCPU first, which kills by default, SIGKILL if ignored.
// dataBytes, when positive, is RLIMIT_DATA: the memory limit where the box
// has no memory cgroup.
func setLimits(pid int, cpuSeconds int, dataBytes int64) error {
	if cpuSeconds > 0 {
		lim := unix.Rlimit{Cur: uint64(cpuSeconds), Max: uint64(cpuSeconds) + 1}
		if err := unix.Prlimit(pid, unix.RLIMIT_CPU, &lim, nil); err != nil {
			return fmt.Errorf("set the CPU limit: %w", err)
		}
	}
	if dataBytes > 0 {
		lim := unix.Rlimit{Cur: uint64(dataBytes), Max: uint64(dataBytes)}
		if err := unix.Prlimit(pid, unix.RLIMIT_DATA, &lim, nil); err != nil {
			return fmt.Errorf("set the memory limit: %w", err)
		}
	}
	return nil
}

// landlockABI returns the kernel's Landlock ABI version, or an error that
// says why there is none.
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch errno {
	case 0:
		return int(v), nil
	case unix.ENOSYS:
		return 0, errors.New("the kernel has no Landlock (Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK)")
	case unix.EOPNOTSUPP:
		return 0, errors.New("Landlock is built in but not enabled (add landlock to the lsm= kernel parameter)")
	default:
		return 0, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
}

// noFollow makes an open fail on a symlink instead of following it.
const noFollow = unix.O_NOFOLLOW

// inodeOf returns a file's inode number and status-change time.
func inodeOf(fi fs.FileInfo) (uint64, int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fi.ModTime().UnixNano()
	}
	return st.Ino, st.Ctim.Nano()
}

// alive reports whether a process with this pid exists (EPERM: it exists,
// and is someone else's).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// devIno returns a file's device and inode numbers: what tells a
// placeholder the box made from a file put in its place.
func devIno(fi fs.FileInfo) (uint64, uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return uint64(st.Dev), st.Ino
}
