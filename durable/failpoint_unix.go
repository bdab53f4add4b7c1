//go:build unix

package durable

import "syscall"

// failpoint kills the process when name is the configured failpoint: the
// crash tests' way of dying exactly at a step boundary, as a power cut
// would, with no deferred function or shutdown running.
func (e *Engine) failpoint(name string) {
	if e.opts.Failpoint != "" && e.opts.Failpoint == name {
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
