package fstool

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
)

// errWalkLimit ends a walk that visited too many entries.
var errWalkLimit = errors.New("walk limit reached")

// walk visits the tree under start (a resolved, slash-separated path in r)
// in lexical order. It does not follow symlinks: a link is reported as an
// entry but never descended into, so a walk cannot leave the workspace or
// loop. .git and .deputy directories below start are skipped (see
// skipped); naming one as start walks it. fn gets slash-separated paths
// relative to r. Unreadable directories are skipped, not fatal. Hidden
// paths below start (hide; start itself the caller has checked) are
// skipped as if absent: not listed, not entered, not counted; so are the
// paths git ignores (.gitignore files, .git/info/exclude) unless
// withIgnored, and .deputy directories below start, deputy's own state.
func walk(ctx context.Context, r *os.Root, start string, maxEntries int, hide *hider, withIgnored bool, fn func(p string, d fs.DirEntry) error) (truncated bool, err error) {
	var ign *ignorer
	if !withIgnored {
		ign = newIgnorer(r, start)
	}
	visited := 0
	err = fs.WalkDir(r.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start {
				return err
			}
			return nil // an unreadable subdirectory does not spoil the rest
		}
		if p != start && (hide.covers(p) != "" || skipped(p, d) || ign.ignored(p, d.IsDir())) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if visited++; visited > maxEntries {
			return errWalkLimit
		}
		if visited%512 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if d.IsDir() {
			ign.enter(p)
		}
		return fn(p, d)
	})
	if errors.Is(err, errWalkLimit) {
		return true, nil
	}
	return false, err
}

// skipped reports whether the walk leaves p out whatever git ignores: a
// repository's .git (noise, and it can be huge) and deputy's own .deputy
// directories (its state, not the project's).
func skipped(p string, d fs.DirEntry) bool {
	if !d.IsDir() {
		return false
	}
	name := path.Base(p)
	return name == ".git" || name == ".deputy"
}
