package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// The SIGKILL test re-executes this test binary with these variables set:
// the copy calls Add, leaves work in the worktree, and kills itself.
const (
	helperRepoEnv = "DEPUTY_WORKTREE_HELPER_REPO"
	helperIDEnv   = "DEPUTY_WORKTREE_HELPER_ID"
)

func TestMain(m *testing.M) {
	if repo := os.Getenv(helperRepoEnv); repo != "" {
		dieAfterAdd(repo, os.Getenv(helperIDEnv))
	}
	goleak.VerifyTestMain(m)
}

// dieAfterAdd is a worker that dies mid-child: no Commit, no Remove, no
// deferred cleanup, just SIGKILL.
func dieAfterAdd(repo, id string) {
	tr, err := Add(context.Background(), repo, id)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if err := os.WriteFile(filepath.Join(tr.Dir, "half-done.txt"), []byte("work in progress\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println(tr.Root)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never reached: SIGKILL cannot be caught
}
