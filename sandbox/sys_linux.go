//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const supported = true

// cgroupFix is the advice when no pids cgroup can be made.
const cgroupFix = "run deputy as root, or in a cgroup whose pids, memory and cpu controllers are delegated to it " +
	"(cgroup v2: systemd Delegate=yes, or `echo +pids +memory +cpu` into its parent's cgroup.subtree_control); " +
	"meanwhile a watchdog enforces the process limit and rlimits the memory limit per process"

// errUnsupported is never returned on Linux.
var errUnsupported = errors.New("the sandbox needs Linux")

// pidfd is a process handle that cannot be confused with a later process
// given the same pid.
type pidfd int

// errGone is openPidfd's error for a process that no longer exists.
var errGone = errors.New("no such process")

func openPidfd(pid int) (pidfd, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, errGone)
	}
	if err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return pidfd(fd), nil
}

// childOf reports whether the process fd holds, opened on pid, is a live
// child of parent. The sandbox's init is bwrap's child; a process that got
// pid after bwrap reaped an init that died is not (bwrap forks nothing
// else). /proc is read by pid, so the answer is about fd's process only if
// that process has not exited by the time it is read, which the pidfd
// says afterwards; an init that has exited before the box released it
// never ran the command either, so false is right for it too.
func childOf(fd pidfd, pid, parent int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) >= 2 && f[1] == strconv.Itoa(parent) && !fd.exited()
}

// released waits until the sandbox's init has taken the byte written to
// its block fd (true) or can no longer take it (false: init died, or
// closed the fd without reading), for at most limit. bwrap reads the
// block fd once the sandbox is made, then closes it, so the pipe's last
// reader goes (POLLERR on blockW) both when init takes the byte and when
// it dies; whether the byte is still in the pipe tells which. Past limit
// it answers true: a setup that slow is left to the caller's own timeout.
func released(blockW *os.File, init pidfd, limit time.Duration) bool {
	rc, err := blockW.SyscallConn()
	if err != nil {
		return true
	}
	var w int
	if err := rc.Control(func(fd uintptr) { w = int(fd) }); err != nil {
		return true
	}
	deadline := time.Now().Add(limit)
	for {
		// POLLERR and POLLHUP are reported whatever the events asked.
		fds := []unix.PollFd{{Fd: int32(w)}, {Fd: int32(init), Events: unix.POLLIN}}
		left := time.Until(deadline)
		if left <= 0 {
			return true
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return true
		}
		if n > 0 {
			queued, err := unix.IoctlGetInt(w, unix.TIOCINQ)
			if err != nil {
				return true
			}
			if queued == 0 {
				return true // taken
			}
			if fds[0].Revents&unix.POLLERR != 0 || fds[1].Revents&unix.POLLIN != 0 {
				return false
			}
		}
	}
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

// alive reports whether a process with this pid exists (EPERM: it exists,
// and is someone else's).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// lockGuards takes the state directory's placeholder lock (guard.go): a
// flock, which holds between boxes of one process too (each open is its
// own lock) and goes with a process that dies holding it.
func lockGuards(stateDir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(stateDir, guardLockName), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sandbox: the placeholder lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: the placeholder lock: %w", err)
	}
	return func() { f.Close() }, nil // closing the last descriptor releases it
}
