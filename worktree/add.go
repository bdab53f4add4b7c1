package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Tree is one child's worktree. Its fields survive a JSON round trip, and
// every method works from them alone, so a durable step can record a Tree and
// a later run (or another process) can Commit or Remove it.
type Tree struct {
	ID     string `json:"id"`
	Branch string `json:"branch"` // deputy/<id>
	Repo   string `json:"repo"`   // top of the parent's working tree
	Root   string `json:"root"`   // top of this worktree
	Dir    string `json:"dir"`    // the child's workspace: Root plus the parent workspace's path inside Repo
	Base   string `json:"base"`   // the commit the branch started from (the parent's HEAD at Add)
}

// Add gives instance id a worktree of the repository that contains repoDir
// (the parent's workspace), on a new branch deputy/<id> based on the
// workspace's HEAD. The child works in Tree.Dir, which is the directory
// matching repoDir inside the worktree (repoDir may be a subdirectory of the
// repository).
//
// Add is idempotent by id: when the worktree of id exists (a run resumed after
// a crash) it is returned as it stands; when only the branch exists (its
// worktree was removed, or a crash came between the two), a worktree is made
// on it again, keeping its commits.
func Add(ctx context.Context, repoDir, id string) (*Tree, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	r, unlock, err := openLocked(ctx, repoDir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	branch := BranchName(id)
	root := filepath.Join(r.common, worktreesDir, id)
	t := &Tree{ID: id, Branch: branch, Repo: r.top, Root: root, Dir: filepath.Join(root, filepath.FromSlash(r.prefix))}

	list, err := listWorktrees(ctx, "-C", r.top)
	if err != nil {
		return nil, fmt.Errorf("add worktree %s: %w", id, err)
	}
	for _, w := range list {
		if !samePath(w.path, root) {
			continue
		}
		if _, statErr := os.Stat(root); w.prunable || statErr != nil {
			// Registered, but its directory is gone: let git forget it,
			// then make it again below.
			if _, err := git(ctx, "-C", r.top, "worktree", "prune"); err != nil {
				return nil, fmt.Errorf("add worktree %s: %w", id, err)
			}
			break
		}
		if w.branch != "refs/heads/"+branch {
			return nil, fmt.Errorf("add worktree %s: %s is on %q, not %s (the child switched branches)", id, root, strings.TrimPrefix(w.branch, "refs/heads/"), branch)
		}
		return t, t.resume(ctx, r)
	}

	// Not registered. A directory left there is the debris of an add that
	// was killed before git registered it: deputy owns that path.
	if err := forceRemoveAll(root); err != nil {
		return nil, fmt.Errorf("add worktree %s: %w", id, err)
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return nil, fmt.Errorf("add worktree %s: %w", id, err)
	}
	if _, err := git(ctx, "-C", r.top, "rev-parse", "--verify", "-q", "refs/heads/"+branch); err == nil {
		// The branch outlived its worktree: check it out again.
		if _, err := git(ctx, "-C", r.top, "worktree", "add", "--quiet", root, branch); err != nil {
			return nil, fmt.Errorf("add worktree %s: %w", id, err)
		}
		return t, t.resume(ctx, r)
	}
	head, err := r.head(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := git(ctx, "-C", r.top, "worktree", "add", "--quiet", "-b", branch, root, head); err != nil {
		return nil, fmt.Errorf("add worktree %s: %w", id, err)
	}
	t.Base = head
	if err := os.MkdirAll(t.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("add worktree %s: %w", id, err)
	}
	return t, nil
}

// resume readies an existing worktree: its .git file pointing where git
// says, its workspace directory present, and Base recovered as the point
// where the branch left the parent's HEAD.
func (t *Tree) resume(ctx context.Context, r *repo) error {
	admin, err := adminDir(r.common, t.Root)
	if err != nil {
		return fmt.Errorf("resume worktree %s: %w", t.ID, err)
	}
	if err := restoreDotGit(t.Root, admin); err != nil {
		return fmt.Errorf("resume worktree %s: %w", t.ID, err)
	}
	if err := os.MkdirAll(t.Dir, 0o755); err != nil {
		return fmt.Errorf("resume worktree %s: %w", t.ID, err)
	}
	base, err := git(ctx, "-C", r.top, "merge-base", "HEAD", "refs/heads/"+t.Branch)
	if err != nil {
		return fmt.Errorf("resume worktree %s: %w", t.ID, err)
	}
	t.Base = strings.TrimSpace(base)
	return nil
}

// common is the repository's common git dir: Root is <common>/deputy-worktrees/<id>.
func (t *Tree) common() string { return filepath.Dir(filepath.Dir(t.Root)) }

// repoArgs are the arguments that point git at the parent's repository:
// its working tree while it exists (so HEAD is the parent's HEAD, which
// matters when the parent is itself a linked worktree), else the common dir.
func (t *Tree) repoArgs() []string {
	if _, err := os.Stat(t.Repo); err == nil {
		return []string{"-C", t.Repo}
	}
	return []string{"--git-dir=" + t.common()}
}

// treeArgs point git at this worktree without reading its .git file, which
// the child could have rewritten to lead git elsewhere.
func (t *Tree) treeArgs() ([]string, error) {
	admin, err := adminDir(t.common(), t.Root)
	if err != nil {
		return nil, err
	}
	return []string{"-C", t.Root, "--git-dir=" + admin, "--work-tree=" + t.Root}, nil
}
