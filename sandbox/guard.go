package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/deputy-run/deputy/internal/fsid"
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

// placeholder is one protected path a box binds over: a file or
// directory the box made in the workspace so a protected path that did not
// exist has something to be mounted over, or (Found) one it found there.
type placeholder struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
	Dir  bool   `json:"dir"`
	// Found: the path was there, the user's, not a placeholder of a box
	// (records written before found paths were recorded have none).
	Found bool `json:"found,omitempty"`
}

// Boxes sharing a workspace share its placeholders, and removing one is
// the dangerous step: unlinking a path that is a mount point in another
// mount namespace detaches that mount there, so a box that removed "its"
// placeholder while another box's sandbox was bound over it would make
// the path writable in that sandbox (a planted .claude/agents definition,
// a deputy.yaml that turns the sandbox off, reaching the host). So:
//
//   - Every box without a snapshot records, in the state directory, every
//     protected path it binds, made or found, under its pid (the
//     deputy-guard-PID-* directory). A snapshot's placeholders are in its
//     private copy, which nothing else binds.
//   - Making, recording and removing happen under one lock, a flock on
//     deputy-guards.lock in the state directory (one for all workspaces:
//     the critical sections are a few stats and a small file, and Sweep
//     works across workspaces).
//   - A placeholder is removed (Close, or Sweep for a dead process) only if
//     no record of a live process other than the one being dropped names
//     its path, and only if it is still the recorded inode and empty.
//   - A box that finds a placeholder some record lists as made by a box
//     takes it as a placeholder too (not Found), so the last box to go
//     removes it, whichever made it.
//   - Before each command the box checks that every path it binds exists,
//     and makes again, under the lock, what something that does not
//     coordinate removed (a deputy with another state directory, an older
//     one, the user): otherwise bwrap cannot find the mount's source and
//     every later command fails. What such a removal detached in a sandbox
//     already running is not repaired; the lock only orders boxes that
//     share the state directory (every deputy's default, os.TempDir()).
//
// The records lie outside everything a sandbox sees, so no program can add
// a path to them.

// makePlaceholders makes every guarded path exist under ws, so bwrap can
// mount over it, and returns the guards as they are to be mounted and
// what is bound (made or found), to be recorded. A mount needs an
// existing mount point; left absent, a path in the writable workspace
// could be created by a program (a planted .claude/agents definition, a
// deputy.yaml that turns the sandbox off) and deputy would trust it at its
// next run. The first missing component of the path is made, empty: a
// directory if more of the path lies below it or the entry names a
// directory, else an empty file; a guard below a fresh placeholder guards
// the placeholder instead (nothing below it exists to keep apart). Nothing
// runs in the box yet, and every step goes through an os.Root, so a
// symlink planted by an earlier session cannot send deputy's own writes
// outside the workspace. A guarded path that is a symlink is refused: a
// mount follows it, and the link itself, in the writable workspace, could
// be replaced. known reports whether a path found is a placeholder some
// box recorded (nil: none is).
func makePlaceholders(ws string, gs []guard, known func(placeholder) bool) ([]guard, []placeholder, error) {
	r, err := os.OpenRoot(ws)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: protect paths in %s: %w", ws, err)
	}
	defer r.Close()
	var bound []placeholder
	fail := func(err error) ([]guard, []placeholder, error) {
		removePlaceholders(bound, nil)
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
					return fail(symlinkError(ws, rel))
				}
				if i == len(parts)-1 {
					out = append(out, g)
					dev, ino := fsid.DevIno(fi)
					p := placeholder{Path: filepath.Join(ws, rel), Dev: dev, Ino: ino, Dir: fi.IsDir()}
					p.Found = known == nil || !known(p)
					bound = append(bound, p)
				}
				continue
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return fail(fmt.Errorf("sandbox: protected path %s: %w", g.rel, err))
			}
			dir := g.dir || i < len(parts)-1
			p, err := makeOne(r, ws, rel, dir)
			if err != nil {
				return fail(fmt.Errorf("sandbox: make a placeholder for the protected path %s: %w", g.rel, err))
			}
			bound = append(bound, p)
			out = append(out, guard{rel: rel, dir: dir, hide: g.hide})
			break
		}
	}
	return out, bound, nil
}

func symlinkError(ws, rel string) error {
	t, _ := os.Readlink(filepath.Join(ws, rel))
	return fmt.Errorf("sandbox: the protected path %s is a symlink (to %s): a sandboxed program could "+
		"replace the link, and a mount over it would follow it; make %s a real file or directory", rel, t, rel)
}

// makeOne makes the empty placeholder rel (its parent exists).
func makeOne(r *os.Root, ws, rel string, dir bool) (placeholder, error) {
	var err error
	if dir {
		err = r.Mkdir(rel, 0o755)
	} else {
		var f *os.File
		if f, err = r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		return placeholder{}, err
	}
	fi, err := r.Lstat(rel)
	if err != nil {
		return placeholder{}, err
	}
	dev, ino := fsid.DevIno(fi)
	return placeholder{Path: filepath.Join(ws, rel), Dev: dev, Ino: ino, Dir: dir}, nil
}

// removePlaceholders removes the placeholders (not the Found paths) that
// are still the box's own and still empty, and that no path of inUse
// names: one that was replaced, or filled from the host meanwhile, is
// someone's work and stays; one in use is another live box's mount point.
// Call it only once no sandbox of the box is alive, and under the lock
// when inUse comes from the records. Failures are ignored: an empty
// placeholder left behind is harmless (an empty directory, or an empty
// file where none was).
func removePlaceholders(ps []placeholder, inUse map[string]bool) {
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		if p.Found || inUse[p.Path] {
			continue
		}
		fi, err := os.Lstat(p.Path)
		if err != nil {
			continue
		}
		if dev, ino := fsid.DevIno(fi); dev != p.Dev || ino != p.Ino || fi.IsDir() != p.Dir {
			continue
		}
		if !p.Dir && fi.Size() != 0 {
			continue
		}
		_ = os.Remove(p.Path) // a directory that is not empty refuses, atomically
	}
}

// remakePlaceholders makes again, before a command, what was removed from
// under the box (see above), and reports whether anything changed; the
// caller holds the lock and rewrites the record. Missing parents (the
// workspace's own directories, removed from the host) are made as
// placeholders too.
func remakePlaceholders(ws string, ps []placeholder) ([]placeholder, bool, error) {
	r, err := os.OpenRoot(ws)
	if err != nil {
		return ps, false, fmt.Errorf("sandbox: protect paths in %s: %w", ws, err)
	}
	defer r.Close()
	changed := false
	out := make([]placeholder, 0, len(ps))
	for _, p := range ps {
		rel, err := filepath.Rel(ws, p.Path)
		if err != nil || !filepath.IsLocal(rel) {
			out = append(out, p)
			continue
		}
		parts := strings.Split(rel, string(filepath.Separator))
		for i := range parts {
			sub := filepath.Join(parts[:i+1]...)
			last := i == len(parts)-1
			fi, err := r.Lstat(sub)
			if err == nil {
				if fi.Mode()&fs.ModeSymlink != 0 {
					return out, changed, symlinkError(ws, sub)
				}
				if last {
					out = append(out, p)
				}
				continue
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return out, changed, fmt.Errorf("sandbox: protected path %s: %w", rel, err)
			}
			made, err := makeOne(r, ws, sub, !last || p.Dir)
			if err != nil {
				return out, changed, fmt.Errorf("sandbox: make the placeholder for the protected path %s again: %w", rel, err)
			}
			changed = true
			out = append(out, made) // a parent before its child, so removal takes the child first
		}
	}
	return out, changed, nil
}

// missingPlaceholder reports whether a path the box binds is gone (or is
// no longer a real file or directory): the fast check before a command.
func missingPlaceholder(ps []placeholder) bool {
	for _, p := range ps {
		fi, err := os.Lstat(p.Path)
		if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			return true
		}
	}
	return false
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
// named after the deputy process, that lists what a box binds, so that
// other boxes leave it in place while the box lives and Sweep removes the
// placeholders of a process that died before its Close (an empty
// deputy.yaml left in a workspace would shadow ~/.deputy's).
const placeholderRecord = "placeholders.json"

// guardLockName is the lock file, in the state directory, that orders the
// making, recording and removal of placeholders.
const guardLockName = "deputy-guards.lock"

// recordPlaceholders writes a new record; it returns its directory (""
// when there is nothing to record).
func recordPlaceholders(stateDir string, ps []placeholder) (string, error) {
	if len(ps) == 0 {
		return "", nil
	}
	dir, err := os.MkdirTemp(stateDir, statePrefix("guard"))
	if err != nil {
		return "", fmt.Errorf("sandbox: record the placeholders: %w", err)
	}
	if err := rewriteRecord(dir, ps); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// rewriteRecord replaces the record in dir, atomically (a reader without
// the lock, none today, would see the old list or the new).
func rewriteRecord(dir string, ps []placeholder) error {
	b, _ := json.Marshal(ps)
	tmp := filepath.Join(dir, placeholderRecord+".new")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("sandbox: record the placeholders: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, placeholderRecord)); err != nil {
		return fmt.Errorf("sandbox: record the placeholders: %w", err)
	}
	return nil
}

// guardRecord is one box's record as read back.
type guardRecord struct {
	dir  string
	live bool // its process runs (this one included)
	ps   []placeholder
}

// readRecords reads every box's record in stateDir; call it under the
// lock.
func readRecords(stateDir string) []guardRecord {
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		return nil
	}
	var out []guardRecord
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "deputy-guard-") {
			continue
		}
		pid, ok := stateOwner(e.Name())
		if !ok {
			continue
		}
		dir := filepath.Join(stateDir, e.Name())
		rec := guardRecord{dir: dir, live: pid == os.Getpid() || alive(pid)}
		if b, err := os.ReadFile(filepath.Join(dir, placeholderRecord)); err == nil {
			_ = json.Unmarshal(b, &rec.ps)
		}
		out = append(out, rec)
	}
	return out
}

// inUse is the set of paths that live records other than skip name.
func inUse(recs []guardRecord, skip func(guardRecord) bool) map[string]bool {
	m := map[string]bool{}
	for _, r := range recs {
		if !r.live || skip(r) {
			continue
		}
		for _, p := range r.ps {
			m[p.Path] = true
		}
	}
	return m
}

// knownPlaceholder reports whether some record, live or not, lists p
// (same path and inode) as a placeholder a box made.
func knownPlaceholder(recs []guardRecord) func(placeholder) bool {
	return func(p placeholder) bool {
		for _, r := range recs {
			for _, q := range r.ps {
				if !q.Found && q.Path == p.Path && q.Dev == p.Dev && q.Ino == p.Ino && q.Dir == p.Dir {
					return true
				}
			}
		}
		return false
	}
}

// sweepPlaceholders removes, under the lock, what the records of dead
// processes list and no live record names, and the dead records.
func sweepPlaceholders(stateDir string) error {
	if !supported {
		return nil // no box was ever made
	}
	unlock, err := lockGuards(stateDir)
	if err != nil {
		return err
	}
	defer unlock()
	recs := readRecords(stateDir)
	busy := inUse(recs, func(guardRecord) bool { return false })
	var errs []error
	for _, r := range recs {
		if r.live {
			continue
		}
		removePlaceholders(r.ps, busy)
		if err := removeTree(r.dir); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: sweep: %w", err))
		}
	}
	return errors.Join(errs...)
}
