//go:build linux

package fsid

import (
	"io/fs"
	"syscall"
)

// DevIno returns a file's device and inode numbers (0, 0 when fi is not
// from a stat).
func DevIno(fi fs.FileInfo) (dev, ino uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return uint64(st.Dev), st.Ino
}

// InoCtime returns a file's inode number and status-change time, in
// nanoseconds (0 and the modification time when fi is not from a stat).
func InoCtime(fi fs.FileInfo) (ino uint64, ctime int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fi.ModTime().UnixNano()
	}
	return st.Ino, st.Ctim.Nano()
}
