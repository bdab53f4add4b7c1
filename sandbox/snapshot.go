package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/deputy-run/deputy/internal/fsid"
)

// snapshot is a copy of the workspace that the sandbox works in. The
// kernel offers no unprivileged overlay through bwrap 0.8, and an overlay
// mounted inside each command's sandbox would not be seen by the
// in-process file tools anyway; a copy is a real directory every tool can
// share. io.Copy uses copy_file_range, which reflinks where the file
// system can.
type snapshot struct {
	protect []string // Policy.Protect and Hide: never applied by commit
	orig    string   // the workspace
	tmp     string   // holds the copy; removed on drop
	copy    string

	// What each tree held when last in step: the copy's, to find what the
	// child changed; the workspace's, to find what changed under it
	// meanwhile (a conflict).
	origBase, copyBase map[string]entry

	dropOnce sync.Once
	dropErr  error
}

// entry is what a scan records of one file, enough to tell that it
// changed: ctime moves on every change to the inode and cannot be set back
// by a program.
type entry struct {
	mode   fs.FileMode // type and permissions
	size   int64
	ino    uint64
	ctime  int64
	target string // a symlink's
}

func (e entry) kind() fs.FileMode { return e.mode.Type() }

// Changes is what a Commit applied to the workspace: slash-separated
// paths relative to it, sorted.
type Changes struct {
	Added, Modified, Deleted []string
}

// ConflictError is a Commit refused because files the child changed were
// also changed in the workspace since the snapshot was taken.
type ConflictError struct {
	Paths []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("sandbox: commit refused: changed in the workspace since the snapshot as well: %s; nothing was applied",
		strings.Join(e.Paths, ", "))
}

// takeSnapshot copies ws into a new directory under dir. The guarded
// paths are never committed; the hidden ones are not even copied (the
// sandbox could not read them, and .deputy's database is large and
// changing).
func takeSnapshot(ws, dir string, gs []guard) (*snapshot, error) {
	tmp, err := os.MkdirTemp(dir, statePrefix("snapshot"))
	if err != nil {
		return nil, fmt.Errorf("sandbox: snapshot: %w", err)
	}
	s := &snapshot{orig: ws, tmp: tmp, copy: filepath.Join(tmp, filepath.Base(ws))}
	skip := map[string]bool{}
	for _, g := range gs {
		s.protect = append(s.protect, g.rel)
		if g.hide {
			skip[filepath.ToSlash(g.rel)] = true
		}
	}
	if s.origBase, err = copyTree(ws, s.copy, skip); err == nil {
		s.copyBase, err = scan(s.copy)
	}
	if err != nil {
		_ = s.drop()
		return nil, fmt.Errorf("sandbox: snapshot of %s: %w", ws, err)
	}
	return s, nil
}

// copyTree copies src to dst (which must not exist): directories, regular
// files and symlinks, with permissions and modification times; sockets,
// FIFOs and devices are left out, and so are the paths in skip (slash
// separated, relative to src). It returns the scan of src.
func copyTree(src, dst string, skip map[string]bool) (map[string]entry, error) {
	base := map[string]entry{}
	type dirFix struct {
		path string
		fi   fs.FileInfo
	}
	var dirs []dirFix
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if skip[filepath.ToSlash(rel)] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e, err := entryOf(p, fi)
		if err != nil {
			return err
		}
		base[filepath.ToSlash(rel)] = e
		to := filepath.Join(dst, rel)
		switch {
		case fi.IsDir():
			// Writable while filling it; its own mode is set at the end.
			if err := os.Mkdir(to, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirFix{to, fi})
		case fi.Mode().IsRegular():
			return copyFile(p, to, fi)
		case fi.Mode()&fs.ModeSymlink != 0:
			return os.Symlink(e.target, to)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].fi.Mode().Perm()); err != nil {
			return nil, err
		}
		if err := os.Chtimes(dirs[i].path, dirs[i].fi.ModTime(), dirs[i].fi.ModTime()); err != nil {
			return nil, err
		}
	}
	return base, nil
}

func copyFile(src, dst string, fi fs.FileInfo) error {
	in, err := os.OpenFile(src, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := fill(out, in, fi.Mode().Perm()); err != nil {
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}

// fill copies in into out, a file just created, gives out perm (by Chmod,
// because OpenFile's mode passes through the umask) and closes it,
// returning the first error. Both are *os.File so that io.Copy can use
// copy_file_range (see snapshot).
func fill(out, in *os.File, perm fs.FileMode) error {
	_, err := io.Copy(out, in)
	if err == nil {
		err = out.Chmod(perm)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func entryOf(p string, fi fs.FileInfo) (entry, error) {
	ino, ctime := fsid.InoCtime(fi)
	e := entry{mode: fi.Mode(), size: fi.Size(), ino: ino, ctime: ctime}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(p)
		if err != nil {
			return e, err
		}
		e.target = t
	}
	return e, nil
}

// scan records every directory, regular file and symlink under dir.
func scan(dir string) (map[string]entry, error) {
	m := map[string]entry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
			return nil
		}
		e, err := entryOf(p, fi)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		m[filepath.ToSlash(rel)] = e
		return nil
	})
	return m, err
}

// changedInCopy: a directory changes by its permissions (its ctime moves
// with every entry added), anything else by its inode.
func changedInCopy(was, now entry) bool {
	if was.kind() != now.kind() {
		return true
	}
	if now.mode.IsDir() {
		return was.mode != now.mode
	}
	return was != now
}

// commit applies the copy's changes since the last commit (or the
// snapshot) to the workspace, after checking that none of the paths
// involved changed in the workspace meanwhile.
func (s *snapshot) commit() (*Changes, error) {
	now, err := scan(s.copy)
	if err != nil {
		return nil, fmt.Errorf("sandbox: commit: scan the snapshot: %w", err)
	}
	ch := &Changes{}
	var del, put []string
	for rel := range now {
		if s.protected(rel) {
			delete(now, rel)
		}
	}
	for rel, was := range s.copyBase {
		if s.protected(rel) {
			continue
		}
		if n, ok := now[rel]; !ok {
			del = append(del, rel)
			ch.Deleted = append(ch.Deleted, rel)
		} else if n.kind() != was.kind() {
			del = append(del, rel)
		}
	}
	for rel, n := range now {
		was, ok := s.copyBase[rel]
		switch {
		case !ok:
			put = append(put, rel)
			ch.Added = append(ch.Added, rel)
		case changedInCopy(was, n):
			put = append(put, rel)
			ch.Modified = append(ch.Modified, rel)
		}
	}
	if err := s.conflicts(del, put, now); err != nil {
		return nil, err
	}
	ws, err := os.OpenRoot(s.orig)
	if err != nil {
		return nil, fmt.Errorf("sandbox: commit: %w", err)
	}
	defer ws.Close()
	cp, err := os.OpenRoot(s.copy)
	if err != nil {
		return nil, fmt.Errorf("sandbox: commit: %w", err)
	}
	defer cp.Close()

	// Children before parents for removals, parents before children for
	// the rest: reverse and forward lexical order do that.
	sort.Sort(sort.Reverse(sort.StringSlice(del)))
	for _, rel := range del {
		if err := ws.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("sandbox: commit (partly applied): remove %s: %w", rel, err)
		}
	}
	sort.Strings(put)
	for _, rel := range put {
		if err := apply(ws, cp, rel, now[rel]); err != nil {
			return nil, fmt.Errorf("sandbox: commit (partly applied): %s: %w", rel, err)
		}
	}
	if s.origBase, err = scan(s.orig); err != nil {
		return nil, fmt.Errorf("sandbox: commit applied, but rescanning the workspace failed: %w", err)
	}
	s.copyBase = now
	for _, l := range [][]string{ch.Added, ch.Modified, ch.Deleted} {
		sort.Strings(l)
	}
	return ch, nil
}

// protected reports whether rel lies under a protected path.
func (s *snapshot) protected(rel string) bool {
	rel = filepath.ToSlash(rel)
	for _, p := range s.protect {
		p = filepath.ToSlash(filepath.Clean(p))
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// conflicts checks each path to be removed or written against the
// workspace: it must be as it was at the last sync.
func (s *snapshot) conflicts(del, put []string, now map[string]entry) error {
	deleting := map[string]bool{}
	for _, rel := range del {
		deleting[rel] = true
	}
	seen := map[string]bool{}
	var bad []string
	for _, rel := range append(append([]string(nil), del...), put...) {
		if seen[rel] {
			continue
		}
		seen[rel] = true
		p := filepath.Join(s.orig, filepath.FromSlash(rel))
		fi, err := os.Lstat(p)
		was, inBase := s.origBase[rel]
		// ENOTDIR: a parent is no directory there; the parent's own
		// check covers it.
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			if inBase {
				bad = append(bad, rel)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("sandbox: commit: %w", err)
		}
		cur, err := entryOf(p, fi)
		if err != nil {
			return fmt.Errorf("sandbox: commit: %w", err)
		}
		switch {
		case !inBase:
			// Created there meanwhile; the same new directory on both
			// sides is no conflict.
			if !(cur.mode.IsDir() && now[rel].mode.IsDir()) {
				bad = append(bad, rel)
			}
		case cur.mode.IsDir() && was.mode.IsDir():
			// A directory to be removed must also hold what it held: its
			// ctime moves when an entry is added or removed.
			if cur.ino != was.ino || cur.mode != was.mode || (deleting[rel] && cur.ctime != was.ctime) {
				bad = append(bad, rel)
			}
		case cur != was:
			bad = append(bad, rel)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return &ConflictError{Paths: bad}
	}
	return nil
}

// apply makes rel in the workspace what it is in the copy. Files and
// symlinks are written beside their place and renamed over it, so a
// reader never sees half a file. Both trees are opened as os.Root: a
// symlink in either cannot lead the writes outside the workspace.
func apply(ws, cp *os.Root, rel string, e entry) error {
	rel = filepath.FromSlash(rel)
	tmp := filepath.Join(filepath.Dir(rel), ".deputy-commit-"+filepath.Base(rel))
	switch {
	case e.mode.IsDir():
		fi, err := ws.Lstat(rel)
		if err == nil && fi.IsDir() {
			return ws.Chmod(rel, e.mode.Perm())
		}
		if err := ws.Mkdir(rel, e.mode.Perm()); err != nil {
			return err
		}
		return ws.Chmod(rel, e.mode.Perm()) // past the umask
	case e.mode&fs.ModeSymlink != 0:
		_ = ws.Remove(tmp)
		if err := ws.Symlink(e.target, tmp); err != nil {
			return err
		}
		return ws.Rename(tmp, rel)
	default:
		in, err := cp.Open(rel)
		if err != nil {
			return err
		}
		defer in.Close()
		fi, err := in.Stat()
		if err != nil {
			return err
		}
		_ = ws.Remove(tmp)
		out, err := ws.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		err = fill(out, in, fi.Mode().Perm())
		if err == nil {
			err = ws.Rename(tmp, rel)
		}
		if err != nil {
			_ = ws.Remove(tmp)
			return err
		}
		return ws.Chtimes(rel, fi.ModTime(), fi.ModTime())
	}
}

// drop removes the copy.
func (s *snapshot) drop() error {
	s.dropOnce.Do(func() {
		if err := removeTree(s.tmp); err != nil {
			s.dropErr = fmt.Errorf("sandbox: remove the snapshot: %w", err)
		}
	})
	return s.dropErr
}

// removeTree removes a directory the sandboxed programs wrote in.
// Directories they made read-only are made writable first, or a non-root
// deputy could not empty them.
func removeTree(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// Commit applies the snapshot's changes to the workspace: call it when
// the child succeeded. It refuses while a command runs, and with a
// *ConflictError, applying nothing, when a path the child changed was
// changed in the workspace too since the snapshot. The box stays usable
// (a later Commit applies what changed since). Without Snapshot it is an
// error.
func (b *Box) Commit() (*Changes, error) {
	if b.snap == nil {
		return nil, errors.New("sandbox: Commit: the box has no snapshot (Policy.Snapshot)")
	}
	// Holding the lock keeps a command from starting meanwhile (Start
	// registers its run before anything runs in the sandbox).
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released || errors.Is(b.closed, errDiscarded) {
		return nil, errors.New("sandbox: Commit: the snapshot is gone (the box was closed or discarded)")
	}
	if len(b.runs) > 0 {
		return nil, errors.New("sandbox: Commit: commands are still running in the box")
	}
	return b.snap.commit()
}

var errDiscarded = fmt.Errorf("%w: its snapshot was discarded", ErrClosed)

// Discard drops the snapshot's changes (the child failed): it kills what
// runs in the box, removes the copy, and refuses further commands. The
// workspace is as it was, less what earlier Commits applied. Without
// Snapshot it does nothing.
func (b *Box) Discard() error {
	if b.snap == nil {
		return nil
	}
	b.stop(errDiscarded, "killed: the snapshot was discarded")
	return b.dropSnapshot()
}

func (b *Box) dropSnapshot() error {
	if b.snap == nil {
		return nil
	}
	return b.snap.drop()
}
