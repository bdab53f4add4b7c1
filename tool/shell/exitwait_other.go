//go:build !linux

package shell

import "os"

// awaitExit reports false: golang.org/x/sys/unix offers waitid (to wait
// without reaping) on Linux only, so elsewhere Bash.Run reaps the leader
// first and kills its group afterwards.
func awaitExit(*os.Process) bool { return false }
