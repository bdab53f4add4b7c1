package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Remove deletes the worktree, whatever the child left in it (forced), and
// its branch when the branch holds nothing the parent's HEAD lacks (it was
// never committed to, or it was merged). A branch with unmerged commits stays
// for `deputy merge`. Nothing reaches the parent's tree. Removing a worktree
// that is already gone is not an error.
func (t *Tree) Remove(ctx context.Context) error {
	if err := t.check(); err != nil {
		return err
	}
	unlock, err := lockRepo(ctx, t.common())
	if err != nil {
		return err
	}
	defer unlock()
	if err := removeWorktree(ctx, t.repoArgs(), t.common(), t.Root); err != nil {
		return fmt.Errorf("remove worktree %s: %w", t.ID, err)
	}
	if err := deleteIfMerged(ctx, t.repoArgs(), t.Branch); err != nil {
		return fmt.Errorf("remove worktree %s: %w", t.ID, err)
	}
	return nil
}

// removeWorktree removes the worktree at root. `git worktree remove` refuses
// a worktree whose .git file was tampered with or that holds submodules; the
// fallback removes the directory (deputy owns it) and lets git forget it.
func removeWorktree(ctx context.Context, repoArgs []string, common, root string) error {
	if _, err := os.Lstat(root); os.IsNotExist(err) {
		_, err := git(ctx, append(repoArgs, "worktree", "prune")...)
		return err
	}
	if admin, err := adminDir(common, root); err == nil {
		_ = restoreDotGit(root, admin)
	}
	// --force twice: also a worktree locked by an add that was killed.
	_, gerr := git(ctx, append(repoArgs, "worktree", "remove", "--force", "--force", root)...)
	if gerr == nil {
		return nil
	}
	if err := forceRemoveAll(root); err != nil {
		return errors.Join(gerr, err)
	}
	_, err := git(ctx, append(repoArgs, "worktree", "prune")...)
	return err
}

// deleteIfMerged deletes branch when its tip is an ancestor of HEAD (so
// deleting it loses nothing), and keeps it otherwise. A missing branch is fine.
func deleteIfMerged(ctx context.Context, repoArgs []string, branch string) error {
	ref := "refs/heads/" + branch
	if _, err := git(ctx, append(repoArgs, "rev-parse", "--verify", "-q", ref)...); err != nil {
		if exitCode(err) == 1 {
			return nil
		}
		return err
	}
	if _, err := git(ctx, append(repoArgs, "merge-base", "--is-ancestor", ref, "HEAD")...); err != nil {
		if exitCode(err) == 1 {
			return nil // unmerged commits: keep them
		}
		return err
	}
	_, err := git(ctx, append(repoArgs, "branch", "--delete", "--force", "--", branch)...)
	return err
}

// Prune cleans up after instances that are gone, for a worker recovering from
// a crash: it removes every deputy worktree of the repository that contains
// repoDir whose instance alive reports false (whatever state it was left in,
// a half-made one included), deletes deputy branches of such instances that
// hold nothing the workspace's HEAD lacks, and runs `git worktree prune`. It
// returns the ids whose worktrees it removed, sorted.
func Prune(ctx context.Context, repoDir string, alive func(id string) bool) (removed []string, err error) {
	if alive == nil {
		return nil, errors.New("prune worktrees: alive is nil")
	}
	r, unlock, err := openLocked(ctx, repoDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	repoArgs := []string{"-C", r.top}
	base := filepath.Join(r.common, worktreesDir)

	list, err := listWorktrees(ctx, repoArgs...)
	if err != nil {
		return nil, fmt.Errorf("prune worktrees: %w", err)
	}
	var errs []error
	for _, w := range list {
		p := canonical(w.path)
		if filepath.Dir(p) != base {
			continue // not deputy's
		}
		id := filepath.Base(p)
		if checkID(id) != nil || alive(id) {
			continue
		}
		if err := removeWorktree(ctx, repoArgs, r.common, p); err != nil {
			errs = append(errs, fmt.Errorf("remove worktree %s: %w", id, err))
			continue
		}
		removed = append(removed, id)
	}
	// Directories git never registered: an add killed before it got that far.
	entries, err := os.ReadDir(base)
	if err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		id := e.Name()
		if checkID(id) != nil || alive(id) || slices.Contains(removed, id) {
			continue
		}
		if err := forceRemoveAll(filepath.Join(base, id)); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, id)
	}
	if _, err := git(ctx, append(repoArgs, "worktree", "prune")...); err != nil {
		errs = append(errs, err)
	}
	// Branches of gone instances, with or without a worktree.
	out, err := git(ctx, append(repoArgs, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/heads/"+BranchPrefix)...)
	if err != nil {
		errs = append(errs, err)
	}
	for branch := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		id := strings.TrimPrefix(branch, BranchPrefix)
		if branch == "" || checkID(id) != nil || alive(id) {
			continue
		}
		if err := deleteIfMerged(ctx, repoArgs, branch); err != nil {
			errs = append(errs, err)
		}
	}
	slices.Sort(removed)
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("prune worktrees of %s: %w", r.top, err)
	}
	return removed, nil
}
