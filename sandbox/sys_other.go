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

const cgroupFix = "the sandbox needs Linux"

const noFollow = 0

func alive(int) bool { return true }

func lockGuards(string) (func(), error) { return nil, errUnsupported }
