package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSandboxCommand(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "sub", "f.txt"), "in sub\n")
	b := newBox(t, Policy{Workspace: ws})
	c, err := b.Command(context.Background(), []string{"sh", "-c", `pwd; cat f.txt; id -u; echo "$HOME"; exit 3`},
		filepath.Join(ws, "sub"), []string{"PATH=/usr/bin:/bin", "HOME=/root"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v", err)
	}
	want := filepath.Join(ws, "sub") + "\nin sub\n65534\n/tmp\n"
	if string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
	if c.Note != "" {
		t.Errorf("note %q", c.Note)
	}
	if _, err := b.Command(context.Background(), nil, "", nil); err == nil {
		t.Error("empty argv accepted")
	}
	c, _ = b.Command(context.Background(), []string{"true"}, t.TempDir(), nil)
	if err := c.Run(); err == nil || !strings.Contains(err.Error(), "outside the sandbox's roots") {
		t.Errorf("a working directory outside the roots: %v", err)
	}
}

// Cancelling the context kills the sandbox; Wait returns with nothing left.
func TestSandboxCommandCancel(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := t.TempDir()
	fifo := filepath.Join(ws, "fifo")
	mkfifo(t, fifo)
	env, mark := markedEnv(t)
	b := newBox(t, Policy{Workspace: ws})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := b.Command(ctx, []string{"bash", "-c", `setsid sleep 1001 & sleep 1002 & echo up > fifo; wait`}, "", env)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(openFIFO(t, fifo)).ReadString('\n'); line != "up\n" {
		t.Fatalf("%q", line)
	}
	cancel()
	if err := c.Wait(); err == nil {
		t.Error("a cancelled command succeeded")
	}
	if live := survivors(t, mark); len(live) > 0 {
		t.Errorf("survivors: %v", live)
	}
}

// Kill ends every command running in the box at once; the box stays
// usable.
func TestSandboxKillAll(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := t.TempDir()
	env, mark := markedEnv(t)
	b := newBox(t, Policy{Workspace: ws})
	const n = 3
	var wg sync.WaitGroup
	notes := make([]string, n)
	for i := range n {
		fifo := filepath.Join(ws, fmt.Sprint("fifo", i))
		mkfifo(t, fifo)
		c, _ := b.Command(context.Background(), []string{"bash", "-c", fmt.Sprintf(`sleep 100%d & echo up > %s; wait`, i, fifo)}, "", env)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Wait(); notes[i] = c.Note }()
		openFIFO(t, fifo)
	}
	b.Kill()
	if live := survivors(t, mark); len(live) > 0 {
		t.Errorf("survivors right after Kill: %v", live)
	}
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(failAfter):
		t.Fatal("commands did not return after Kill")
	}
	for i, note := range notes {
		if note != "killed by the session" {
			t.Errorf("command %d: note %q", i, note)
		}
	}
	c, _ := b.Command(context.Background(), []string{"true"}, "", nil)
	if err := c.Run(); err != nil {
		t.Errorf("the box is unusable after Kill: %v", err)
	}
}

// /tmp is the session's: kept from one command to the next, not shared
// with another box, gone after Close.
func TestSandboxPrivateTmp(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := t.TempDir()
	b1, b2 := newBox(t, Policy{Workspace: ws}), newBox(t, Policy{Workspace: ws})
	sh := func(b *Box, script string) string {
		c, _ := b.Command(context.Background(), []string{"sh", "-c", script}, "", nil)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v %s", script, err, out)
		}
		return string(out)
	}
	sh(b1, "echo kept > /tmp/note")
	if got := sh(b1, "cat /tmp/note"); got != "kept\n" {
		t.Errorf("/tmp did not persist between commands: %q", got)
	}
	if got := sh(b2, "cat /tmp/note 2>&1 || true"); strings.Contains(got, "kept") {
		t.Error("another box sees this box's /tmp")
	}
	if exists(filepath.Join(os.TempDir(), "note")) {
		t.Error("the box's /tmp is the host's")
	}
	tmp := b1.tmp
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	if exists(tmp) {
		t.Errorf("%s left after Close", tmp)
	}
}

func TestSandboxDescription(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws, extra := t.TempDir(), t.TempDir()
	d := newBox(t, Policy{Workspace: ws, WritePaths: []string{extra}, CPUSeconds: 60, MemoryBytes: 1 << 30, MaxProcesses: 100}).Description()
	for _, want := range []string{ws, extra, "read-only", "/tmp is private", "no network", "At most 100 processes", "60 s of CPU", "1024 MiB"} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q: %s", want, d)
		}
	}
	if d := newBox(t, Policy{Workspace: ws, Network: true}).Description(); !strings.Contains(d, "network is available") {
		t.Errorf("network granted: %s", d)
	}
}

// helperEnv marks the test binary re-executed as a deputy process that
// dies with a command running in its box.
const helperEnv = "DEPUTY_SANDBOX_TEST_PARENT"

// TestSandboxHelperParent is that process, when re-executed: it starts a
// command in a box and waits to be killed.
func TestSandboxHelperParent(t *testing.T) {
	ws := os.Getenv(helperEnv)
	if ws == "" {
		t.Skip("only run re-executed, by TestSandboxDiesWithParent")
	}
	b, err := New(Policy{Workspace: ws, StateDir: os.Getenv("DEPUTY_SANDBOX_TEST_STATE"), Env: []string{markName}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := b.Command(context.Background(), []string{"sh", "-c", "sleep 1001 & setsid sleep 1002 & echo up > fifo; wait"}, "", nil)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait() // killed before this returns
}

// When deputy dies (SIGKILL, no cleanup), its sandboxes die with it.
func TestSandboxDiesWithParent(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws := t.TempDir()
	mkfifo(t, filepath.Join(ws, "fifo"))
	env, mark := markedEnv(t)
	parent := exec.Command(os.Args[0], "-test.run=^TestSandboxHelperParent$", "-test.count=1")
	parent.Env = append(env, helperEnv+"="+ws, "DEPUTY_SANDBOX_TEST_STATE="+t.TempDir())
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(openFIFO(t, filepath.Join(ws, "fifo"))).ReadString('\n'); line != "up\n" {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("the helper's command did not start: %q", line)
	}
	if live := survivors(t, mark); len(live) < 4 {
		t.Fatalf("want the helper, bwrap, its init, sh and the sleeps, found %v", live)
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	// The kernel delivers bwrap's parent-death signals on its own time.
	pollUntil(t, "the sandbox to die with its parent", func() bool { return len(survivors(t, mark)) == 0 })
}

// When bwrap cannot make the sandbox (a bind whose source has gone, an
// option it refuses), Start fails, with bwrap's own message, instead of
// passing bwrap's exit off as the command's: nothing ran. The box stays
// usable for the next command.
func TestSandboxSetupFailureIsAStartError(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, extra, flag string)
		want   string
	}{
		// The read path is mounted in the sandbox's namespace, after
		// bwrap has reported its init's pid.
		{"mount", func(t *testing.T, extra, _ string) {
			if err := os.RemoveAll(extra); err != nil {
				t.Fatal(err)
			}
		}, "bwrap: Can't find source path " + "EXTRA"},
		// An option bwrap refuses: it exits before it clones anything.
		{"args", func(t *testing.T, _, flag string) { writeFile(t, flag, "") }, "bwrap: Unknown option --no-such-option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws, extra, dir := t.TempDir(), t.TempDir(), t.TempDir()
			flag := filepath.Join(dir, "broken")
			wrapper := filepath.Join(dir, "bwrap")
			writeFile(t, wrapper, fmt.Sprintf("#!/bin/sh\nif [ -e %s ]; then exec %s --no-such-option \"$@\"; fi\nexec %s \"$@\"\n", flag, real, real))
			if err := os.Chmod(wrapper, 0o755); err != nil {
				t.Fatal(err)
			}
			b := newBox(t, Policy{Workspace: ws, ReadPaths: []string{extra}, Bwrap: wrapper})
			run := func() (string, error) {
				var out strings.Builder
				c, err := b.Command(context.Background(), []string{"sh", "-c", "echo ran > ran; echo ran"}, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				c.Stdout, c.Stderr = &out, &out
				err = c.Run()
				return out.String(), err
			}
			tc.break_(t, extra, flag)
			want := strings.ReplaceAll(tc.want, "EXTRA", extra)
			out, err := run()
			if err == nil || !strings.Contains(err.Error(), "nothing ran") || !strings.Contains(err.Error(), want) {
				t.Errorf("a sandbox bwrap could not make: %v (output %q); want an error with %q", err, out, want)
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Errorf("reported as the command's exit: %v", err)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
				t.Error("the command ran")
			}
			// Repaired, the box runs commands again.
			if err := os.MkdirAll(extra, 0o755); err != nil {
				t.Fatal(err)
			}
			_ = os.Remove(flag)
			if out, err := run(); err != nil || out != "ran\n" {
				t.Errorf("after the repair: %q %v", out, err)
			}
		})
	}
}
