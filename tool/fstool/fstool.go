// Package fstool holds deputy's file tools: read_file, write_file,
// edit_file, glob and grep. All of them are confined to a Workspace: a path
// that leads outside it, lexically or through a symlink, is refused with a
// tool error, and the confinement is enforced by os.Root, not only checked.
package fstool

import (
	"bytes"
	"fmt"

	"github.com/deputy-run/deputy/tool"
)

// Limits bound what one call reads and returns. Zero fields take the
// defaults below.
type Limits struct {
	ReadLines    int   // lines read_file returns when no limit is given (2000)
	LineChars    int   // bytes of one line shown before it is cut (2000)
	OutputChars  int   // bytes one read_file or grep result may hold (45,000)
	MaxFileBytes int64 // larger files are refused by edit_file, skipped by grep, not line-counted by read_file (10 MiB)
	GlobResults  int   // paths glob lists (1000)
	GrepResults  int   // matching lines grep lists (200)
	WalkEntries  int   // directory entries glob and grep visit at most (200,000)
}

// The output default stays under tool.DefaultOutputLimit so that the
// loop's middle cut does not hit a file listing whose own note already
// says how to see the rest.
const (
	defReadLines    = 2000
	defLineChars    = 2000
	defOutputChars  = 45_000
	defMaxFileBytes = 10 << 20
	defGlobResults  = 1000
	defGrepResults  = 200
	defWalkEntries  = 200_000
)

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReadLines, defReadLines)
	def(&l.LineChars, defLineChars)
	def(&l.OutputChars, defOutputChars)
	def(&l.GlobResults, defGlobResults)
	def(&l.GrepResults, defGrepResults)
	def(&l.WalkEntries, defWalkEntries)
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = defMaxFileBytes
	}
	return l
}

// Tools returns the file tools in their stable order: read_file,
// write_file, edit_file, glob, grep.
func Tools(ws *Workspace, lim Limits) []tool.Tool {
	return []tool.Tool{
		NewReadFile(ws, lim),
		NewWriteFile(ws, lim),
		NewEditFile(ws, lim),
		NewGlob(ws, lim),
		NewGrep(ws, lim),
	}
}

// binarySniff is how much of a file is looked at to call it binary.
const binarySniff = 8000

// isBinary uses git's rule: a NUL byte in the first 8000 bytes.
func isBinary(head []byte) bool {
	if len(head) > binarySniff {
		head = head[:binarySniff]
	}
	return bytes.IndexByte(head, 0) >= 0
}

// sizeText shows a byte count the way a person would say it.
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
