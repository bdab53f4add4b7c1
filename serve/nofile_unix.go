//go:build unix

package serve

import "syscall"

// nofile is the process's descriptor limit (the soft one, which Go has
// raised to the hard one); unlimited counts as 2^30.
func nofile() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return int(min(uint64(r.Cur), 1<<30))
}
