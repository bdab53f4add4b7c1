package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// guard is one protected or hidden workspace path as normalize leaves it.
type guard struct {
	rel  string // clean, relative to the workspace
	dir  bool   // a directory when absent (the entry ended in "/")
	hide bool   // Policy.Hide: unreadable too
}

// parseGuards checks Protect and Hide entries: relative paths inside the
// workspace, a trailing "/" marking a directory.
func parseGuards(protect, hide []string) ([]guard, error) {
	var gs []guard
	for _, list := range []struct {
		paths []string
		hide  bool
		what  string
	}{{protect, false, "protected"}, {hide, true, "hidden"}} {
		for _, p := range list.paths {
			rel := filepath.Clean(p)
			if rel == "." || !filepath.IsLocal(rel) {
				return nil, fmt.Errorf("sandbox: %s path %q is not inside the workspace", list.what, p)
			}
			gs = append(gs, guard{rel: rel, dir: strings.HasSuffix(p, "/"), hide: list.hide})
		}
	}
	return gs, nil
}

// placeholder is a file or directory the box made in the workspace so a
// protected path that did not exist has something to be mounted over.
type placeholder struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
	Dir  bool   `json:"dir"`
}

// makePlaceholders makes every guarded path exist under ws, so bwrap can
// mount over it, and returns the guards as they are to be mounted. A
// mount needs an existing mount point; left absent, a path in the
// writable workspace could be created by a program (a planted
// .claude/agents definition, a deputy.yaml that turns the sandbox off)
// and deputy would trust it at its next run. The first missing component
// of the path is made, empty: a directory if more of the path lies below
// it or the entry names a directory, else an empty file; a guard below a
// fresh placeholder guards the placeholder instead (nothing below it
// exists to keep apart). Nothing runs in the box yet, and every step goes
// through an os.Root, so a symlink planted by an earlier session cannot
// send deputy's own writes outside the workspace. A guarded path that is
// a symlink is refused: a mount follows it, and the link itself, in the
// writable workspace, could be replaced.
func makePlaceholders(ws string, gs []guard) ([]guard, []placeholder, error) {
	r, err := os.OpenRoot(ws)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: protect paths in %s: %w", ws, err)
	}
	defer r.Close()
	var made []placeholder
	fail := func(err error) ([]guard, []placeholder, error) {
		removePlaceholders(made)
		return nil, nil, err
	}
	out := make([]guard, 0, len(gs))
	for _, g := range gs {
		parts := strings.Split(g.rel, string(filepath.Separator))
		for i := range parts {
			rel := filepath.Join(parts[:i+1]...)
			fi, err := r.Lstat(rel)
			if err == nil {
				if fi.Mode()&fs.ModeSymlink != 0 {
					t, _ := os.Readlink(filepath.Join(ws, rel))
					return fail(fmt.Errorf("sandbox: the protected path %s is a symlink (to %s): a sandboxed program could "+
						"replace the link, and a mount over it would follow it; make %s a real file or directory", rel, t, rel))
				}
				if i == len(parts)-1 {
					out = append(out, g)
				}
				continue
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return fail(fmt.Errorf("sandbox: protected path %s: %w", g.rel, err))
			}
			dir := g.dir || i < len(parts)-1
			if dir {
				err = r.Mkdir(rel, 0o755)
			} else {
				var f *os.File
				if f, err = r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
					err = f.Close()
				}
			}
			if err != nil {
				return fail(fmt.Errorf("sandbox: make a placeholder for the protected path %s: %w", g.rel, err))
			}
			if fi, err = r.Lstat(rel); err != nil {
				return fail(fmt.Errorf("sandbox: placeholder %s: %w", rel, err))
			}
			dev, ino := devIno(fi)
			made = append(made, placeholder{Path: filepath.Join(ws, rel), Dev: dev, Ino: ino, Dir: dir})
			out = append(out, guard{rel: rel, dir: dir, hide: g.hide})
			break
		}
	}
	return out, made, nil
}

// removePlaceholders removes the placeholders that are still the box's
// own and still empty: one that was replaced, or filled from the host
// meanwhile, is someone's work and stays. Call it only once no sandbox of
// the box is alive: removing a path that is a mount point in another
// mount namespace detaches that mount there, which would lift the
// protection from a running program. Failures are ignored: an empty
// placeholder left behind is harmless (an empty directory, or an empty
// file where none was).
func removePlaceholders(ps []placeholder) {
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		fi, err := os.Lstat(p.Path)
		if err != nil {
			continue
		}
		if dev, ino := devIno(fi); dev != p.Dev || ino != p.Ino || fi.IsDir() != p.Dir {
			continue
		}
		if !p.Dir && fi.Size() != 0 {
			continue
		}
		_ = os.Remove(p.Path) // a directory that is not empty refuses, atomically
	}
}

// guardArgs are the bwrap options that make the guarded paths read-only
// (bound over themselves) or unreadable (an empty read-only tmpfs over a
// directory, /dev/null over a file), after the roots so they win. Every
// path exists by now (makePlaceholders), so no -try: a bind that cannot be
// made stops the sandbox instead of leaving the path writable.
func guardArgs(ws string, gs []guard) ([]string, error) {
	var a []string
	for _, hide := range []bool{false, true} {
		for _, g := range gs {
			if g.hide != hide {
				continue
			}
			at := filepath.Join(ws, g.rel)
			if !hide {
				a = append(a, "--ro-bind", at, at)
				continue
			}
			fi, err := os.Lstat(at)
			if err != nil {
				return nil, fmt.Errorf("sandbox: hidden path %s: %w", g.rel, err)
			}
			if fi.IsDir() {
				a = append(a, "--tmpfs", at, "--remount-ro", at)
			} else {
				a = append(a, "--ro-bind", "/dev/null", at)
			}
		}
	}
	return a, nil
}

// placeholderRecord is the file, in a directory of the state directory
// named after the deputy process, that lists a box's placeholders, so
// that Sweep removes those of a process that died before its Close (an
// empty deputy.yaml left in a workspace would shadow ~/.deputy's). It
// lies outside everything a sandbox sees, so no program can add a path to
// it; and removal only ever takes an empty placeholder of the recorded
// inode.
const placeholderRecord = "placeholders.json"

// recordPlaceholders writes the record; it returns its directory ("" when
// there is nothing to record).
func recordPlaceholders(stateDir string, ps []placeholder) (string, error) {
	if len(ps) == 0 {
		return "", nil
	}
	dir, err := os.MkdirTemp(stateDir, statePrefix("guard"))
	if err != nil {
		return "", fmt.Errorf("sandbox: record the placeholders: %w", err)
	}
	b, _ := json.Marshal(ps)
	if err := os.WriteFile(filepath.Join(dir, placeholderRecord), b, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("sandbox: record the placeholders: %w", err)
	}
	return dir, nil
}

// sweepPlaceholders removes what a dead process's record lists.
func sweepPlaceholders(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, placeholderRecord))
	if err != nil {
		return
	}
	var ps []placeholder
	if json.Unmarshal(b, &ps) == nil {
		removePlaceholders(ps)
	}
}
