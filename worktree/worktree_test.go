package worktree

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestWorktreeSuccessAndMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	head := run(t, repo, "rev-parse", "HEAD")

	tr, err := Add(ctx, repo, "i-abc")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Branch != "deputy/i-abc" || tr.Base != head || tr.Dir != tr.Root || tr.Repo != canonical(repo) {
		t.Fatalf("tree = %+v, want branch deputy/i-abc from %s", tr, head)
	}
	if want := filepath.Join(canonical(repo), ".git", "deputy-worktrees", "i-abc"); tr.Root != want {
		t.Fatalf("root = %s, want %s", tr.Root, want)
	}
	if got := readFile(t, filepath.Join(tr.Dir, "shared.txt")); got != "one\ntwo\nthree\n" {
		t.Fatalf("worktree shared.txt = %q", got)
	}
	// The child's work: a modification, a new file in a new directory, a deletion.
	writeFiles(t, tr.Dir, map[string]string{
		"shared.txt":      "one\nTWO\nthree\nfour\n",
		"new/feature.txt": "a\nb\nc\n",
	})
	if err := os.Remove(filepath.Join(tr.Dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(repo, "shared.txt")); got != "one\ntwo\nthree\n" {
		t.Fatalf("the parent sees the child's edit before any merge: %q", got)
	}

	s, err := tr.Commit(ctx, "add the feature")
	if err != nil {
		t.Fatal(err)
	}
	want := []FileStat{
		{Path: "gone.txt", Deleted: 1},
		{Path: "new/feature.txt", Added: 3},
		{Path: "shared.txt", Added: 2, Deleted: 1},
	}
	if !reflect.DeepEqual(s.Files, want) || s.Added != 5 || s.Deleted != 2 || s.Branch != "deputy/i-abc" {
		t.Fatalf("summary = %+v, want files %+v, +5 -2", s, want)
	}
	if tip := run(t, repo, "rev-parse", "refs/heads/deputy/i-abc"); s.Commit != tip || tip == head {
		t.Fatalf("summary commit %s, branch tip %s, base %s", s.Commit, tip, head)
	}
	if got := s.String(); got != "branch deputy/i-abc: 3 files, +5 -2" {
		t.Fatalf("String() = %q", got)
	}
	if got := run(t, repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", "deputy/i-abc"); got != "deputy <deputy@localhost>|deputy <deputy@localhost>|add the feature" {
		t.Fatalf("commit = %q", got)
	}
	if st := run(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("parent status after the child's commit: %q", st)
	}

	// The worktree goes; the committed branch stays for the merge.
	if err := tr.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(tr.Root) || worktreeCount(t, repo) != 1 || !branchExists(t, repo, "deputy/i-abc") {
		t.Fatalf("after Remove: root exists %v, %d worktrees, branch kept %v", exists(tr.Root), worktreeCount(t, repo), branchExists(t, repo, "deputy/i-abc"))
	}

	if err := Merge(ctx, repo, tr.Branch); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(repo, "shared.txt")); got != "one\nTWO\nthree\nfour\n" {
		t.Fatalf("parent shared.txt after merge = %q", got)
	}
	if got := readFile(t, filepath.Join(repo, "new", "feature.txt")); got != "a\nb\nc\n" || exists(filepath.Join(repo, "gone.txt")) {
		t.Fatalf("parent after merge: feature.txt %q, gone.txt still there: %v", got, exists(filepath.Join(repo, "gone.txt")))
	}
	if parents := strings.Fields(run(t, repo, "log", "-1", "--format=%P")); len(parents) != 2 || parents[0] != head || parents[1] != s.Commit {
		t.Fatalf("merge commit parents %v, want [%s %s]", parents, head, s.Commit)
	}
	if got := run(t, repo, "log", "-1", "--format=%s"); got != "deputy: merge deputy/i-abc" {
		t.Fatalf("merge message %q", got)
	}
	// Merging again is a no-op; the branch, now merged, goes with Prune.
	mergeHead := run(t, repo, "rev-parse", "HEAD")
	if err := Merge(ctx, repo, tr.Branch); err != nil || run(t, repo, "rev-parse", "HEAD") != mergeHead {
		t.Fatalf("second merge: %v, HEAD moved: %v", err, run(t, repo, "rev-parse", "HEAD") != mergeHead)
	}
	if removed, err := Prune(ctx, repo, func(string) bool { return false }); err != nil || len(removed) != 0 {
		t.Fatalf("prune = %v, %v", removed, err)
	}
	if branchExists(t, repo, "deputy/i-abc") {
		t.Fatal("a merged branch of a finished instance survived Prune")
	}
	if err := Merge(ctx, repo, "deputy/i-none"); err == nil || !strings.Contains(err.Error(), "no branch deputy/i-none") {
		t.Fatalf("merge of a missing branch: %v", err)
	}
}

func TestWorktreeFailureLeavesParentIdentical(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	// The parent has work of its own in progress: an edit and an untracked file.
	writeFiles(t, repo, map[string]string{"README.md": "# demo, edited by the parent\n", "notes/todo.txt": "parent's own\n"})
	before, beforeGit := hashTree(t, repo), gitState(t, repo)

	tr, err := Add(ctx, repo, "i-fail")
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(tr.Dir, "README.md")); got != "# demo\n" {
		t.Fatalf("the child sees the parent's uncommitted edit: %q", got)
	}
	writeFiles(t, tr.Dir, map[string]string{"shared.txt": "ruined\n", "README.md": "child\n", "junk/a/b.txt": "x"})
	if err := os.Remove(filepath.Join(tr.Dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	// A read-only directory, which a plain RemoveAll cannot empty.
	if err := os.Chmod(filepath.Join(tr.Dir, "junk", "a"), 0o500); err != nil {
		t.Fatal(err)
	}
	if err := tr.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	sameTree(t, before, hashTree(t, repo))
	if after := gitState(t, repo); after != beforeGit {
		t.Fatalf("git state changed:\n%s\n---\n%s", beforeGit, after)
	}
	if exists(tr.Root) || branchExists(t, repo, tr.Branch) || worktreeCount(t, repo) != 1 {
		t.Fatalf("leftovers: root %v, branch %v, %d worktrees", exists(tr.Root), branchExists(t, repo, tr.Branch), worktreeCount(t, repo))
	}
	if err := tr.Remove(ctx); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}

func TestWorktreeMergeRefusedOverParentEdits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	tr, err := Add(ctx, repo, "i-clash")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, tr.Dir, map[string]string{"README.md": "# by the child\n"})
	if _, err := tr.Commit(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if got := run(t, repo, "log", "-1", "--format=%s", tr.Branch); got != "deputy: work of i-clash" {
		t.Fatalf("default message %q", got)
	}
	// The parent edited the same file without committing: git must refuse.
	writeFiles(t, repo, map[string]string{"README.md": "# parent's draft\n"})
	before, beforeGit := hashTree(t, repo), gitState(t, repo)
	err = Merge(ctx, repo, tr.Branch)
	if err == nil || !strings.Contains(err.Error(), "README.md") {
		t.Fatalf("merge over the parent's uncommitted edit: %v", err)
	}
	sameTree(t, before, hashTree(t, repo))
	if gitState(t, repo) != beforeGit {
		t.Fatal("git state changed")
	}
}

func TestWorktreeNoChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	tr, err := Add(ctx, repo, "i-idle")
	if err != nil {
		t.Fatal(err)
	}
	// A file the repository ignores is not a change.
	writeFiles(t, repo, map[string]string{".git/info/exclude": "*.log\n"})
	writeFiles(t, tr.Dir, map[string]string{"build.log": "noise\n"})
	s, err := tr.Commit(ctx, "nothing")
	if err != nil {
		t.Fatal(err)
	}
	if s.Changed() || s.Commit != "" || s.Added != 0 || len(s.Files) != 0 || s.String() != "branch deputy/i-idle: no changes" {
		t.Fatalf("summary = %+v (%s)", s, s)
	}
	if tip := run(t, repo, "rev-parse", "refs/heads/deputy/i-idle"); tip != tr.Base {
		t.Fatalf("a commit was made: tip %s, base %s", tip, tr.Base)
	}
	if err := tr.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if branchExists(t, repo, tr.Branch) {
		t.Fatal("an untouched branch survived Remove")
	}
}

func TestWorktreeAddIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	first, err := Add(ctx, repo, "i-again")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, first.Dir, map[string]string{"progress.txt": "step 1\n"})
	// Resumed after a crash, with the parent having moved on meanwhile.
	writeFiles(t, repo, map[string]string{"parent.txt": "later\n"})
	run(t, repo, "add", "parent.txt")
	run(t, repo, "commit", "--quiet", "-m", "parent moves on")
	second, err := Add(ctx, repo, "i-again")
	if err != nil {
		t.Fatal(err)
	}
	if *second != *first {
		t.Fatalf("second Add = %+v, first %+v", second, first)
	}
	if readFile(t, filepath.Join(second.Dir, "progress.txt")) != "step 1\n" || worktreeCount(t, repo) != 2 {
		t.Fatalf("resumed worktree lost the child's work or was duplicated (%d worktrees)", worktreeCount(t, repo))
	}
	// A Tree recorded as JSON by a durable step works after a round trip.
	b, err := json.Marshal(second)
	if err != nil {
		t.Fatal(err)
	}
	var back Tree
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	s, err := back.Commit(ctx, "step 1")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files) != 1 || s.Files[0].Path != "progress.txt" {
		t.Fatalf("summary = %+v (the parent's later commit must not count)", s)
	}
	// The worktree is removed but its committed branch stays; Add again
	// checks the branch out again, commits and all.
	if err := back.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := Add(ctx, repo, "i-again")
	if err != nil {
		t.Fatal(err)
	}
	if third.Base != first.Base || readFile(t, filepath.Join(third.Dir, "progress.txt")) != "step 1\n" {
		t.Fatalf("re-added worktree: %+v", third)
	}
	// Its directory deleted behind git's back: Add makes it again.
	if err := os.RemoveAll(third.Root); err != nil {
		t.Fatal(err)
	}
	fourth, err := Add(ctx, repo, "i-again")
	if err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(fourth.Dir, "progress.txt")) != "step 1\n" || worktreeCount(t, repo) != 2 {
		t.Fatalf("after a lost directory: %d worktrees", worktreeCount(t, repo))
	}
}

func TestWorktreeNotARepository(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := Add(context.Background(), dir, "i-x")
	want := "workspace " + dir + " is not a git repository: worktree isolation needs one (git init, or drop worktree: true)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if _, err := Add(context.Background(), filepath.Join(dir, "missing"), "i-x"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing workspace: %v", err)
	}
	if _, err := Prune(context.Background(), dir, func(string) bool { return false }); err == nil || !strings.Contains(err.Error(), "not a git repository") {
		t.Fatalf("prune outside a repository: %v", err)
	}
	if err := Merge(context.Background(), dir, "deputy/i-x"); err == nil || !strings.Contains(err.Error(), "not a git repository") {
		t.Fatalf("merge outside a repository: %v", err)
	}
}

func TestWorktreeRepositoryWithoutCommits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run(t, dir, "init", "--quiet")
	_, err := Add(context.Background(), dir, "i-x")
	if err == nil || !strings.Contains(err.Error(), "has no commit yet") {
		t.Fatalf("err = %v", err)
	}
}

func TestWorktreeBadID(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	for _, id := range []string{"", "../escape", "a/b", "-rf", ".hidden", "x.lock", "a..b", "sp ace", "x.", strings.Repeat("a", 129)} {
		if _, err := Add(context.Background(), repo, id); err == nil || !strings.Contains(err.Error(), "worktree id") {
			t.Errorf("Add(%q) = %v, want an id error", id, err)
		}
	}
	if worktreeCount(t, repo) != 1 {
		t.Fatal("a bad id made a worktree")
	}
	var zero Tree
	if _, err := zero.Commit(context.Background(), "x"); err == nil {
		t.Fatal("Commit on a zero Tree succeeded")
	}
	if err := (&zero).Remove(context.Background()); err == nil {
		t.Fatal("Remove on a zero Tree succeeded")
	}
}

func TestWorktreeSubdirectoryWorkspace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	tr, err := Add(ctx, filepath.Join(repo, "sub", "pkg"), "i-sub")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Repo != canonical(repo) || tr.Dir != filepath.Join(tr.Root, "sub", "pkg") {
		t.Fatalf("tree = %+v", tr)
	}
	if readFile(t, filepath.Join(tr.Dir, "lib.go")) != "package pkg\n" {
		t.Fatal("the workspace subdirectory is not the matching one")
	}
	writeFiles(t, tr.Dir, map[string]string{"lib.go": "package pkg\n\nconst X = 1\n"})
	s, err := tr.Commit(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files) != 1 || s.Files[0] != (FileStat{Path: "sub/pkg/lib.go", Added: 2}) {
		t.Fatalf("summary = %+v", s)
	}
	if err := Merge(ctx, filepath.Join(repo, "sub"), tr.Branch); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(repo, "sub", "pkg", "lib.go")) != "package pkg\n\nconst X = 1\n" {
		t.Fatal("merge from a subdirectory workspace did not reach the parent")
	}

	// A workspace directory with nothing tracked in it exists in the
	// worktree all the same.
	writeFiles(t, repo, map[string]string{"scratch/untracked.txt": "x"})
	tr2, err := Add(ctx, filepath.Join(repo, "scratch"), "i-scratch")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(tr2.Dir); err != nil || !info.IsDir() || tr2.Dir != filepath.Join(tr2.Root, "scratch") {
		t.Fatalf("dir %s: %v", tr2.Dir, err)
	}
	if exists(filepath.Join(tr2.Dir, "untracked.txt")) {
		t.Fatal("an untracked file of the parent reached the child")
	}
}

// A child may rewrite its worktree's .git file to point git at a repository
// whose config runs a program (a clean filter). deputy's Commit must not
// follow it.
func TestWorktreeTamperedDotGit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	tr, err := Add(ctx, repo, "i-evil")
	if err != nil {
		t.Fatal(err)
	}
	evil := t.TempDir()
	marker := filepath.Join(t.TempDir(), "pwned")
	run(t, evil, "init", "--quiet", "--bare")
	run(t, evil, "config", "filter.pwn.clean", "touch "+marker+"; cat")
	writeFiles(t, tr.Dir, map[string]string{
		".git":           "gitdir: " + evil + "\n",
		".gitattributes": "* filter=pwn\n",
		"work.txt":       "done\n",
	})
	s, err := tr.Commit(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	if exists(marker) {
		t.Fatal("Commit ran a filter from the repository the child's .git file named")
	}
	if len(s.Files) != 2 || run(t, repo, "show", tr.Branch+":work.txt") != "done" {
		t.Fatalf("summary = %+v", s)
	}
	if err := tr.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(tr.Root) || worktreeCount(t, repo) != 1 || exists(marker) {
		t.Fatalf("after Remove: root %v, %d worktrees", exists(tr.Root), worktreeCount(t, repo))
	}
}

// The caller's GIT_* variables and a machine with no git configuration at
// all change nothing.
func TestWorktreeCleanEnvironment(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("GIT_DIR", filepath.Join(home, "nowhere"))
	t.Setenv("GIT_WORK_TREE", home)
	t.Setenv("GIT_INDEX_FILE", filepath.Join(home, "index"))
	t.Setenv("GIT_AUTHOR_NAME", "someone else")
	t.Setenv("GIT_COMMITTER_EMAIL", "x@example.com")
	ctx := context.Background()
	repo := newRepo(t)
	tr, err := Add(ctx, repo, "i-env")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, tr.Dir, map[string]string{"x.txt": "x\n"})
	if _, err := tr.Commit(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := Merge(ctx, repo, tr.Branch); err != nil {
		t.Fatal(err)
	}
	if got := run(t, repo, "log", "-2", "--format=%an <%ae> %cn <%ce>"); got != "deputy <deputy@localhost> deputy <deputy@localhost>\ndeputy <deputy@localhost> deputy <deputy@localhost>" {
		t.Fatalf("identities: %q", got)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Fatalf("git wrote into the caller's GIT_* paths: %v", entries)
	}
	if v, err := GitVersion(ctx); err != nil || !strings.HasPrefix(v, "2.") {
		t.Fatalf("GitVersion = %q, %v", v, err)
	}
}

// A child with a worktree spawns its own child with a worktree: the
// grandchild branches from the child's branch and merges back into it.
func TestWorktreeNested(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	parent, err := Add(ctx, repo, "i-parent")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, parent.Dir, map[string]string{"parent.txt": "p\n"})
	if _, err := parent.Commit(ctx, "parent's start"); err != nil {
		t.Fatal(err)
	}
	child, err := Add(ctx, filepath.Join(parent.Dir, "sub"), "i-child")
	if err != nil {
		t.Fatal(err)
	}
	if child.Repo != parent.Root || child.Base != run(t, repo, "rev-parse", parent.Branch) ||
		filepath.Dir(child.Root) != filepath.Dir(parent.Root) || child.Dir != filepath.Join(child.Root, "sub") {
		t.Fatalf("child %+v of parent %+v", child, parent)
	}
	if readFile(t, filepath.Join(child.Root, "parent.txt")) != "p\n" {
		t.Fatal("the grandchild does not start from the child's commit")
	}
	writeFiles(t, child.Dir, map[string]string{"child.txt": "c\n"})
	if _, err := child.Commit(ctx, "child"); err != nil {
		t.Fatal(err)
	}
	if err := Merge(ctx, parent.Dir, child.Branch); err != nil {
		t.Fatal(err)
	}
	if err := child.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if branchExists(t, repo, child.Branch) || readFile(t, filepath.Join(parent.Dir, "sub", "child.txt")) != "c\n" {
		t.Fatal("the merged grandchild's branch survived, or its work did not reach the child")
	}
	if got := run(t, repo, "symbolic-ref", "--short", "HEAD"); got != "main" || exists(filepath.Join(repo, "sub", "child.txt")) {
		t.Fatal("the grandchild's merge reached the root workspace")
	}
	s, err := parent.Commit(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.String() != "branch deputy/i-parent: 2 files, +2 -0" {
		t.Fatalf("parent summary %s", s)
	}
}
