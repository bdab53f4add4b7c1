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
// loop. .git directories below start are skipped (they are noise and can
// be huge); naming one as start walks it. fn gets slash-separated paths
// relative to r. Unreadable directories are skipped, not fatal. Hidden
// paths below start (hide; start itself the caller has checked) are
// skipped as if absent: not listed, not entered, not counted.
func walk(ctx context.Context, r *os.Root, start string, maxEntries int, hide *hider, fn func(p string, d fs.DirEntry) error) (truncated bool, err error) {
	visited := 0
	err = fs.WalkDir(r.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start {
				return err
			}
			return nil // an unreadable subdirectory does not spoil the rest
		}
		if p != start && hide.covers(p) != "" {
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
		if d.IsDir() && p != start && path.Base(p) == ".git" {
			return fs.SkipDir
		}
		return fn(p, d)
	})
	if errors.Is(err, errWalkLimit) {
		return true, nil
	}
	return false, err
}
