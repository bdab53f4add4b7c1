package fstool

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Hide returns the workspace with paths (relative to its root, each a file
// or a whole directory, "dir/" and "dir" alike) that do not exist for the
// file tools: read_file, edit_file, write_file, glob and grep refuse them
// when named (through a symlink too) and skip them when walking. A hidden
// path is recognized by its name, symlinks resolved, and by its identity
// (a hard link to a hidden file is as hidden; a file hard-linked out of a
// hidden directory is not). It is how
// deputy's database of every run's transcripts and its server's token stay
// out of a model's reach (the sandbox hides them from programs; these
// tools run in deputy's own process, outside it).
func (w *Workspace) Hide(paths ...string) *Workspace {
	c := *w
	c.hidden = append([]string(nil), w.hidden...)
	for _, p := range paths {
		c.hidden = append(c.hidden, filepath.ToSlash(filepath.Clean(p)))
	}
	return &c
}

// HiddenError is the refusal of a hidden path (Workspace.Hide).
type HiddenError struct {
	Path   string // as the model gave it
	Hidden string // the hidden path it is, or lies under
}

func (e *HiddenError) Error() string {
	return fmt.Sprintf("%s is hidden from the file tools: %s holds deputy's own data (the database of every "+
		"run's transcripts, the server's token), which is not for this agent to read, list or change", e.Path, e.Hidden)
}

// hider is a workspace's hidden paths as they are on disk at one tool
// call: each as configured and with its symlinks resolved (a .deputy that
// is a link to state/ hides state/), and the identity of those that
// exist, which recognizes them however they are reached (another case of
// the name on a case-insensitive file system, a hard link, a directory
// swapped for a symlink after resolve checked it).
type hider struct {
	paths []hiddenPath
	files []hiddenFile
}

type hiddenPath struct{ path, as string }

type hiddenFile struct {
	fi os.FileInfo
	as string
}

// hider reads the hidden paths' state for one call; nil when none are
// hidden (its methods take a nil receiver).
func (w *Workspace) hider(r *os.Root) *hider {
	if len(w.hidden) == 0 {
		return nil
	}
	h := &hider{}
	for _, p := range w.hidden {
		if p == "." || escapes(p) {
			continue // never the whole workspace, and outside is refused anyway
		}
		h.paths = append(h.paths, hiddenPath{p, p})
		res, err := w.resolve(r, p)
		if err != nil {
			continue // a link out of the workspace: reaching it is refused as outside
		}
		if res = filepath.ToSlash(res); res == "." {
			continue // a link to the root: its own name stays hidden, not the workspace
		}
		if res != p {
			h.paths = append(h.paths, hiddenPath{res, p})
		}
		if fi, err := r.Lstat(res); err == nil {
			h.files = append(h.files, hiddenFile{fi, p})
		}
	}
	return h
}

// covers returns the hidden path that rel (resolved, relative to the root)
// is or lies under, or "".
func (h *hider) covers(rel string) string {
	if h == nil {
		return ""
	}
	rel = filepath.ToSlash(filepath.Clean(rel))
	for _, p := range h.paths {
		if rel == p.path || strings.HasPrefix(rel, p.path+"/") {
			return p.as
		}
	}
	return ""
}

// same returns the hidden path that fi is, or "".
func (h *hider) same(fi os.FileInfo) string {
	if h == nil {
		return ""
	}
	for _, f := range h.files {
		if os.SameFile(fi, f.fi) {
			return f.as
		}
	}
	return ""
}

// check refuses rel (resolved by Workspace.resolve) when it is hidden: by
// its path, or by the identity of it or of any directory above it.
func (h *hider) check(r *os.Root, rel, asked string) error {
	if h == nil {
		return nil
	}
	if p := h.covers(rel); p != "" {
		return &HiddenError{Path: asked, Hidden: p}
	}
	if len(h.files) == 0 {
		return nil
	}
	for p := filepath.Clean(rel); p != "." && p != string(filepath.Separator); p = filepath.Dir(p) {
		if fi, err := r.Lstat(p); err == nil {
			if as := h.same(fi); as != "" {
				return &HiddenError{Path: asked, Hidden: as}
			}
		}
	}
	return nil
}

// opened refuses a file opened for reading that turns out to be hidden:
// check saw the path before it was opened, and a concurrent program may
// have swapped a directory on it for a symlink into a hidden one
// meanwhile (a sandboxed sibling child on the same workspace: a child's
// own commands end before its next tool call, and writing tools never run
// alongside others), which os.Root follows since it stays in
// the workspace. The open file itself is what is judged: its identity,
// and, where /proc tells it (Linux), the path the kernel opened.
func (h *hider) opened(w *Workspace, f *os.File, asked string) error {
	if h == nil {
		return nil
	}
	if fi, err := f.Stat(); err == nil {
		if as := h.same(fi); as != "" {
			return &HiddenError{Path: asked, Hidden: as}
		}
	}
	at, ok := openedPath(f)
	if !ok {
		return nil
	}
	if rel, err := filepath.Rel(w.real, at); err == nil && !escapes(rel) {
		if as := h.covers(rel); as != "" {
			return &HiddenError{Path: asked, Hidden: as}
		}
	}
	return nil
}

// openedPath is the path the kernel opened f at, where /proc tells it
// (Linux): what a concurrent rename or symlink swap cannot disguise.
func openedPath(f *os.File) (string, bool) {
	at, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	return at, err == nil && filepath.IsAbs(at)
}

// readChecked reads the whole file rel, refusing it when what was opened
// is hidden (hider.opened).
func readChecked(r *os.Root, rel string, w *Workspace, hide *hider, asked string) ([]byte, error) {
	f, err := r.Open(rel)
	if err != nil {
		return nil, w.pathErr(asked, err)
	}
	defer f.Close()
	if err := hide.opened(w, f, asked); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, w.pathErr(asked, err)
	}
	return data, nil
}
