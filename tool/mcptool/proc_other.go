//go:build !unix

package mcptool

import "os/exec"

func ownGroup(*exec.Cmd) {}

func killGroup(*exec.Cmd) {}
