//go:build linux

package tether

import (
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
)

type level int32

const (
	levelPID level = iota + 1
	levelUserPID
	levelParentDeath
)

// current is the level programs start at: 0 until a start has shown what
// works; then the first level that started a program. It only goes down.
var current atomic.Int32

func firstLevel() level {
	if l := level(current.Load()); l != 0 {
		return l
	}
	if os.Geteuid() == 0 {
		return levelPID
	}
	// An unprivileged process cannot make a PID namespace but in a user
	// namespace it owns.
	return levelUserPID
}

// remember records that l worked, unless a start elsewhere found that
// less works.
func remember(l level) {
	for {
		old := current.Load()
		if old >= int32(l) || current.CompareAndSwap(old, int32(l)) {
			return
		}
	}
}

func mode() string {
	switch firstLevel() {
	case levelPID:
		return ModePIDNamespace
	case levelUserPID:
		return ModeUserPIDNamespace
	}
	return ModeParentDeath
}

func startTethered(build func() *exec.Cmd, start func(*exec.Cmd) error) (*exec.Cmd, error) {
	for l := firstLevel(); ; l++ {
		cmd := build()
		apply(cmd, l)
		err := start(cmd)
		if err == nil {
			remember(l)
			return cmd, nil
		}
		// The level is remembered only once a lower one has worked: a
		// program that cannot start at all (its binary missing, out of
		// descriptors) fails at every level and changes nothing.
		if l == levelParentDeath || !refused(err) {
			return nil, err
		}
	}
}

// refused reports whether a start failed in a way the kernel refuses
// namespaces: EPERM (no CAP_SYS_ADMIN, a seccomp filter, an LSM), EINVAL
// (not built in), ENOSPC or EUSERS (user.max_user_namespaces and the like
// reached or 0), EACCES (writing the uid map refused).
func refused(err error) bool {
	for _, e := range []syscall.Errno{syscall.EPERM, syscall.EINVAL, syscall.ENOSPC, syscall.EUSERS, syscall.EACCES} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func apply(cmd *exec.Cmd, l level) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	a := cmd.SysProcAttr
	// The child checks at once that its parent is still there, and kills
	// itself if not; as pid 1 of a new namespace it sees no parent
	// (getppid is 0) and its own SIGKILL is ignored, which leaves a window
	// of a few instructions between fork and prctl in which deputy's death
	// goes unnoticed.
	a.Pdeathsig = syscall.SIGKILL
	switch l {
	case levelPID:
		a.Cloneflags |= syscall.CLONE_NEWPID
	case levelUserPID:
		a.Cloneflags |= syscall.CLONE_NEWPID | syscall.CLONE_NEWUSER
		// The user is itself inside: files it creates are its own, and
		// access checks still use its supplementary groups (setgroups is
		// denied, GidMappingsEnableSetgroups false, as an unprivileged
		// gid map requires).
		uid, gid := os.Geteuid(), os.Getegid()
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
}

// Namespaced reports whether cmd, started by Start, is pid 1 of a PID
// namespace of its own.
func Namespaced(cmd *exec.Cmd) bool {
	return cmd.SysProcAttr != nil && cmd.SysProcAttr.Cloneflags&syscall.CLONE_NEWPID != 0
}
