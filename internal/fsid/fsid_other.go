//go:build !linux

package fsid

import "io/fs"

// DevIno returns 0, 0: the sandbox, which needs it, needs Linux.
func DevIno(fs.FileInfo) (dev, ino uint64) { return 0, 0 }

// InoCtime falls back to the modification time where there is no ctime
// to read portably (fenced children need Linux anyway, except worktrees).
func InoCtime(fi fs.FileInfo) (ino uint64, ctime int64) { return 0, fi.ModTime().UnixNano() }
