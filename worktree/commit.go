package worktree

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// FileStat is one file the branch changed, with its line counts (0 and 0,
// Binary true, for a binary file).
type FileStat struct {
	Path    string `json:"path"` // slash-separated, relative to the repository's top
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary,omitempty"`
}

// Summary is what a child's branch carries over the parent's HEAD.
type Summary struct {
	Branch  string     `json:"branch"`
	Commit  string     `json:"commit,omitempty"` // the branch's tip; "" when it carries nothing
	Files   []FileStat `json:"files,omitempty"`
	Added   int        `json:"added"`
	Deleted int        `json:"deleted"`
}

// Changed reports whether the branch carries any change.
func (s Summary) Changed() bool { return len(s.Files) > 0 }

// String is a one-line summary for a relay's artifacts:
// "branch deputy/i-abc: 3 files, +40 -2".
func (s Summary) String() string {
	if !s.Changed() {
		return "branch " + s.Branch + ": no changes"
	}
	files := "files"
	if len(s.Files) == 1 {
		files = "file"
	}
	return fmt.Sprintf("branch %s: %d %s, +%d -%d", s.Branch, len(s.Files), files, s.Added, s.Deleted)
}

func (t *Tree) check() error {
	if t == nil || t.Root == "" || t.Branch == "" || filepath.Base(filepath.Dir(t.Root)) != worktreesDir {
		return fmt.Errorf("not a worktree made by worktree.Add: %+v", t)
	}
	return nil
}

// Commit commits everything the child changed in its worktree (added,
// modified and deleted files; ignored files stay out) on its branch, and
// summarizes what the branch now carries over the parent's HEAD, commits the
// child made itself included. With no change there is no commit and the
// summary is empty. An empty message gets a default naming the instance.
func (t *Tree) Commit(ctx context.Context, message string) (Summary, error) {
	if err := t.check(); err != nil {
		return Summary{}, err
	}
	if strings.TrimSpace(message) == "" {
		message = "deputy: work of " + t.ID
	}
	unlock, err := lockRepo(ctx, t.common())
	if err != nil {
		return Summary{}, err
	}
	defer unlock()
	fail := func(err error) (Summary, error) {
		return Summary{}, fmt.Errorf("commit worktree %s: %w", t.ID, err)
	}

	tree, err := t.treeArgs()
	if err != nil {
		return fail(err)
	}
	ref, err := git(ctx, append(tree, "symbolic-ref", "-q", "HEAD")...)
	if err != nil || strings.TrimSpace(ref) != "refs/heads/"+t.Branch {
		return fail(fmt.Errorf("%s is not on its branch %s (HEAD %q)", t.Root, t.Branch, strings.TrimSpace(ref)))
	}
	if _, err := git(ctx, append(tree, "add", "--all", "--", ".")...); err != nil {
		return fail(err)
	}
	// diff --cached --quiet exits 1 when the index differs from HEAD.
	if _, err := git(ctx, append(tree, "diff", "--cached", "--quiet", "--no-ext-diff")...); err != nil {
		if exitCode(err) != 1 {
			return fail(err)
		}
		if _, err := gitIn(ctx, []byte(message), append(tree, "commit", "--quiet", "--no-verify", "--file=-")...); err != nil {
			return fail(err)
		}
	}
	tip, err := git(ctx, append(tree, "rev-parse", "HEAD")...)
	if err != nil {
		return fail(err)
	}
	tip = strings.TrimSpace(tip)
	// What the branch carries is measured from where it left the parent's
	// HEAD (the merge base), so commits the parent made since don't count.
	base := t.Base
	if out, err := git(ctx, append(t.repoArgs(), "merge-base", "HEAD", tip)...); err == nil {
		base = strings.TrimSpace(out)
	}
	if base == "" {
		return fail(fmt.Errorf("no base commit for %s", t.Branch))
	}
	s := Summary{Branch: t.Branch}
	if base == tip {
		return s, nil
	}
	out, err := git(ctx, append(tree, "diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", base, tip)...)
	if err != nil {
		return fail(err)
	}
	s.Files, err = parseNumstat(out)
	if err != nil {
		return fail(err)
	}
	if len(s.Files) == 0 {
		// Commits whose changes cancel out: nothing to merge.
		return s, nil
	}
	s.Commit = tip
	for _, f := range s.Files {
		s.Added += f.Added
		s.Deleted += f.Deleted
	}
	return s, nil
}

// parseNumstat reads `git diff --numstat -z --no-renames`: one
// "added<TAB>deleted<TAB>path" record per file, NUL-terminated, with "-" for
// the counts of a binary file.
func parseNumstat(out string) ([]FileStat, error) {
	var files []FileStat
	for rec := range strings.SplitSeq(out, "\x00") {
		if rec == "" {
			continue
		}
		a, rest, ok1 := strings.Cut(rec, "\t")
		d, path, ok2 := strings.Cut(rest, "\t")
		if !ok1 || !ok2 || path == "" {
			return nil, fmt.Errorf("unexpected numstat record %q", rec)
		}
		f := FileStat{Path: path}
		if a == "-" && d == "-" {
			f.Binary = true
		} else {
			var err1, err2 error
			f.Added, err1 = strconv.Atoi(a)
			f.Deleted, err2 = strconv.Atoi(d)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("unexpected numstat record %q", rec)
			}
		}
		files = append(files, f)
	}
	return files, nil
}
