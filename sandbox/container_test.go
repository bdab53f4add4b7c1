package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/tool/shell"
)

// The container level: a separate root filesystem, a snapshot of the
// workspace kept only on Commit, and a hard timeout.

func TestContainerHostProgramInvisible(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	rootfs := busyboxRoot(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "hello.txt"), "hello from the workspace")
	hostBash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	if hostBash, err = filepath.EvalSymlinks(hostBash); err != nil {
		t.Fatal(err)
	}
	probe := fmt.Sprintf(`test -e '%s' && echo VISIBLE; command -v bash || echo no-bash; cat hello.txt; echo; readlink /bin/sh; echo done`, hostBash)

	// At the sandbox level the host's programs are the system: visible.
	out, _ := runBash(context.Background(), sandboxedBash(t, newBox(t, Policy{Workspace: ws}), shell.Config{Shell: "sh"}), probe, 30)
	if !strings.Contains(out, "VISIBLE") {
		t.Fatalf("control: %s is not visible in a host sandbox: %q", hostBash, out)
	}

	b := newBox(t, Policy{Workspace: ws, RootFS: rootfs})
	out, isErr := runBash(context.Background(), sandboxedBash(t, b, shell.Config{Shell: "sh"}), probe, 30)
	if isErr || !strings.Contains(out, "done") {
		t.Fatalf("the command did not run in the container: %q", out)
	}
	if strings.Contains(out, "VISIBLE") || !strings.Contains(out, "no-bash") {
		t.Errorf("the host's bash is visible in the container:\n%s", out)
	}
	if !strings.Contains(out, "hello from the workspace") || !strings.Contains(out, "busybox") {
		t.Errorf("want busybox's sh, in the workspace:\n%s", out)
	}
}

// snapshotWorkspace makes a workspace with a little of everything.
func snapshotWorkspace(t *testing.T) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "project")
	writeFile(t, filepath.Join(ws, "a.txt"), "original a\n")
	writeFile(t, filepath.Join(ws, "dir", "b.txt"), "original b\n")
	writeFile(t, filepath.Join(ws, "keep.txt"), "untouched\n")
	if err := os.Symlink("a.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	return ws
}

const childEdits = `echo changed > a.txt && rm dir/b.txt && echo new > c.txt && mkdir newdir && echo y > newdir/y && ` +
	`ln -sf keep.txt link && pwd`

func TestContainerSnapshotDiscard(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := snapshotWorkspace(t)
	before := treeDigest(t, ws)
	b := newBox(t, Policy{Workspace: ws, RootFS: busyboxRoot(t), Snapshot: true})
	if b.Dir() == ws {
		t.Fatal("with Snapshot, Dir must be the copy")
	}
	if got := treeDigest(t, b.Dir()); got != before {
		t.Fatal("the snapshot differs from the workspace")
	}
	set := sandboxedBash(t, b, shell.Config{Shell: "sh"})
	out, isErr := runBash(context.Background(), set, childEdits, 30)
	if isErr || !strings.Contains(out, b.Dir()+"\n") {
		t.Fatalf("the child's edits failed: %q", out)
	}
	if got := readFile(t, filepath.Join(b.Dir(), "a.txt")); got != "changed\n" {
		t.Errorf("the snapshot did not take the edit: %q", got)
	}
	if treeDigest(t, ws) != before {
		t.Error("the workspace changed while the child worked on its snapshot")
	}
	// The child failed: its changes are dropped.
	if err := b.Discard(); err != nil {
		t.Fatal(err)
	}
	if exists(b.Dir()) {
		t.Error("the snapshot is still there after Discard")
	}
	if treeDigest(t, ws) != before {
		t.Error("the workspace changed after Discard")
	}
	if out, isErr := runBash(context.Background(), set, "echo never", 30); !isErr || strings.Contains(out, "never") {
		t.Errorf("a command ran after Discard: %q", out)
	}
	if _, err := b.Commit(); err == nil {
		t.Error("Commit after Discard succeeded")
	}
}

func TestContainerSnapshotCommit(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := snapshotWorkspace(t)
	b := newBox(t, Policy{Workspace: ws, RootFS: busyboxRoot(t), Snapshot: true})
	set := sandboxedBash(t, b, shell.Config{Shell: "sh"})
	if out, isErr := runBash(context.Background(), set, childEdits, 30); isErr {
		t.Fatalf("the child's edits failed: %q", out)
	}
	ch, err := b.Commit()
	if err != nil {
		t.Fatal(err)
	}
	want := &Changes{
		Added:    []string{"c.txt", "newdir", "newdir/y"},
		Modified: []string{"a.txt", "link"},
		Deleted:  []string{"dir/b.txt"},
	}
	if !reflect.DeepEqual(ch, want) {
		t.Errorf("changes %+v, want %+v", ch, want)
	}
	if treeDigest(t, ws) != treeDigest(t, b.Dir()) {
		t.Error("after Commit the workspace differs from the snapshot")
	}
	if got, _ := os.Readlink(filepath.Join(ws, "link")); got != "keep.txt" {
		t.Errorf("link -> %q", got)
	}

	// A second round: the workspace's own a.txt changed meanwhile, so the
	// child's edit of it conflicts, and nothing of the round is applied.
	if out, isErr := runBash(context.Background(), set, `echo again > a.txt && echo more > d.txt`, 30); isErr {
		t.Fatalf("%q", out)
	}
	writeFile(t, filepath.Join(ws, "a.txt"), "the parent's edit\n")
	_, err = b.Commit()
	var ce *ConflictError
	if !errors.As(err, &ce) || !reflect.DeepEqual(ce.Paths, []string{"a.txt"}) {
		t.Fatalf("want a conflict on a.txt, got %v", err)
	}
	if got := readFile(t, filepath.Join(ws, "a.txt")); got != "the parent's edit\n" || exists(filepath.Join(ws, "d.txt")) {
		t.Errorf("a refused commit applied changes: a.txt=%q", got)
	}
}

// At the hard timeout everything in the box dies at once, and nothing
// more starts.
func TestContainerHardTimeout(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := t.TempDir()
	mkfifo(t, filepath.Join(ws, "fifo"))
	env, mark := markedEnv(t)
	fc := fakeClock()
	b := newBox(t, Policy{Workspace: ws, RootFS: busyboxRoot(t), HardTimeout: time.Minute, Clock: fc})
	// The tool's own timeout is on another clock: only the box's fires.
	set := sandboxedBash(t, b, shell.Config{Shell: "sh", Env: env, Clock: fakeClock()})
	done := make(chan string, 1)
	go func() {
		out, _ := runBash(context.Background(), set, `sleep 1001 & sleep 1002 & (sleep 1003 &); echo up > fifo; wait`, 600)
		done <- out
	}()
	line, err := bufio.NewReader(openFIFO(t, filepath.Join(ws, "fifo"))).ReadString('\n')
	if err != nil || line != "up\n" {
		t.Fatalf("read %q: %v", line, err)
	}
	if live := survivors(t, mark); len(live) < 3 {
		t.Fatalf("the sleeps are not running (the survivor check would see nothing): %v", live)
	}
	fc.Advance(time.Minute)
	// Advance returned after the timeout's callback: the box is empty.
	if live := survivors(t, mark); len(live) > 0 {
		t.Errorf("processes survived the hard timeout: %v", live)
	}
	select {
	case out := <-done:
		if !strings.Contains(out, "[sandbox: killed at the hard timeout (1m0s)]") {
			t.Errorf("want the hard timeout named: %q", out)
		}
	case <-time.After(failAfter):
		t.Fatal("the command did not return after the hard timeout")
	}
	if out, isErr := runBash(context.Background(), set, "echo never", 30); !isErr || !strings.Contains(out, "hard timeout") {
		t.Errorf("a command ran after the hard timeout: %q", out)
	}
}
