//go:build !linux

package termui

import "os"

// isTerminal is false off Linux: output stays plain there until someone
// checks the escapes on that platform's terminals.
func isTerminal(*os.File) bool { return false }
