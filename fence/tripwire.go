package fence

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/deputy-run/deputy/internal/fsid"
)

// trusted are the workspace paths whose content deputy (or git) later
// trusts or executes: the subset of Protected the tripwire watches. The
// rest of Protected changes in normal use by deputy itself while a child
// runs (the database and its journal, the server's token, git's objects,
// refs and index as worktrees are made and committed), and none of that is
// read as a definition, setting or hook.
var trusted = []string{
	".deputy/agents", ".deputy/skills", // definitions and skills (agent.ProjectDirs, ProjectSkillDirs)
	".claude",                   // the same in Claude Code's layout, and its settings and hooks
	"deputy.yaml",               // tiers, MCP env grants, isolation.allow_unsandboxed
	".git/config", ".git/hooks", // run by git at the user's next command
	".git/info/attributes", // names filter drivers git runs
}

// TripwireError is a fence's end finding that files deputy trusts changed
// while its child ran: something wrote where the fence should have kept
// the child from writing (or a process outside the fence did meanwhile).
// The child's work is not kept; the files stay for the user to review,
// recorded in the workspace's UntrustedFile.
type TripwireError struct {
	ID      string
	Changed []string // absolute paths that appeared, changed or went
}

func (e *TripwireError) Error() string {
	return fmt.Sprintf("fence tripwire: while fenced child %s ran, files deputy trusts changed: %s; "+
		"its work was not kept; recorded in %s: deputy will not start on this workspace until you "+
		"review them and remove that file", e.ID, strings.Join(e.Changed, ", "), UntrustedFile)
}

// fileState is what the tripwire records of a file: enough to see any
// change. ctime moves with every change to an inode and cannot be set back
// by a program.
type fileState struct {
	mode  fs.FileMode
	size  int64
	ino   uint64
	ctime int64
}

// fingerprint records every file under the trusted paths of each of dirs
// (the parent's workspace and the fence's worktree). Directories and empty
// regular files are left out: they are what the sandbox's placeholders
// are (made and removed with each box), and neither defines, configures
// nor runs anything; what is put in them is recorded. A path that cannot
// be read is recorded as such: it changing is a change too.
func fingerprint(dirs []string) map[string]fileState {
	m := map[string]fileState{}
	for _, dir := range dirs {
		for _, rel := range trusted {
			_ = filepath.WalkDir(filepath.Join(dir, rel), func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					if !errors.Is(err, fs.ErrNotExist) {
						m[p] = fileState{mode: fs.ModeIrregular}
					}
					return nil
				}
				fi, err := d.Info()
				if err != nil || fi.IsDir() || fi.Mode().IsRegular() && fi.Size() == 0 {
					return nil
				}
				ino, ctime := fsid.InoCtime(fi)
				m[p] = fileState{mode: fi.Mode(), size: fi.Size(), ino: ino, ctime: ctime}
				return nil
			})
		}
	}
	return m
}

// changed lists the paths that differ between two fingerprints, sorted.
func changed(was, now map[string]fileState) []string {
	var out []string
	for p, s := range now {
		if w, ok := was[p]; !ok || w != s {
			out = append(out, p)
		}
	}
	for p := range was {
		if _, ok := now[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// tripwire is one fenced child's record of the trusted files.
type tripwire struct {
	dirs []string
	base map[string]fileState
}

func newTripwire(dirs ...string) *tripwire {
	return &tripwire{dirs: dirs, base: fingerprint(dirs)}
}

// check returns a *TripwireError when anything changed since the record.
func (t *tripwire) check(id string) error {
	if ch := changed(t.base, fingerprint(t.dirs)); len(ch) > 0 {
		return &TripwireError{ID: id, Changed: ch}
	}
	return nil
}
