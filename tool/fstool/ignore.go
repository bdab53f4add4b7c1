package fstool

import (
	"bufio"
	"io"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// ignorer is what git ignores in one walk: the patterns of every
// .gitignore met so far and of .git/info/exclude, matched by go-git's
// gitignore package (git's rules: nested files, negations, anchored and
// directory-only patterns, "**"). Each pattern carries the directory it
// came from, so one list serves the whole walk: a sibling's patterns never
// match outside it. It is nil when ignored files are wanted (its methods
// take a nil receiver).
//
// Only files inside the workspace are read: a workspace that is a
// subdirectory of a repository does not see the .gitignore files above it,
// and neither core.excludesFile nor the global excludes are read (they
// are the user's, outside the workspace, and not the repository's rules).
type ignorer struct {
	r        *os.Root
	patterns []gitignore.Pattern // in git's order of increasing priority
}

// ignoreFileBytes caps one ignore file: more is not a list of patterns.
const ignoreFileBytes = 1 << 20

// newIgnorer returns the ignorer for a walk from start (resolved,
// relative to r): the patterns of the directories above start are read
// first, as git would have met them. It returns nil, ignoring nothing,
// when start itself is ignored: a path the model names is searched, as
// git lists an ignored file it is given.
func newIgnorer(r *os.Root, start string) *ignorer {
	ig := &ignorer{r: r}
	if start == "." {
		return ig
	}
	dir := "."
	for _, name := range strings.Split(start, "/") {
		ig.enter(dir)
		dir = path.Join(dir, name)
		if ig.ignored(dir, true) {
			return nil
		}
	}
	return ig
}

// enter adds the patterns of the directory dir, which the walk is about
// to descend into: its .git/info/exclude when it is a repository's top
// (the workspace's, or a nested repository's), then its .gitignore, which
// takes precedence.
func (ig *ignorer) enter(dir string) {
	if ig == nil {
		return
	}
	var domain []string
	if dir != "." {
		domain = strings.Split(dir, "/")
	}
	ig.read(path.Join(dir, ".git", "info", "exclude"), domain)
	ig.read(path.Join(dir, ".gitignore"), domain)
}

// read adds the patterns of the ignore file at p, if there is one, for
// paths under domain. Lines are git's: blank lines and comments are not
// patterns.
func (ig *ignorer) read(p string, domain []string) {
	f, err := ig.r.Open(p)
	if err != nil {
		return // none, or unreadable: nothing is ignored by it
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	sc := bufio.NewScanner(io.LimitReader(f, ignoreFileBytes))
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ig.patterns = append(ig.patterns, gitignore.ParsePattern(line, domain))
	}
}

// ignored reports whether git ignores p (slash-separated, relative to
// the workspace root).
func (ig *ignorer) ignored(p string, isDir bool) bool {
	if ig == nil || len(ig.patterns) == 0 {
		return false
	}
	return gitignore.NewMatcher(ig.patterns).Match(strings.Split(p, "/"), isDir)
}
