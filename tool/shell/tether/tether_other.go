//go:build !linux

package tether

import "os/exec"

func mode() string { return ModeNone }

func startTethered(build func() *exec.Cmd, start func(*exec.Cmd) error) (*exec.Cmd, error) {
	cmd := build()
	return cmd, start(cmd)
}

// Namespaced reports false: namespaces are Linux's.
func Namespaced(*exec.Cmd) bool { return false }
