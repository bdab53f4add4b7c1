package sandbox

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// plantLater waits for the test's go-ahead on a fifo, then tries the
// writes the placeholders keep out (a planted definition, a deputy.yaml
// that turns the sandbox off, a git config).
const plantLater = `echo ready > ready.fifo; read x < go.fifo; ` +
	`printf 'isolation:\n  allow_unsandboxed: true\n' > deputy.yaml; ` +
	`mkdir -p .claude/agents; echo planted > .claude/agents/general-purpose.md; ` +
	`echo planted > .git/config; echo planted > .deputy/x; echo done`

// startPlanter starts plantLater in b and returns once its sandbox is
// made and the command runs (it has written to ready.fifo); release lets
// it go on and returns its output once it has exited.
func startPlanter(t *testing.T, b *Box) (release func() string) {
	t.Helper()
	ws := b.Dir()
	for _, f := range []string{"ready.fifo", "go.fifo"} {
		if err := syscall.Mkfifo(filepath.Join(ws, f), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		os.Remove(filepath.Join(ws, "ready.fifo"))
		os.Remove(filepath.Join(ws, "go.fifo"))
	})
	cmd, err := b.Command(context.Background(), []string{"/bin/sh", "-c", plantLater}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() {
		f, err := os.Open(filepath.Join(ws, "ready.fifo")) // blocks until the command opens it
		if err == nil {
			_, err = io.ReadAll(f)
			f.Close()
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(failAfter):
		cmd.Process.Kill()
		t.Fatalf("the command never became ready: %q", out.String())
	}
	return func() string {
		done := make(chan error, 1)
		go func() { done <- os.WriteFile(filepath.Join(ws, "go.fifo"), []byte("go\n"), 0) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(failAfter):
			cmd.Process.Kill()
			t.Fatalf("the command never read its go-ahead: %q", out.String())
		}
		_ = cmd.Wait()
		return out.String()
	}
}

// checkNotPlanted fails if any of plantLater's writes reached the host.
func checkNotPlanted(t *testing.T, ws string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(ws, "deputy.yaml")); err == nil && len(b) != 0 {
		t.Errorf("deputy.yaml was written from the sandbox: %q", b)
	}
	for _, rel := range []string{".claude/agents", ".git/config", ".deputy/x"} {
		if exists(filepath.Join(ws, rel)) {
			t.Errorf("%s was planted from the sandbox", rel)
		}
	}
}

// Two boxes on one workspace without its protected paths: the first to
// close must not remove the placeholders the other is still bound over
// (unlinking a mount point in another mount namespace detaches the mount
// there), and the other's later commands still find them; the last one
// to close removes them.
func TestSharedWorkspaceCloseKeepsOthersPlaceholders(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	l := newLayout(t)
	state := t.TempDir()
	before := treeDigest(t, l.ws)
	p := Policy{Workspace: l.ws, Protect: protectedForTest, StateDir: state}
	a := newBox(t, p)
	b := newBox(t, p)
	release := startPlanter(t, b)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	out := release()
	if !strings.Contains(out, "done") {
		t.Fatalf("the command did not run to its end: %q", out)
	}
	checkNotPlanted(t, l.ws)
	for _, rel := range []string{"deputy.yaml", ".claude", ".git", ".deputy"} {
		if !exists(filepath.Join(l.ws, rel)) {
			t.Errorf("the placeholder %s went with the first box while the second lives", rel)
		}
	}
	if out, err := mustCommand(t, b, "echo again").CombinedOutput(); err != nil || string(out) != "again\n" {
		t.Errorf("a later command in the second box: %v %q", err, out)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(l.ws, "ready.fifo"))
	os.Remove(filepath.Join(l.ws, "go.fifo"))
	if after := treeDigest(t, l.ws); after != before {
		ents, _ := os.ReadDir(l.ws)
		t.Errorf("placeholders were left after the last box closed (entries now %v)", ents)
	}
	if ents, _ := os.ReadDir(state); len(ents) > 1 { // the lock file stays
		t.Errorf("state left: %v", ents)
	}
}

// A Sweep (another process's recovery) while a box lives leaves the
// placeholders the box is bound over, though a dead process made them;
// the box removes them at its Close.
func TestSweepKeepsLiveBoxesPlaceholders(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	l := newLayout(t)
	state := t.TempDir()
	before := treeDigest(t, l.ws)
	// A dead process's box made the placeholders and never closed.
	gs, err := parseGuards(protectedForTest, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, ps, err := makePlaceholders(l.ws, gs, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recordPlaceholders(state, ps)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(rec, filepath.Join(state, "deputy-guard-4194304-1")); err != nil {
		t.Fatal(err)
	}
	b := newBox(t, Policy{Workspace: l.ws, Protect: protectedForTest, StateDir: state})
	release := startPlanter(t, b)
	if err := Sweep(state); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(state, "deputy-guard-4194304-1")) {
		t.Error("Sweep left the dead process's record")
	}
	if out := release(); !strings.Contains(out, "done") {
		t.Fatalf("the command did not run to its end: %q", out)
	}
	checkNotPlanted(t, l.ws)
	for _, rel := range []string{"deputy.yaml", ".claude", ".git", ".deputy"} {
		if !exists(filepath.Join(l.ws, rel)) {
			t.Errorf("Sweep removed the placeholder %s a live box is bound over", rel)
		}
	}
	if out, err := mustCommand(t, b, "echo again").CombinedOutput(); err != nil || string(out) != "again\n" {
		t.Errorf("a later command: %v %q", err, out)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(l.ws, "ready.fifo"))
	os.Remove(filepath.Join(l.ws, "go.fifo"))
	if after := treeDigest(t, l.ws); after != before {
		ents, _ := os.ReadDir(l.ws)
		t.Errorf("placeholders were left after the box closed (entries now %v)", ents)
	}
}

// A placeholder removed from the host while the box lives (by something
// that does not coordinate with it) is made again before the next
// command, which would otherwise fail to mount it.
func TestRemovedPlaceholderIsRemade(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	l := newLayout(t)
	b := newBox(t, Policy{Workspace: l.ws, Protect: protectedForTest, StateDir: t.TempDir()})
	for _, rel := range []string{"deputy.yaml", ".claude", ".git"} {
		if err := os.Remove(filepath.Join(l.ws, rel)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := mustCommand(t, b, "mkdir -p .claude/agents; echo x > deputy.yaml; echo ran").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ran") {
		t.Fatalf("the next command: %v %q", err, out)
	}
	checkNotPlanted(t, l.ws)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"deputy.yaml", ".claude", ".git", ".deputy"} {
		if exists(filepath.Join(l.ws, rel)) {
			t.Errorf("the remade placeholder %s was left", rel)
		}
	}
}

func mustCommand(t *testing.T, b *Box, script string) *Cmd {
	t.Helper()
	c, err := b.Command(context.Background(), []string{"/bin/sh", "-c", script}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
