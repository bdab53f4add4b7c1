//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"time"
)

// The sandbox is made of Linux namespaces; elsewhere New and Available
// fail and these are never reached.
const supported = false

var errUnsupported = errors.New("the sandbox needs Linux")

type pidfd int

func openPidfd(int) (pidfd, error)    { return -1, errUnsupported }
func (pidfd) kill()                   {}
func (pidfd) wait(time.Duration) bool { return true }
func (pidfd) exited() bool            { return true }
func (pidfd) close()                  {}

var errGone = errors.New("no such process")

func childOf(pidfd, int, int) bool                 { return false }
func released(*os.File, pidfd, time.Duration) bool { return true }

func setLimits(int, int, int64) error { return errUnsupported }
func landlockABI() (int, error)       { return 0, errUnsupported }

type cgroup struct {
	dirs           []string
	pids, mem, cpu string
	v2             map[string]bool
}

type cgroupLimits struct {
	tasks int
	mem   int64
	cpus  float64
}

func newCgroup(cgroupLimits) (*cgroup, map[string]error) {
	return nil, map[string]error{"pids": errUnsupported, "memory": errUnsupported, "cpu": errUnsupported}
}
func (*cgroup) add(int) error    { return errUnsupported }
func (*cgroup) tasks() int       { return 0 }
func (*cgroup) refused() int64   { return 0 }
func (*cgroup) oomKills() int64  { return 0 }
func (*cgroup) throttled() int64 { return 0 }
func (*cgroup) remove() error    { return nil }
func (*cgroup) hasPids() bool    { return false }
func (*cgroup) hasMemory() bool  { return false }
func (*cgroup) hasCPU() bool     { return false }

var controllers = []string{"pids", "memory", "cpu"}

const cgroupFix = "the sandbox needs Linux"

const noFollow = 0

func alive(int) bool { return true }

func lockGuards(string) (func(), error) { return nil, errUnsupported }
