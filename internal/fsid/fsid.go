// Package fsid reads a file's identity from its fs.FileInfo: the device
// and inode numbers that tell a file from another put in its place, and
// the status-change time that tells it was changed. The sandbox and the
// fence's tripwire share it.
package fsid
