package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// BranchPrefix starts the name of every branch deputy creates.
const BranchPrefix = "deputy/"

// BranchName is the branch of instance id: "deputy/<id>".
func BranchName(id string) string { return BranchPrefix + id }

// worktreesDir is the directory, inside the git common dir, that holds
// deputy's worktrees (see the package comment for why there).
const worktreesDir = "deputy-worktrees"

// validID keeps an id usable both as one path element and as one ref
// component: deputy's ids are "i-" and hex, but ids come from callers.
var validID = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

func checkID(id string) error {
	if !validID.MatchString(id) || strings.Contains(id, "..") || strings.HasSuffix(id, ".lock") || strings.HasSuffix(id, ".") {
		return fmt.Errorf("worktree id %q: want 1 to 128 letters, digits, '_', '-' or '.', not starting with '.' or '-'", id)
	}
	return nil
}

// repo is the git repository around a workspace directory.
type repo struct {
	top    string // top of the workspace's working tree (a linked worktree's own top)
	common string // the common git dir, absolute, symlinks resolved
	prefix string // the workspace relative to top, slash-separated, "" or ending in "/"
}

// Check reports whether dir lies in a git repository a worktree can be
// made of, in the words Add would use.
func Check(ctx context.Context, dir string) error {
	_, err := openRepo(ctx, dir)
	return err
}

// openRepo finds the repository that contains dir.
func openRepo(ctx context.Context, dir string) (*repo, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", dir)
	}
	out, err := git(ctx, "-C", dir, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir", "--show-prefix")
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) && strings.Contains(ge.Stderr, "not a git repository") {
			return nil, fmt.Errorf("workspace %s is not a git repository: worktree isolation needs one (git init, or drop worktree: true)", dir)
		}
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		return nil, fmt.Errorf("workspace %s: unexpected git rev-parse output %q", dir, out)
	}
	common, err := filepath.EvalSymlinks(lines[1])
	if err != nil {
		return nil, fmt.Errorf("workspace %s: git dir: %w", dir, err)
	}
	return &repo{top: lines[0], common: common, prefix: lines[2]}, nil
}

// openLocked is openRepo for a call that writes the repository's shared
// part (Add, Merge, Prune): it also takes the repository's lock
// (lockRepo), which the caller releases with unlock.
func openLocked(ctx context.Context, dir string) (r *repo, unlock func(), err error) {
	r, err = openRepo(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	unlock, err = lockRepo(ctx, r.common)
	if err != nil {
		return nil, nil, err
	}
	return r, unlock, nil
}

// head is the commit the workspace's HEAD points to, or a clear error when
// the repository has no commit yet (a branch needs something to start from).
func (r *repo) head(ctx context.Context) (string, error) {
	out, err := git(ctx, "-C", r.top, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	if err != nil {
		if exitCode(err) == 1 {
			return "", fmt.Errorf("repository %s has no commit yet: a worktree branches from HEAD, so commit something first", r.top)
		}
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// worktreeEntry is one record of `git worktree list --porcelain -z`.
type worktreeEntry struct {
	path     string
	head     string
	branch   string // full ref, "" when detached
	prunable bool
}

func listWorktrees(ctx context.Context, gitArgs ...string) ([]worktreeEntry, error) {
	out, err := git(ctx, append(gitArgs, "worktree", "list", "--porcelain", "-z")...)
	if err != nil {
		return nil, err
	}
	var list []worktreeEntry
	var cur *worktreeEntry
	for field := range strings.SplitSeq(out, "\x00") {
		if field == "" {
			cur = nil
			continue
		}
		key, val, _ := strings.Cut(field, " ")
		if key == "worktree" {
			list = append(list, worktreeEntry{path: val})
			cur = &list[len(list)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "HEAD":
			cur.head = val
		case "branch":
			cur.branch = val
		case "prunable":
			cur.prunable = true
		}
	}
	return list, nil
}

// samePath compares two paths after resolving symlinks where they exist, so
// /tmp and a symlink to it name the same worktree.
func samePath(a, b string) bool {
	return canonical(a) == canonical(b)
}

func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	// A path that no longer exists: resolve its parent.
	if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		return filepath.Join(r, filepath.Base(p))
	}
	return filepath.Clean(p)
}

// adminDir finds the administrative directory git keeps for the worktree at
// root (<common>/worktrees/<name>) by reading each one's gitdir file, which
// only git writes. The .git file inside root would say the same, but the
// child can rewrite that one.
func adminDir(common, root string) (string, error) {
	base := filepath.Join(common, "worktrees")
	entries, err := os.ReadDir(base)
	if err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("read %s: %w", base, err)
	}
	want := canonical(filepath.Join(root, ".git"))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(base, e.Name(), "gitdir"))
		if err != nil {
			continue
		}
		if canonical(strings.TrimSpace(string(b))) == want {
			return filepath.Join(base, e.Name()), nil
		}
	}
	return "", fmt.Errorf("no administrative directory for worktree %s in %s", root, base)
}

// restoreDotGit rewrites root/.git to point at admin, undoing whatever the
// child did to it, so the child's own git and `git worktree remove` work.
func restoreDotGit(root, admin string) error {
	p := filepath.Join(root, ".git")
	want := "gitdir: " + admin + "\n"
	if b, err := os.ReadFile(p); err == nil && string(b) == want {
		return nil
	}
	if err := forceRemoveAll(p); err != nil {
		return err
	}
	if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	return nil
}

// forceRemoveAll removes path even when the child made directories in it
// read-only (os.RemoveAll cannot unlink entries of a directory without write
// permission).
func forceRemoveAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
