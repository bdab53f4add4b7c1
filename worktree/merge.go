package worktree

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// ConflictError is a merge refused because the branch conflicts with the
// parent's branch. The parent's tree was left as it was.
type ConflictError struct {
	Branch string   // the branch that was to be merged
	Into   string   // the parent's branch ("HEAD" when detached)
	Files  []string // the conflicting paths, relative to the repository's top
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("merge %s into %s: conflict in %s; nothing was changed", e.Branch, e.Into, strings.Join(e.Files, ", "))
}

// mergeTreeCheck is turned off by a test to reach the abort path.
var mergeTreeCheck = true

// Merge merges branch (a child's deputy/<id>) into the current branch of the
// repository that contains repoDir, with a merge commit ("deputy: merge
// <branch>") so the child's work can be reverted as one. A branch already
// merged is not an error. A conflict returns a *ConflictError naming the
// files, and the parent's tree, index and HEAD are exactly as before; so does
// any other refusal (for example the parent's uncommitted edits to a file the
// branch changes, which git refuses to overwrite).
func Merge(ctx context.Context, repoDir, branch string) error {
	if branch == "" || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("merge: bad branch name %q", branch)
	}
	r, unlock, err := openLocked(ctx, repoDir)
	if err != nil {
		return err
	}
	defer unlock()
	top := []string{"-C", r.top}
	ref := "refs/heads/" + branch
	fail := func(err error) error { return fmt.Errorf("merge %s: %w", branch, err) }

	if _, err := git(ctx, append(top, "rev-parse", "--verify", "-q", ref+"^{commit}")...); err != nil {
		if exitCode(err) == 1 {
			return fail(fmt.Errorf("no branch %s in %s", branch, r.top))
		}
		return fail(err)
	}
	if _, err := r.head(ctx); err != nil {
		return fail(err)
	}
	if _, err := git(ctx, append(top, "merge-base", "--is-ancestor", ref, "HEAD")...); err == nil {
		return nil // already merged
	} else if exitCode(err) != 1 {
		return fail(err)
	}
	into := "HEAD"
	if out, err := git(ctx, append(top, "symbolic-ref", "-q", "--short", "HEAD")...); err == nil {
		into = strings.TrimSpace(out)
	}

	// Merge in memory first (git 2.38+): a conflict is found without
	// writing a byte of the parent's tree or index.
	if mergeTreeCheck {
		out, err := git(ctx, append(top, "merge-tree", "--write-tree", "--name-only", "-z", "HEAD", ref)...)
		switch code := exitCode(err); {
		case err == nil:
		case code == 1:
			return &ConflictError{Branch: branch, Into: into, Files: conflictFiles(out)}
		case code == 129:
			// git before 2.38 has no --write-tree: the real merge below
			// finds the conflict and is aborted.
		default:
			return fail(err)
		}
	}

	_, merr := git(ctx, append(top, "merge", "--no-ff", "--no-edit", "--no-verify", "-m", "deputy: merge "+branch, ref)...)
	if merr == nil {
		return nil
	}
	// A merge that stopped half-way (a conflict the check above could not
	// see) is aborted, which restores the tree, index and HEAD; a merge git
	// refused before starting (local changes in the way) left nothing to undo.
	if _, err := git(ctx, append(top, "rev-parse", "-q", "--verify", "MERGE_HEAD")...); err != nil {
		return fail(merr)
	}
	unmerged, _ := git(ctx, append(top, "diff", "--name-only", "-z", "--diff-filter=U")...)
	if _, err := git(ctx, append(top, "merge", "--abort")...); err != nil {
		return fail(fmt.Errorf("%w; and the abort failed, the workspace is mid-merge: %w", merr, err))
	}
	files := strings.Split(strings.TrimRight(unmerged, "\x00"), "\x00")
	if len(files) == 0 || files[0] == "" {
		return fail(merr)
	}
	return &ConflictError{Branch: branch, Into: into, Files: files}
}

// conflictFiles reads the output of `git merge-tree --write-tree --name-only
// -z` on a conflict: the tree id, then each conflicting path, each followed by
// NUL, an empty field, then informational messages.
func conflictFiles(out string) []string {
	head, _, _ := strings.Cut(out, "\x00\x00")
	fields := strings.Split(head, "\x00")
	if len(fields) <= 1 {
		return nil
	}
	var files []string
	for _, f := range fields[1:] {
		if f != "" && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	return files
}
