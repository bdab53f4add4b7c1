package shell_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/sandbox"
	"github.com/deputy-run/deputy/tool/shell"
)

// recordingSandbox is a Sandbox that runs the command unconfined and
// records how the tool drives the hook.
type recordingSandbox struct {
	err        error
	note       string
	args       []string
	stateAtEnd string // the leader's /proc state when end was called
	ends       int
}

func (s *recordingSandbox) Start(cmd *exec.Cmd) (func() string, error) {
	s.args = cmd.Args
	if s.err != nil {
		return nil, s.err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() string {
		s.ends++
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 {
			s.stateAtEnd = f[0]
		}
		return s.note
	}, nil
}

func TestBashSandboxHook(t *testing.T) {
	t.Parallel()
	sb := &recordingSandbox{note: "the process limit (5) refused 2 forks"}
	set := newBash(t, shell.Config{Sandbox: sb})
	out, isErr := run(context.Background(), set, map[string]any{"command": "echo hi; exit 2"})
	if isErr || out != "hi\n[sandbox: the process limit (5) refused 2 forks]\n[exit code: 2]" {
		t.Errorf("got %q (err=%v)", out, isErr)
	}
	if len(sb.args) != 3 || sb.args[1] != "-c" || sb.args[2] != "echo hi; exit 2" {
		t.Errorf("the sandbox got %q", sb.args)
	}
	// end runs once, after the command exited and before it was reaped.
	if sb.ends != 1 || sb.stateAtEnd != "Z" {
		t.Errorf("end called %d times, leader state %q at the call; want once, a zombie", sb.ends, sb.stateAtEnd)
	}

	failing := &recordingSandbox{err: errors.New("sandbox: bubblewrap (bwrap) not found")}
	out, isErr = run(context.Background(), newBash(t, shell.Config{Sandbox: failing}), map[string]any{"command": "echo never"})
	if !isErr || !strings.Contains(out, "bubblewrap (bwrap) not found") || strings.Contains(out, "never") {
		t.Errorf("a failed sandbox start: %q (err=%v)", out, isErr)
	}
}

func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		const why = "bubblewrap is not installed, so the sandboxed bash tool cannot be tested: apt-get install bubblewrap"
		if os.Getenv("DEPUTY_REQUIRE_ISOLATION") != "" {
			t.Fatal(why) // CI installs it (.ci/run)
		}
		t.Skip(why)
	}
}

// markedProcs lists the host's processes whose environment holds mark.
func markedProcs(t *testing.T, mark string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && strings.Contains("\x00"+string(b)+"\x00", "\x00"+mark+"\x00") {
			live = append(live, e.Name())
		}
	}
	return live
}

// With bwrap as the process the tool starts, its timeout and cancellation
// paths (group kill of the leader, then end) still kill everything the
// command started, inside the sandbox's own session and PID namespace.
func TestBashSandboxStopKillsTree(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	for _, tc := range []struct {
		name    string
		stop    func(fc *clock.Fake, cancel context.CancelFunc)
		wantOut string
	}{
		{"timeout", func(fc *clock.Fake, _ context.CancelFunc) { fc.Advance(5 * time.Second) }, "timed out after 5s"},
		{"cancel", func(_ *clock.Fake, cancel context.CancelFunc) { cancel() }, "command cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			box, err := sandbox.New(sandbox.Policy{Workspace: ws, Env: []string{"SHELLTEST_MARK"}}) // the mark finds its processes
			if err != nil {
				t.Fatal(err)
			}
			defer box.Close()
			mark := fmt.Sprintf("SHELLTEST_MARK=%s-%d", tc.name, time.Now().UnixNano())
			fc := clock.NewFake(time.Unix(1000, 0))
			set := newBash(t, shell.Config{Dir: ws, Clock: fc, Sandbox: box, Env: append(os.Environ(), mark),
				PassEnv: []string{"SHELLTEST_MARK"}})
			fifo := filepath.Join(ws, "fifo")
			mkfifoAt(t, fifo)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan string, 1)
			go func() {
				out, _ := run(ctx, set, map[string]any{
					"command":   `setsid sleep 1001 & sleep 1002 & (sleep 1003 &); echo up > fifo; wait`,
					"timeout_s": 5,
				})
				done <- out
			}()
			if line, err := bufio.NewReader(openFIFO(t, fifo)).ReadString('\n'); err != nil || line != "up\n" {
				t.Fatalf("%q %v", line, err)
			}
			if live := markedProcs(t, mark); len(live) < 4 {
				t.Fatalf("want bwrap, its init, bash and the sleeps running, found %v", live)
			}
			tc.stop(fc, cancel)
			var out string
			select {
			case out = <-done:
			case <-time.After(failAfter):
				t.Fatal("the command was not stopped")
			}
			if !strings.Contains(out, tc.wantOut) || !strings.Contains(out, "[killed by signal: killed]") {
				t.Errorf("got %q", out)
			}
			if live := markedProcs(t, mark); len(live) > 0 {
				t.Errorf("processes survived the kill: %v", live)
			}
		})
	}
}

func mkfifoAt(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o666); err != nil {
		t.Fatal(err)
	}
}

// A sandbox bwrap cannot make (here a read path removed after the box was
// made, so its bind fails) is a failed start the model is told about, with
// bwrap's reason, not an ordinary exit code of its command.
func TestBashSandboxSetupFailure(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ws, extra := t.TempDir(), t.TempDir()
	box, err := sandbox.New(sandbox.Policy{Workspace: ws, ReadPaths: []string{extra}})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	if err := os.Remove(extra); err != nil {
		t.Fatal(err)
	}
	out, isErr := run(context.Background(), newBash(t, shell.Config{Dir: ws, Sandbox: box}), map[string]any{"command": "echo ran > ran"})
	if !isErr || !strings.Contains(out, "the command did not run") || !strings.Contains(out, "Can't find source path "+extra) ||
		strings.Contains(out, "[exit code") {
		t.Errorf("got %q (err=%v)", out, isErr)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("the command ran")
	}
}
