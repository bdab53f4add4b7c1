//go:build unix

package worktree

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// A worker process makes a child's worktree and is killed with SIGKILL; the
// recovering worker's Prune removes that worktree and its branch, and leaves
// a live instance's worktree and a finished instance's unmerged branch alone.
func TestWorktreePruneAfterSIGKILL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperRepoEnv+"="+repo, helperIDEnv+"=i-dead")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("worker: %v, want death by SIGKILL (stderr %q)", err, stderr.String())
	}
	deadRoot := strings.TrimSpace(stdout.String())
	if readFile(t, filepath.Join(deadRoot, "half-done.txt")) != "work in progress\n" || !branchExists(t, repo, "deputy/i-dead") {
		t.Fatal("the dead worker's worktree is not there to clean up")
	}

	live, err := Add(ctx, repo, "i-live")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, live.Dir, map[string]string{"live.txt": "busy\n"})
	// A finished instance whose worktree was left behind, with a commit.
	done, err := Add(ctx, repo, "i-done")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, done.Dir, map[string]string{"done.txt": "result\n"})
	if _, err := done.Commit(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	// Debris of an add killed before git registered anything.
	half := filepath.Join(filepath.Dir(deadRoot), "i-half")
	writeFiles(t, half, map[string]string{"x": "x"})
	before, beforeGit := hashTree(t, repo), gitState(t, repo)

	removed, err := Prune(ctx, repo, func(id string) bool { return id == "i-live" })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"i-dead", "i-done", "i-half"}; !reflect.DeepEqual(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	if exists(deadRoot) || exists(done.Root) || exists(half) || branchExists(t, repo, "deputy/i-dead") {
		t.Fatal("a dead instance's worktree or untouched branch survived")
	}
	if !branchExists(t, repo, "deputy/i-done") || run(t, repo, "show", "deputy/i-done:done.txt") != "result" {
		t.Fatal("Prune lost a finished instance's unmerged commit")
	}
	if readFile(t, filepath.Join(live.Dir, "live.txt")) != "busy\n" || worktreeCount(t, repo) != 2 {
		t.Fatalf("the live worktree was touched (%d worktrees)", worktreeCount(t, repo))
	}
	sameTree(t, before, hashTree(t, repo))
	if gitState(t, repo) != beforeGit {
		t.Fatal("Prune changed the parent's git state")
	}
	if _, err := Prune(ctx, repo, nil); err == nil {
		t.Fatal("Prune with a nil alive succeeded")
	}
	// Nothing left to do the second time.
	if removed, err := Prune(ctx, repo, func(id string) bool { return id == "i-live" }); err != nil || len(removed) != 0 {
		t.Fatalf("second prune: %v, %v", removed, err)
	}
}
