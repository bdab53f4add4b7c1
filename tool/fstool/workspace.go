package fstool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Workspace is the directory tree the file tools may touch. Every path a
// model gives is checked twice: lexically and by walking its symlinks here,
// which yields a clear message for the model, and then by os.Root, which
// the kernel enforces at open time, so a symlink swapped in between the
// check and the use still cannot lead outside (no TOCTOU gap).
type Workspace struct {
	dir  string // absolute and clean, as configured; used in messages
	real string // dir with its own symlinks resolved, for absolute paths spelled either way
	// readOnly are workspace-relative paths the writing tools refuse
	// (ReadOnly).
	readOnly []string
	// hidden are workspace-relative paths no file tool reads, lists or
	// writes (Hide).
	hidden []string
}

// ReadOnly returns the workspace with paths (relative to its root, each a
// file or a whole directory) that write_file and edit_file refuse: a
// fenced child's .git (hooks and config run code outside its fence) and
// deputy's own files.
func (w *Workspace) ReadOnly(paths ...string) *Workspace {
	c := *w
	c.readOnly = append([]string(nil), w.readOnly...) // not the receiver's backing array
	for _, p := range paths {
		c.readOnly = append(c.readOnly, filepath.ToSlash(filepath.Clean(p)))
	}
	return &c
}

// writable refuses a resolved workspace-relative path under a read-only
// one.
func (w *Workspace) writable(rel, asked string) error {
	rel = filepath.ToSlash(filepath.Clean(rel))
	for _, p := range w.readOnly {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return fmt.Errorf("%s is read-only here (%s is not this subagent's to change)", asked, p)
		}
	}
	return nil
}

// NewWorkspace returns the workspace rooted at dir, which must be an
// existing directory.
func NewWorkspace(dir string) (*Workspace, error) {
	if dir == "" {
		return nil, errors.New("workspace: no directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s: not a directory", dir)
	}
	return &Workspace{dir: abs, real: real}, nil
}

// Dir is the workspace root as configured (absolute).
func (w *Workspace) Dir() string { return w.dir }

// open opens the root for one tool call. The tools open it per call rather
// than holding a descriptor for the life of the workspace: it costs one
// openat and spares every owner of a tool set a Close.
func (w *Workspace) open() (*os.Root, error) {
	r, err := os.OpenRoot(w.real)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", w.dir, err)
	}
	return r, nil
}

// OutsideError is the refusal of a path that leads out of the workspace.
type OutsideError struct {
	Path      string // as the model gave it
	Workspace string
	Via       string // the symlink that leads out, if one does
	Target    string // where that symlink points
}

func (e *OutsideError) Error() string {
	msg := fmt.Sprintf("path %q is outside the workspace %s", e.Path, e.Workspace)
	if e.Via != "" {
		msg += fmt.Sprintf(" (symlink %q points to %q)", e.Via, e.Target)
	}
	return msg + "; only files inside the workspace can be used"
}

// lexical turns a model's path into a clean relative path inside the root,
// without touching the file system. Absolute paths are accepted when they
// lie inside the workspace.
func (w *Workspace) lexical(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	if filepath.IsAbs(p) {
		rel, ok := w.within(p)
		if !ok {
			return "", &OutsideError{Path: p, Workspace: w.dir}
		}
		return rel, nil
	}
	rel := filepath.Clean(p)
	if escapes(rel) {
		return "", &OutsideError{Path: p, Workspace: w.dir}
	}
	return rel, nil
}

// within reports whether the absolute path abs lies in the workspace and
// returns it relative to the root.
func (w *Workspace) within(abs string) (string, bool) {
	abs = filepath.Clean(abs)
	for _, base := range []string{w.dir, w.real} {
		if rel, err := filepath.Rel(base, abs); err == nil && !escapes(rel) {
			return rel, true
		}
	}
	return "", false
}

func escapes(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel)
}

// maxHops bounds symlink expansion, like the kernel's ELOOP limit.
const maxHops = 40

// resolve maps a model's path to a path relative to r with every symlink
// expanded, refusing when any step leaves the workspace. Components that
// do not exist yet (a file about to be written) are kept as they are.
// Absolute symlinks that point inside the workspace are allowed here,
// which os.Root alone would refuse.
func (w *Workspace) resolve(r *os.Root, p string) (string, error) {
	rel, err := w.lexical(p)
	if err != nil {
		return "", err
	}
	pending := splitPath(rel)
	var done []string
	missing := false // a component did not exist; the rest is lexical
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", &OutsideError{Path: p, Workspace: w.dir}
			}
			done = done[:len(done)-1]
			continue
		}
		cur := filepath.Join(append(done, c)...)
		if missing {
			done = append(done, c)
			continue
		}
		fi, err := r.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			missing = true
			done = append(done, c)
			continue
		}
		if err != nil {
			return "", w.pathErr(p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if hops++; hops > maxHops {
			return "", fmt.Errorf("path %q: too many levels of symbolic links", p)
		}
		target, err := r.Readlink(cur)
		if err != nil {
			return "", w.pathErr(p, err)
		}
		if filepath.IsAbs(target) {
			in, ok := w.within(target)
			if !ok {
				return "", &OutsideError{Path: p, Workspace: w.dir, Via: filepath.ToSlash(cur), Target: target}
			}
			done = nil
			pending = append(splitPath(in), pending...)
			continue
		}
		// A relative target is read from the link's directory, which is
		// exactly done; climbing above the root is caught by "..".
		if escapes(filepath.Join(append(append([]string{}, done...), target)...)) {
			return "", &OutsideError{Path: p, Workspace: w.dir, Via: filepath.ToSlash(cur), Target: target}
		}
		pending = append(splitPath(target), pending...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return filepath.Join(done...), nil
}

func splitPath(p string) []string {
	return strings.Split(filepath.ToSlash(p), "/")
}

// display is how a workspace-relative path is shown to the model.
func display(rel string) string { return filepath.ToSlash(rel) }

// pathErr rewrites a file system error for the model: the path it gave,
// the bare cause, and os.Root's escape refusal (possible only when a
// symlink changed after resolve checked it) as an OutsideError.
func (w *Workspace) pathErr(p string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if isEscape(pe.Err) {
			return &OutsideError{Path: p, Workspace: w.dir}
		}
		return fmt.Errorf("%s: %w", p, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		if isEscape(le.Err) {
			return &OutsideError{Path: p, Workspace: w.dir}
		}
		return fmt.Errorf("%s: %w", p, le.Err)
	}
	return fmt.Errorf("%s: %w", p, err)
}

// isEscape recognizes os.Root's refusal, which has no exported sentinel.
func isEscape(err error) bool {
	return err != nil && err.Error() == "path escapes from parent"
}
