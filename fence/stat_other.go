//go:build !linux

package fence

import "io/fs"

// inode falls back to the modification time where there is no ctime to
// read portably (fenced children need Linux anyway, except worktrees).
func inode(fi fs.FileInfo) (uint64, int64) { return 0, fi.ModTime().UnixNano() }
