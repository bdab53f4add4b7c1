package clients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeKey is the key the fake requires of every client (--api-key), so a
// client that drops or mangles the configured key fails its check.
const fakeKey = "sk-deputy-clients-0000"

// buildDeputy builds the CLI once for the whole matrix, into dir, unless
// DEPUTY_CLIENTS_DEPUTY names a deputy binary to run the matrix against
// (another build, or a release).
func buildDeputy(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv("DEPUTY_CLIENTS_DEPUTY"); bin != "" {
		return bin
	}
	bin := filepath.Join(dir, "deputy")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/deputy-run/deputy/cmd/deputy")
	// As .ci/run's build stage builds, so its compiled packages are reused.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build deputy: %v\n%s", err, out)
	}
	return bin
}

// fakeLLM is one `deputy fakellm` process on a free loopback port.
type fakeLLM struct {
	URL    string // http://127.0.0.1:PORT, no trailing slash
	stderr lockedBuffer
}

// lockedBuffer is a process's stderr, read (for a failure message) while
// the process may still write it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startFake runs `deputy fakellm` with scenarios/NAME (and flags) and waits
// for its "listening on" line; the process is stopped with SIGTERM at
// cleanup and must exit cleanly.
func startFake(t *testing.T, bin, scenario string, flags ...string) *fakeLLM {
	t.Helper()
	f := &fakeLLM{}
	logFile := filepath.Join(t.TempDir(), "requests.jsonl")
	args := append([]string{"fakellm", "--addr", "127.0.0.1:0", "--api-key", fakeKey,
		"--scenario", filepath.Join("scenarios", scenario), "--log", logFile}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &f.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start deputy fakellm: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("deputy fakellm (%s) did not exit cleanly: %v\n%s", scenario, err, f.stderr.String())
		}
		// A failed check shows what the fake answered to each request
		// (--log), which its own message does not.
		if b, err := os.ReadFile(logFile); t.Failed() && err == nil {
			t.Logf("the fake's log (--log), its answers:\n%s", answers(b))
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	// A guard against a fake that never comes up, not a wait for one: the
	// line normally arrives within milliseconds.
	select {
	case l, ok := <-lines:
		_, url, found := strings.Cut(l, "listening on ")
		if !ok || !found {
			t.Fatalf("deputy fakellm --scenario %s printed %q, not its address\n%s", scenario, l, f.stderr.String())
		}
		f.URL = strings.TrimSpace(url)
	case <-time.After(30 * time.Second):
		t.Fatalf("deputy fakellm --scenario %s printed no address within 30s\n%s", scenario, f.stderr.String())
	}
	return f
}

// answers sums up a --log file: per exchange its request cut short, then its
// answer: the body, or each streamed event's name and data cut short.
func answers(jsonl []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(jsonl)), "\n") {
		var l logged
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			fmt.Fprintf(&b, "  (unreadable line: %v)\n", err)
			continue
		}
		fmt.Fprintf(&b, "  %v\n", l)
		if len(l.Events) == 0 {
			fmt.Fprintf(&b, "    → %s\n", excerpt(string(l.Response), 1500))
		}
		for _, ev := range l.Events {
			fmt.Fprintf(&b, "    → %s %s\n", ev.Event, excerpt(string(ev.Data), 200))
		}
	}
	return b.String()
}

// logged is one exchange of GET /_deputy/requests, the fields the checks
// read (llm/fake's LogEntry, read as a test in another language would).
type logged struct {
	Seq     int             `json:"seq"`
	Wire    string          `json:"wire"`
	Method  string          `json:"method"`
	Path    string          `json:"path"`
	Status  int             `json:"status"`
	Stream  bool            `json:"stream"`
	Header  http.Header     `json:"header"`
	Request json.RawMessage `json:"request"`
	Events  []struct {
		Event string          `json:"event"`
		Data  json.RawMessage `json:"data"`
	} `json:"events"`
	Response json.RawMessage `json:"response"`
}

func (l logged) String() string {
	return fmt.Sprintf("#%d %s %s → %d (stream %v): %s", l.Seq, l.Method, l.Path, l.Status, l.Stream, excerpt(string(l.Request), 300))
}

// requests is what the fake received so far, in the order the exchanges ended.
func (f *fakeLLM) requests(t *testing.T) []logged {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.URL+"/_deputy/requests", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fakeKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /_deputy/requests: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /_deputy/requests: %d %v: %s", resp.StatusCode, err, excerpt(string(body), 500))
	}
	var log struct {
		Requests []logged `json:"requests"`
	}
	if err := json.Unmarshal(body, &log); err != nil {
		t.Fatalf("GET /_deputy/requests: %v: %s", err, excerpt(string(body), 500))
	}
	return log.Requests
}

// excerpt cuts s to about n bytes for a failure message.
func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… (%d bytes)", len(s))
}

// client is one client program's run: its command, directory, environment.
type client struct {
	name string
	dir  string
	env  []string
	args []string
}

// baseEnv is the whole environment a client gets: no variable of the
// developer's or CI's leaks in (a real ANTHROPIC_API_KEY least of all), a
// private HOME, and the fake's address and key under the names the SDKs read.
func baseEnv(t *testing.T, f *fakeLLM) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"LANG=C.UTF-8",
		"ANTHROPIC_BASE_URL=" + f.URL,
		"ANTHROPIC_API_KEY=" + fakeKey,
		"OPENAI_BASE_URL=" + f.URL + "/v1",
		"OPENAI_API_KEY=" + fakeKey,
		// The Agents SDK's own switch for its trace export, which posts to
		// OpenAI's tracing endpoint whatever the base URL.
		"OPENAI_AGENTS_DISABLE_TRACING=1",
	}
}

// run runs the client to its end (three minutes at most) and returns what it
// printed on stdout; a failed run fails the check with both streams.
func (c client) run(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.args[0], c.args[1:]...)
	cmd.Dir, cmd.Env = c.dir, c.env
	// Claude Code and Codex start programs of their own (a tool's shell,
	// ripgrep, a sandbox helper, a subagent): the client leads a process
	// group, and the whole group is killed on a timeout and after the run,
	// so nothing it started outlives the check.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	defer func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = nil
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", c.name, err, excerpt(stdout.String(), 4000), excerpt(stderr.String(), 4000))
	}
	return stdout.String()
}

// decodeReport reads the last line a check script printed: its report.
func decodeReport[T any](t *testing.T, stdout string) T {
	t.Helper()
	var r T
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	last := lines[len(lines)-1]
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		t.Fatalf("the check's report %q: %v\nstdout:\n%s", excerpt(last, 300), err, excerpt(stdout, 2000))
	}
	return r
}
