// Package tether starts the programs deputy's tools run (a bash command,
// a stdio MCP server) tied to deputy's own process, so that when deputy
// dies, SIGKILL included, they die too, with everything they started:
// none of them may go on changing things after deputy has stopped
// recording, since a resumed run tells the model such a call was
// interrupted and never ran.
//
// On Linux the program runs as pid 1 of a PID namespace of its own (in a
// user namespace of its own too when deputy is not root, the only way an
// unprivileged process gets one) with a parent-death signal (SIGKILL): when
// deputy dies the kernel kills the program, and when a namespace's pid 1
// dies the kernel kills every other process in it, even those that left
// the process group or the session (setsid, double forks, nohup). Where
// the kernel refuses namespaces (a container without CAP_SYS_ADMIN and no
// unprivileged user namespaces), the program still gets the parent-death
// signal, but what it started in the background may survive deputy: Mode
// says which applies.
//
// What running as pid 1 of a new PID namespace changes for the program:
//   - The kernel delivers to it only the signals it has a handler for when
//     they are sent from inside the namespace (kill $$ with no trap does
//     nothing); SIGKILL from deputy always works. Package shell traps the
//     usual signals in its bash so that kill $$ still ends the command.
//   - Orphans are reparented to it, not to the host's init, and are
//     killed with it.
//   - Pids inside are the namespace's ($$ is 1), while /proc is still
//     the host's (remounting it would need a mount namespace and a
//     helper between fork and exec, which os/exec does not offer): ps
//     and pgrep list host pids, and kill of such a pid does not reach
//     the process, or any process outside the namespace.
//   - In a user namespace (deputy not root): the user's own uid and gid
//     map to themselves, so files are created as before and supplementary
//     groups still grant access, but other owners show as nobody, and
//     setuid programs (sudo, su) do not gain privilege.
//
// Go ties the parent-death signal to the OS thread that forks, not to the
// process (go.dev/issue/27505): Go ends a thread when a goroutine locked
// to it exits, and any goroutine may lock the thread it runs on. So Start
// forks from a goroutine locked to its thread, which stays locked, doing
// nothing, until the caller releases it once the program has been reaped:
// no other goroutine can run on that thread meanwhile, so nothing can end
// it early.
package tether

import (
	"os/exec"
	"runtime"
	"sync"
)

// Modes Mode reports.
const (
	// ModePIDNamespace: programs are pid 1 of a PID namespace of their
	// own, with a parent-death signal (deputy runs as root).
	ModePIDNamespace = "pid namespace"
	// ModeUserPIDNamespace: the same, in a user namespace of their own
	// mapping the user to itself (deputy is not root).
	ModeUserPIDNamespace = "user and pid namespace"
	// ModeParentDeath: namespaces are refused here; a program gets only
	// the parent-death signal, and what it leaves running in the
	// background may outlive deputy.
	ModeParentDeath = "parent-death signal only"
	// ModeNone: the platform offers neither (not Linux): programs are
	// ended by deputy while it lives, not by the kernel when it dies.
	ModeNone = "none"
)

// Start starts a program tethered to this process. build returns a new,
// unstarted command each time it is called, with the SysProcAttr the
// caller wants (Setpgid, say), to which Start adds its own fields; start
// starts it (cmd.Start, or what starts it for the caller, an MCP
// transport say). Start may build and start more than once: where the
// kernel refuses namespaces it tries again with less, and remembers what
// worked. release must be called once the program has been reaped (or
// its start failed: Start has called it then); it is idempotent.
func Start(build func() *exec.Cmd, start func(*exec.Cmd) error) (cmd *exec.Cmd, release func(), err error) {
	release = OnLockedThread(func() { cmd, err = startTethered(build, start) })
	if err != nil {
		release()
		return nil, func() {}, err
	}
	return cmd, release, nil
}

// Mode says how programs are tethered on this machine. Until a program
// has been started it is the mode Start will try first.
func Mode() string { return mode() }

// OnLockedThread runs f on an OS thread locked for the purpose, and keeps
// that thread locked, idle, until release is called: a process that f
// forks with a parent-death signal (Pdeathsig, or bwrap's
// --die-with-parent) gets it only when this process dies, not when Go
// ends a thread (see the package comment). A panic in f is raised again
// in the caller.
func OnLockedThread(f func()) (release func()) {
	done := make(chan any, 1)
	rel := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		func() {
			defer func() { done <- recover() }()
			f()
		}()
		<-rel
		// Unlocked, not left locked: a goroutine that exits locked ends
		// its thread, and a thread is costly to make again.
		runtime.UnlockOSThread()
	}()
	if p := <-done; p != nil {
		close(rel)
		panic(p)
	}
	var once sync.Once
	return func() { once.Do(func() { close(rel) }) }
}
