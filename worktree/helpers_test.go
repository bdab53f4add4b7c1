package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// newRepo makes a git repository in a fresh temporary directory with a few
// committed files, through the same clean git calls the package makes (so
// it needs no git configuration either).
func newRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	run(t, dir, "init", "--quiet", "--initial-branch=main")
	writeFiles(t, dir, map[string]string{
		"README.md":      "# demo\n",
		"shared.txt":     "one\ntwo\nthree\n",
		"gone.txt":       "to be deleted\n",
		"sub/pkg/lib.go": "package pkg\n",
		"sub/other.txt":  "other\n",
	})
	run(t, dir, "add", "--all")
	run(t, dir, "commit", "--quiet", "-m", "initial")
	return dir
}

// run runs git in dir and returns its trimmed stdout.
func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := git(context.Background(), append([]string{"-C", dir}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// hashTree hashes every file of a working tree outside .git (tracked,
// untracked and ignored alike), with its mode, and every directory.
func hashTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && rel == ".git" {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			sums[rel] = "dir " + info.Mode().String()
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		sums[rel] = info.Mode().String() + " " + hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func sameTree(t testing.TB, before, after map[string]string) {
	t.Helper()
	if maps.Equal(before, after) {
		return
	}
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if after[k] != before[k] {
			diff = append(diff, fmt.Sprintf("%s: %q -> %q", k, before[k], after[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: new %q", k, after[k]))
		}
	}
	t.Fatalf("parent tree changed:\n%s", strings.Join(diff, "\n"))
}

// gitState is what git says of the parent beyond its files.
func gitState(t testing.TB, dir string) string {
	t.Helper()
	return run(t, dir, "rev-parse", "HEAD") + "\n" + run(t, dir, "symbolic-ref", "HEAD") + "\n" +
		run(t, dir, "status", "--porcelain=v1", "--untracked-files=all") + "\n" + run(t, dir, "ls-files", "--stage")
}

func branchExists(t testing.TB, dir, branch string) bool {
	t.Helper()
	_, err := git(context.Background(), "-C", dir, "rev-parse", "--verify", "-q", "refs/heads/"+branch)
	return err == nil
}

func worktreeCount(t testing.TB, dir string) int {
	t.Helper()
	list, err := listWorktrees(context.Background(), "-C", dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}
