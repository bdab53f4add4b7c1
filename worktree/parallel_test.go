package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// Two children edit the same file in parallel worktrees: neither sees the
// other, both commit, the first merges, and the second's merge reports the
// conflict and leaves the parent as the first merge left it.
func TestWorktreeParallelChildrenConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	ids := []string{"i-left", "i-right"}
	trees := make([]*Tree, len(ids))
	sums := make([]Summary, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, id := range ids {
		wg.Go(func() {
			<-start
			tr, err := Add(ctx, repo, id)
			if err != nil {
				errs[i] = err
				return
			}
			trees[i] = tr
			mine := "one\n" + id + " was here\nthree\n"
			if err := os.WriteFile(filepath.Join(tr.Dir, "shared.txt"), []byte(mine), 0o644); err != nil {
				errs[i] = err
				return
			}
			sums[i], errs[i] = tr.Commit(ctx, "edit by "+id)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", ids[i], err)
		}
	}
	for i, tr := range trees {
		want := "one\n" + ids[i] + " was here\nthree\n"
		if got := readFile(t, filepath.Join(tr.Dir, "shared.txt")); got != want {
			t.Fatalf("%s sees %q, want its own %q", ids[i], got, want)
		}
		if sums[i].Added != 1 || sums[i].Deleted != 1 || len(sums[i].Files) != 1 {
			t.Fatalf("%s summary %+v", ids[i], sums[i])
		}
	}
	if trees[0].Base != trees[1].Base || sums[0].Commit == sums[1].Commit {
		t.Fatalf("bases %s %s, commits %s %s", trees[0].Base, trees[1].Base, sums[0].Commit, sums[1].Commit)
	}

	if err := Merge(ctx, repo, trees[0].Branch); err != nil {
		t.Fatal(err)
	}
	before, beforeGit := hashTree(t, repo), gitState(t, repo)
	err := Merge(ctx, repo, trees[1].Branch)
	var ce *ConflictError
	if !errors.As(err, &ce) || !reflect.DeepEqual(ce.Files, []string{"shared.txt"}) || ce.Into != "main" || ce.Branch != "deputy/i-right" {
		t.Fatalf("second merge: %v (%#v)", err, ce)
	}
	if want := "merge deputy/i-right into main: conflict in shared.txt; nothing was changed"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	sameTree(t, before, hashTree(t, repo))
	if gitState(t, repo) != beforeGit || exists(filepath.Join(repo, ".git", "MERGE_HEAD")) {
		t.Fatal("the conflicting merge changed the parent's git state")
	}
	if got := readFile(t, filepath.Join(repo, "shared.txt")); got != "one\ni-left was here\nthree\n" {
		t.Fatalf("parent shared.txt = %q", got)
	}
}

// The same conflict found by the real merge (as on git before 2.38, or when
// the branch moves between the check and the merge): aborted, nothing changed.
func TestWorktreeConflictFoundByMergeIsAborted(t *testing.T) {
	mergeTreeCheck = false
	t.Cleanup(func() { mergeTreeCheck = true })
	ctx := context.Background()
	repo := newRepo(t)
	tr, err := Add(ctx, repo, "i-late")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, tr.Dir, map[string]string{"shared.txt": "child\n", "README.md": "# child\n"})
	if _, err := tr.Commit(ctx, "child"); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, repo, map[string]string{"shared.txt": "parent\n", "untracked.txt": "u"})
	run(t, repo, "commit", "--quiet", "-am", "parent")
	before, beforeGit := hashTree(t, repo), gitState(t, repo)
	err = Merge(ctx, repo, tr.Branch)
	var ce *ConflictError
	if !errors.As(err, &ce) || !reflect.DeepEqual(ce.Files, []string{"shared.txt"}) {
		t.Fatalf("merge: %v", err)
	}
	sameTree(t, before, hashTree(t, repo))
	if gitState(t, repo) != beforeGit || exists(filepath.Join(repo, ".git", "MERGE_HEAD")) {
		t.Fatal("the aborted merge changed the parent's git state")
	}
}

// Many children add, work and commit at once on one repository.
func TestWorktreeParallelAddCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("i-%d", i)
			tr, err := Add(ctx, repo, id)
			if err != nil {
				errs[i] = err
				return
			}
			if err := os.WriteFile(filepath.Join(tr.Dir, id+".txt"), []byte(id+"\n"), 0o644); err != nil {
				errs[i] = err
				return
			}
			s, err := tr.Commit(ctx, id)
			if err == nil && (len(s.Files) != 1 || s.Files[0].Path != id+".txt") {
				err = fmt.Errorf("summary %+v", s)
			}
			if err == nil {
				err = tr.Remove(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("i-%d", i)
		if got := run(t, repo, "show", "deputy/"+id+":"+id+".txt"); got != id {
			t.Fatalf("branch deputy/%s holds %q", id, got)
		}
	}
	if worktreeCount(t, repo) != 1 {
		t.Fatal("worktrees left behind")
	}
}

// A lock held by another process (here a stale-looking index.lock that the
// other process lets go of during the first wait) is waited out.
func TestWorktreeLockRetry(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	tr, err := Add(ctx, repo, "i-lock")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := adminDir(tr.common(), tr.Root)
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(admin, "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var attempts []int
	lockRetryHook = func(attempt int) {
		attempts = append(attempts, attempt)
		_ = os.Remove(lock)
	}
	t.Cleanup(func() { lockRetryHook = nil })
	writeFiles(t, tr.Dir, map[string]string{"a.txt": "a\n"})
	s, err := tr.Commit(ctx, "a")
	if err != nil || len(s.Files) != 1 {
		t.Fatalf("commit after the lock went away: %+v, %v", s, err)
	}
	if !reflect.DeepEqual(attempts, []int{1}) {
		t.Fatalf("retries %v, want one", attempts)
	}

	// A lock that never goes: the caller's context ends the waiting, and the
	// error names the lock.
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	attempts = nil
	lockRetryHook = func(attempt int) {
		attempts = append(attempts, attempt)
		if attempt == 3 {
			cancel()
		}
	}
	writeFiles(t, tr.Dir, map[string]string{"b.txt": "b\n"})
	_, err = tr.Commit(cctx, "b")
	if err == nil || !strings.Contains(err.Error(), "index.lock") || !errors.Is(err, context.Canceled) || len(attempts) != 3 {
		t.Fatalf("commit under a held lock: %v after %v", err, attempts)
	}
}

// A branch named "deputy" in the user's repository blocks deputy/<id>: that
// fails at once with git's reason, without waiting as if for a lock.
func TestWorktreeBranchNameClash(t *testing.T) {
	repo := newRepo(t)
	run(t, repo, "branch", "deputy")
	retries := 0
	lockRetryHook = func(int) { retries++ }
	t.Cleanup(func() { lockRetryHook = nil })
	_, err := Add(context.Background(), repo, "i-x")
	if err == nil || !strings.Contains(err.Error(), "'refs/heads/deputy' exists") || retries != 0 {
		t.Fatalf("err = %v after %d retries", err, retries)
	}
	if worktreeCount(t, repo) != 1 {
		t.Fatal("a worktree was left behind")
	}
}
