package shell_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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
	"github.com/deputy-run/deputy/tool/shell/tether"
)

func TestMain(m *testing.M) {
	if n := os.Getenv(nofileEnv); n != "" {
		os.Exit(outOfDescriptors(n))
	}
	goleak.VerifyTestMain(m)
}

// nofileEnv makes the test binary run one bash call with all but n of its
// file descriptors in use (outOfDescriptors).
const nofileEnv = "SHELLTEST_NOFILE_FREE"

// outOfDescriptors lowers RLIMIT_NOFILE, uses up all descriptors but free
// of them, runs `echo hi` through the tool and prints the result as JSON.
func outOfDescriptors(free string) int {
	n, _ := strconv.Atoi(free)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 64, Max: 64}); err != nil {
		fmt.Println(err)
		return 2
	}
	set := tool.MustSet(must(shell.New(shell.Config{Dir: os.TempDir()})))
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
	}
	for _, f := range held[len(held)-n:] {
		f.Close()
	}
	out, isErr := set.Call(context.Background(), "bash", json.RawMessage(`{"command":"echo hi"}`))
	for _, f := range held {
		f.Close()
	}
	b, _ := json.Marshal(map[string]any{"out": out, "is_error": isErr})
	fmt.Println(string(b))
	return 0
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

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
	}
	for _, tc := range tests {
		out, isErr := run(context.Background(), set, map[string]any{"command": tc.cmd})
		if out != tc.want || isErr != tc.isErr {
			t.Errorf("%s: got %q (err=%v), want %q", tc.cmd, out, isErr, tc.want)
		}
	}
	// A script still ends itself with kill $$, though as pid 1 of its
	// namespace bash would ignore the signal without deputy's trap.
	want := "(no output)\n[killed by signal: terminated]"
	if namespaced() {
		want = "(no output)\n[exit code: 143]"
	}
	if out, isErr := run(context.Background(), set, map[string]any{"command": "kill -TERM $$; echo went on"}); out != want || isErr {
		t.Errorf("kill $$: got %q (err=%v), want %q", out, isErr, want)
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
	if !isErr || !strings.Contains(out, "the command did not run: could not start /nonexistent/bash") {
		t.Errorf("%q %v", out, isErr)
	}
}

// Issue 16 item 5: a command that cannot start for lack of descriptors
// (none left for the output pipe, or none for /dev/null once the pipe is
// made) is an error result that says it did not run, never a success with
// empty output.
func TestBashOutOfDescriptorsIsAnError(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, free := range []string{"0", "1", "2", "3"} {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), nofileEnv+"="+free)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s free: %v %s", free, err, b)
		}
		var res struct {
			Out     string `json:"out"`
			IsError bool   `json:"is_error"`
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("%s free: %v %s", free, err, b)
		}
		if !res.IsError || !strings.Contains(res.Out, "the command did not run") ||
			!strings.Contains(res.Out, "out of file descriptors") {
			t.Errorf("%s descriptors free: %+v", free, res)
		}
	}
}

// The case: telemetry credentials and provider keys in deputy's
// own environment (not a configured one) never reach a real bash, whatever
// their names; what builds need does.
func TestBashEnvIsAllowlisted(t *testing.T) {
	// Not parallel: t.Setenv.
	ws := t.TempDir()
	for k, v := range map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":        "authorization=Bearer leak-otel-1",
		"OTEL_EXPORTER_OTLP_ENDPOINT":       "https://user:leak-otel-2@collector.example:4318",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-api=leak-otel-3",
		"ANTHROPIC_API_KEY":                 "sk-ant-leak4",
		"OPENAI_API_KEY":                    "sk-leak5",
		"DEPUTY_API_TOKEN":                  "leak6",
		"GITHUB_TOKEN":                      "ghp_leak7",
		"DATABASE_URL":                      "postgres://deputy:leak8@db/deputy",
		"SOME_HARMLESS_LOOKING_NAME":        "leak9",
		"HTTPS_PROXY":                       "http://user:leak10@proxy.example:3128",
		"http_proxy":                        "http://proxy.example:3128",
		"GOFLAGS":                           "-mod=mod",
		"LC_TIME":                           "C",
		"GRANTED_VAR":                       "granted",
		"DEPUTY_MODEL":                      "fake",
		"PWD":                               "/somewhere/else",
	} {
		t.Setenv(k, v)
	}
	set := newBash(t, shell.Config{Dir: ws, PassEnv: []string{"GRANTED_VAR", "OTEL_EXPORTER_OTLP_HEADERS", "DEPUTY_MODEL"}})
	out, isErr := run(context.Background(), set, map[string]any{"command": "env"})
	if isErr {
		t.Fatal(out)
	}
	if strings.Contains(out, "leak") || strings.Contains(out, "OTEL_") || strings.Contains(out, "DEPUTY_") {
		t.Errorf("a credential reached the command:\n%s", out)
	}
	for _, want := range []string{"PATH=", "GOFLAGS=-mod=mod", "LC_TIME=C", "http_proxy=http://proxy.example:3128", "GRANTED_VAR=granted"} {
		if !strings.Contains("\n"+out, "\n"+want) {
			t.Errorf("%s dropped:\n%s", want, out)
		}
	}
	if strings.Contains(out, "/somewhere/else") || !strings.Contains("\n"+out, "\nPWD="+ws+"\n") {
		t.Errorf("PWD not set to the working directory:\n%s", out)
	}
}

func TestAllowEnv(t *testing.T) {
	t.Parallel()
	in := []string{"HOME=/root", "X_API_KEY=a", "OTEL_EXPORTER_OTLP_HEADERS=b", "DEPUTY_TOKEN=c", "TERM=xterm",
		"LC_ALL=C", "KEYBOARD=us", "GOPROXY=https://tok@proxy.example", "GOPROXY=https://proxy.golang.org,direct",
		"MINE=x", "ANTHROPIC_API_KEY=d", "=weird"}
	got := shell.AllowEnv(in, []string{"MINE", "ANTHROPIC_API_KEY"})
	want := []string{"HOME=/root", "TERM=xterm", "LC_ALL=C", "GOPROXY=https://proxy.golang.org,direct", "MINE=x"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", got, want)
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
// pgidCmd prints the shell's process group id as the host sees it: $$ is
// the namespace's pid (1) when the command runs in a PID namespace of its
// own, while /proc, the host's, shows host ids (field 5 of stat is the
// group; comm, "cut", has no spaces).
const pgidCmd = `$(cut -d' ' -f5 /proc/self/stat)`

// namespaced reports whether commands run in a PID namespace of their own
// here (package tether; the tests that need to know have run one command
// before asking).
func namespaced() bool {
	m := tether.Mode()
	return m == tether.ModePIDNamespace || m == tether.ModeUserPIDNamespace
}

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
			"command":   fmt.Sprintf(`exec 3>'%s'; echo %s >&3; sleep 30 & wait`, fifo, pgidCmd),
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
			"command": fmt.Sprintf(`exec 3>'%s'; echo %s >&3; sleep 30 & echo started`, fifo, pgidCmd),
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
// cannot keep the call waiting past WaitDelay; in a PID namespace of its
// own it does not even outlive the call.
func TestBashEscapedProcessBoundedByWaitDelay(t *testing.T) {
	t.Parallel()
	set := newBash(t, shell.Config{WaitDelay: 50 * time.Millisecond})
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The command waits until the escapee has left the group (it writes its
	// pid after setsid) so that the group kill cannot catch it first. The
	// pid is the host's: read by bash itself from /proc/self, the host's
	// procfs.
	out, _ := run(context.Background(), set, map[string]any{
		"command": fmt.Sprintf(`setsid bash -c 'read -r p _ < /proc/self/stat; echo $p > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 30' _ '%[1]s' &
			while [ ! -s '%[1]s' ]; do sleep 0.01; done; echo started`, pidFile),
	})
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	if namespaced() {
		if !strings.Contains(out, "started\n") || strings.Contains(out, "still held its output open") {
			t.Errorf("got %q", out)
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the process that left the group outlived the call (kill 0: %v)", err)
		}
		return
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

// BenchmarkBashCall is the cost of one call of a command that does
// nothing: the start (tethered, in a PID namespace where the kernel
// allows), the wait and the group kill.
func BenchmarkBashCall(b *testing.B) {
	bash, err := shell.New(shell.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	set := tool.MustSet(bash)
	for b.Loop() {
		if out, isErr := set.Call(context.Background(), "bash", json.RawMessage(`{"command":"true"}`)); isErr {
			b.Fatal(out)
		}
	}
}
