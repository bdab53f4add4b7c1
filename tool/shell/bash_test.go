package shell_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/shell"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// failAfter bounds how long a test waits for something that should happen
// at once; it is a failure deadline, never a pause.
const failAfter = 10 * time.Second

func newBash(t *testing.T, cfg shell.Config) *tool.Set {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	b, err := shell.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tool.MustSet(b)
}

func run(ctx context.Context, set *tool.Set, args map[string]any) (string, bool) {
	raw, _ := json.Marshal(args)
	return set.Call(ctx, "bash", raw)
}

func TestBashBasics(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	set := newBash(t, shell.Config{Dir: ws})
	tests := []struct {
		cmd, want string
		isErr     bool
	}{
		{"echo hello", "hello\n[exit code: 0]", false},
		{"echo out; echo err >&2; exit 3", "out\nerr\n[exit code: 3]", false},
		{"pwd", ws + "\n[exit code: 0]", false},
		{"true", "(no output)\n[exit code: 0]", false},
		{"printf 'no newline'", "no newline\n[exit code: 0]", false},
		{"cat", "(no output)\n[exit code: 0]", false}, // stdin is empty, not the test's
		{"kill -TERM $$", "(no output)\n[killed by signal: terminated]", false},
	}
	for _, tc := range tests {
		out, isErr := run(context.Background(), set, map[string]any{"command": tc.cmd})
		if out != tc.want || isErr != tc.isErr {
			t.Errorf("%s: got %q (err=%v), want %q", tc.cmd, out, isErr, tc.want)
		}
	}
	for _, args := range []map[string]any{{}, {"command": ""}, {"command": "x", "timeout_s": 601}, {"command": "x", "timeout_s": 0}, {"command": "x", "cwd": "/"}} {
		if out, isErr := run(context.Background(), set, args); !isErr || !strings.Contains(out, "invalid arguments for bash") {
			t.Errorf("%v accepted: %q", args, out)
		}
	}
}

func TestBashStartFailure(t *testing.T) {
	t.Parallel()
	set := newBash(t, shell.Config{Shell: "/nonexistent/bash"})
	out, isErr := run(context.Background(), set, map[string]any{"command": "true"})
	if !isErr || !strings.Contains(out, "start /nonexistent/bash") {
		t.Errorf("%q %v", out, isErr)
	}
}

func TestBashEnvDropsSecrets(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	set := newBash(t, shell.Config{Dir: ws, Env: []string{
		"PATH=" + os.Getenv("PATH"),
		"ANTHROPIC_API_KEY=sk-ant-leak1",
		"OPENAI_API_KEY=sk-leak2",
		"GITHUB_TOKEN=ghp_leak3",
		"aws_secret_access_key=leak4",
		"DB_PASSWORD=leak5",
		"HARMLESS=kept",
		"PWD=/somewhere/else",
	}})
	out, isErr := run(context.Background(), set, map[string]any{"command": "env"})
	if isErr {
		t.Fatal(out)
	}
	if strings.Contains(out, "leak") {
		t.Errorf("secret reached the command:\n%s", out)
	}
	if !strings.Contains(out, "HARMLESS=kept") || !strings.Contains(out, "PATH=") {
		t.Errorf("ordinary variables dropped:\n%s", out)
	}
	if strings.Contains(out, "/somewhere/else") || !strings.Contains("\n"+out, "\nPWD="+ws+"\n") {
		t.Errorf("PWD not set to the working directory:\n%s", out)
	}
}

func TestFilterEnv(t *testing.T) {
	t.Parallel()
	in := []string{"HOME=/root", "X_API_KEY=a", "api_key=b", "MYAPIKEY=c", "SESSION_TOKEN=d", "Secret=e",
		"PGPASSWORD=f", "SMTP_PASSWD=g", "GOOGLE_APPLICATION_CREDENTIALS=h", "SSH_PRIVATE_KEY=i", "TERM=xterm", "KEYBOARD=us"}
	got := shell.FilterEnv(in)
	want := []string{"HOME=/root", "TERM=xterm", "KEYBOARD=us"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v", got)
	}
}

func TestBashOutputCap(t *testing.T) {
	t.Parallel()
	set := newBash(t, shell.Config{MaxOutput: 100})
	out, isErr := run(context.Background(), set, map[string]any{
		"command": "printf 'START'; head -c 100000 /dev/zero | tr '\\0' x; printf 'END'",
	})
	if isErr {
		t.Fatal(out)
	}
	want := "START" + strings.Repeat("x", 45) +
		"\n[... 99908 bytes of output cut by deputy (100008 in all); redirect to a file and read parts of it to see them ...]\n" +
		strings.Repeat("x", 47) + "END\n[exit code: 0]"
	if out != want {
		t.Errorf("got  %q\nwant %q", out, want)
	}
}

// mkfifo makes a FIFO the command writes to: reading it tells the test
// that the command is running, and EOF on it tells that every process that
// held it open is dead; no polling and no sleeping either way.
func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// openFIFO opens the read end, which blocks until the command opens the
// write end.
func openFIFO(t *testing.T, p string) *os.File {
	t.Helper()
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.OpenFile(p, os.O_RDONLY, 0)
		if err != nil {
			t.Error(err)
		}
		opened <- f
	}()
	select {
	case f := <-opened:
		if f == nil {
			t.FailNow()
		}
		t.Cleanup(func() { f.Close() })
		if err := f.SetReadDeadline(time.Now().Add(failAfter)); err != nil {
			t.Fatal(err)
		}
		return f
	case <-time.After(failAfter):
		t.Fatal("the command never opened the FIFO")
		return nil
	}
}

// groupAlive reports the processes of group pgid that are neither zombies
// nor exiting. A killed process closes its files (hence EOF on the FIFO)
// before it turns zombie; in between, its flags carry PF_EXITING.
func groupAlive(t *testing.T, pgid int) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("the process-group checks read /proc: %v", err)
	}
	var alive []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp session tty tpgid flags ...; comm may
		// contain spaces, so fields are counted after its ")".
		rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 7 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		const pfExiting = 0x4
		flags, _ := strconv.ParseUint(f[6], 10, 64)
		if f[0] != "Z" && f[0] != "X" && flags&pfExiting == 0 {
			alive = append(alive, e.Name()+" "+string(b))
		}
	}
	return alive
}

// stopCase runs `sleep 30` in the background of a bash that waits for it,
// stops it with stop, and checks that the whole group died at once.
func stopCase(t *testing.T, stop func(fc *clock.Fake, cancel context.CancelFunc), wantOut string) {
	fc := clock.NewFake(time.Unix(1000, 0))
	set := newBash(t, shell.Config{Clock: fc})
	fifo := mkfifo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type result struct {
		out   string
		isErr bool
	}
	done := make(chan result, 1)
	go func() {
		out, isErr := run(ctx, set, map[string]any{
			"command":   fmt.Sprintf(`exec 3>'%s'; echo $$ >&3; sleep 30 & wait`, fifo),
			"timeout_s": 5,
		})
		done <- result{out, isErr}
	}()
	f := openFIFO(t, fifo)
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if n := fc.Pending(); n != 1 {
		t.Fatalf("pending timers = %d, want the timeout armed", n)
	}
	start := time.Now()
	stop(fc, cancel)
	var res result
	select {
	case res = <-done:
	case <-time.After(failAfter):
		t.Fatal("bash was not stopped")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stopping took %v", took)
	}
	if !res.isErr || !strings.Contains(res.out, wantOut) || !strings.Contains(res.out, "[killed by signal: killed]") {
		t.Errorf("result %q (err=%v), want it to say %q", res.out, res.isErr, wantOut)
	}
	// EOF on the FIFO: bash and sleep, its only writers, have both exited.
	if _, err := io.ReadAll(f); err != nil {
		t.Fatalf("waiting for the group to die: %v", err)
	}
	if alive := groupAlive(t, pgid); len(alive) > 0 {
		t.Errorf("process group %d still has live members: %v", pgid, alive)
	}
}

func TestBashTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	stopCase(t, func(fc *clock.Fake, _ context.CancelFunc) {
		fc.Advance(4 * time.Second) // timeout_s is 5: not yet
		if fc.Pending() != 1 {
			t.Fatal("timer fired before the requested timeout")
		}
		fc.Advance(time.Second)
	}, "command timed out after 5s and was killed with all its child processes")
}

func TestBashCancelKillsGroup(t *testing.T) {
	t.Parallel()
	stopCase(t, func(_ *clock.Fake, cancel context.CancelFunc) { cancel() },
		"command cancelled (context canceled)")
}

// A job left in the background does not outlive the call, and does not
// keep the call waiting for it either.
func TestBashBackgroundJobKilledOnReturn(t *testing.T) {
	t.Parallel()
	set := newBash(t, shell.Config{})
	fifo := mkfifo(t)
	done := make(chan string, 1)
	go func() {
		out, _ := run(context.Background(), set, map[string]any{
			"command": fmt.Sprintf(`exec 3>'%s'; echo $$ >&3; sleep 30 & echo started`, fifo),
		})
		done <- out
	}()
	f := openFIFO(t, fifo)
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pgid, _ := strconv.Atoi(strings.TrimSpace(line))
	select {
	case out := <-done:
		if out != "started\n[exit code: 0]" {
			t.Errorf("got %q", out)
		}
	case <-time.After(failAfter):
		t.Fatal("the call waited for its background job")
	}
	if _, err := io.ReadAll(f); err != nil {
		t.Fatalf("background sleep survived: %v", err)
	}
	if alive := groupAlive(t, pgid); len(alive) > 0 {
		t.Errorf("live: %v", alive)
	}
}

// A process that escapes the group (setsid) while holding the output open
// cannot keep the call waiting past WaitDelay.
func TestBashEscapedProcessBoundedByWaitDelay(t *testing.T) {
	t.Parallel()
	set := newBash(t, shell.Config{WaitDelay: 50 * time.Millisecond})
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The command waits until the escapee has left the group (it writes its
	// pid after setsid) so that the group kill cannot catch it first.
	out, _ := run(context.Background(), set, map[string]any{
		"command": fmt.Sprintf(`setsid bash -c 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 30' _ '%[1]s' &
			while [ ! -s '%[1]s' ]; do sleep 0.01; done; echo started`, pidFile),
	})
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL) // the escapee is the test's to end
	if !strings.Contains(out, "started\n") || !strings.Contains(out, "still held its output open") {
		t.Errorf("got %q", out)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBashAlreadyCancelled(t *testing.T) {
	t.Parallel()
	set := newBash(t, shell.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, isErr := run(ctx, set, map[string]any{"command": "echo never"})
	if !isErr || strings.Contains(out, "never") || !strings.Contains(out, "cancelled") {
		t.Errorf("%q %v", out, isErr)
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatal()
	}
}
