//go:build linux

package fence

import (
	"io/fs"
	"syscall"
)

// inode returns a file's inode number and status-change time.
func inode(fi fs.FileInfo) (uint64, int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino, st.Ctim.Nano()
	}
	return 0, fi.ModTime().UnixNano()
}
