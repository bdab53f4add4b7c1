package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// bin is the deputy binary built once for the whole package: the CLI is
// tested as users run it, as a separate process.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deputy-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "deputy")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build deputy: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	// goleak.VerifyTestMain would exit before the clean-up; check by hand.
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// deputy runs the binary with a clean environment (no credentials, no
// DEPUTY_MODEL from the developer's shell) plus env.
func deputy(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	// The demo's simulated model latency is realism for people, not tests.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEPUTY_FAKE_LATENCY=off"}, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestRunFakeDemoWorksOnARealWorkspace(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "describe this workspace")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if !strings.Contains(out, "describe this workspace") {
		t.Fatalf("answer does not mention the task:\n%s", out)
	}
	demo, err := os.ReadFile(filepath.Join(ws, "deputy-demo.md"))
	if err != nil {
		t.Fatalf("the demo did not write its file: %v\nstderr: %s", err, errOut)
	}
	if !strings.Contains(string(demo), "describe this workspace") {
		t.Fatalf("demo file:\n%s", demo)
	}
	if !strings.Contains(errOut, "write_file") {
		t.Fatalf("no tool progress on stderr:\n%s", errOut)
	}
	// Delegation shows: three explorers start and report, and the cost
	// table lists them under the root.
	if n := strings.Count(errOut, "explorer i-"); n < 9 || !strings.Contains(errOut, ": completed in 2 turns") {
		t.Errorf("children's progress missing:\n%s", errOut)
	}
	if !regexp.MustCompile(`(?m)^total .*\$0\.\d{4}`).MatchString(errOut) || strings.Count(errOut, "  explorer  isolated  completed") != 3 {
		t.Errorf("no cost table:\n%s", errOut)
	}
	if !strings.Contains(string(demo), "Three explorer subagents surveyed") {
		t.Errorf("the demo file lacks the reports:\n%s", demo)
	}
}

func TestRunJSONFromEnvModel(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	out, errOut, code := deputy(t, ws, []string{"DEPUTY_MODEL=fake"}, "run", "--json", "-q", "--workspace", ws, "count files")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Answer     string `json:"answer"`
		StopReason string `json:"stop_reason"`
		Turns      int    `json:"turns"`
		ToolCalls  int    `json:"tool_calls"`
		Usage      struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
		Cost      *float64 `json:"cost"`
		Instances []struct {
			ID     string   `json:"id"`
			Parent string   `json:"parent"`
			Type   string   `json:"type"`
			Mode   string   `json:"mode"`
			State  string   `json:"state"`
			Turns  int      `json:"turns"`
			Cost   *float64 `json:"cost"`
			Report string   `json:"report"`
			Usage  struct {
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		} `json:"instances"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if res.StopReason != "completed" || res.Answer == "" || res.Turns < 2 || res.ToolCalls < 1 ||
		res.Usage.InputTokens <= 0 || res.Usage.OutputTokens <= 0 {
		t.Fatalf("result %+v", res)
	}
	// The demo delegates to three explorers; every instance is listed with
	// its cost (the demo's illustrative prices), and they add up.
	if len(res.Instances) != 4 || res.Cost == nil {
		t.Fatalf("instances %+v, cost %v", res.Instances, res.Cost)
	}
	root := res.Instances[0]
	sum, out64 := 0.0, int64(0)
	for i, in := range res.Instances {
		if in.Cost == nil || in.State != "completed" {
			t.Fatalf("instance %d: %+v", i, in)
		}
		sum += *in.Cost
		out64 += in.Usage.OutputTokens
		if i > 0 && (in.Parent != root.ID || in.Type != "explorer" || in.Mode != "isolated" || in.Turns != 2 || in.Report == "") {
			t.Errorf("child %d: %+v", i, in)
		}
	}
	if d := sum - *res.Cost; d > 1e-9 || d < -1e-9 || out64 != res.Usage.OutputTokens {
		t.Errorf("instances do not add up to the tree: cost %v vs %v, output %d vs %d", sum, *res.Cost, out64, res.Usage.OutputTokens)
	}
	if errOut != "" {
		t.Fatalf("-q printed progress: %s", errOut)
	}
}

func TestRunLimitedByMaxTurnsExits3(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	out, _, code := deputy(t, ws, nil, "run", "--model", "fake", "--json", "-q", "--max-turns", "1", "x")
	if code != exitLimited || !strings.Contains(out, `"stop_reason": "max_turns"`) {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestRunWithoutModelSaysHowToConfigureOne(t *testing.T) {
	t.Parallel()
	_, errOut, code := deputy(t, t.TempDir(), nil, "run", "do something")
	if code != exitUsage {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"no model configured", "--model fake", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEPUTY_MODEL"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("help lacks %q:\n%s", want, errOut)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{"run"},
		{"run", "--model", "fake", "--workspace", "/does/not/exist", "x"},
		{"run", "--model", "nosuch:model", "x"},
		{"run", "--model", "fake", "--scenario", "/does/not/exist.yaml", "x"},
		{"run", "--bogus-flag", "x"},
		{"nosuchcommand"},
	}
	for _, args := range cases {
		_, errOut, code := deputy(t, t.TempDir(), nil, args...)
		if code != exitUsage || !strings.HasPrefix(errOut, "deputy: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, _, code := deputy(t, t.TempDir(), nil, "version")
	if code != 0 || !strings.HasPrefix(out, "deputy ") {
		t.Fatalf("exit %d: %q", code, out)
	}
}

// startFakeLLM starts `deputy fakellm` as a real process on a free port and
// returns its base URL and a function that stops it with SIGTERM and checks
// that it exits cleanly.
func startFakeLLM(t *testing.T, args ...string) (url string, stop func()) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"fakellm", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, "http://") {
		t.Fatalf("no address line: %q %v (%s)", line, err, stderr.String())
	}
	url = strings.TrimSpace(line[strings.Index(line, "http://"):])
	return url, func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("fakellm exit after SIGTERM: %v (%s)", err, stderr.String())
		}
	}
}

// TestFakeLLMServesAndStopsOnSIGTERM talks to a `deputy fakellm` process
// over HTTP and stops it with a signal.
func TestFakeLLMServesAndStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	url, stop := startFakeLLM(t)
	body := `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(body))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("x-api-key", "anything")
	req.Header.Set("anthropic-version", "2023-06-01")
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	if resp.StatusCode != 200 || !strings.Contains(string(msg), `"type":"message"`) {
		t.Fatalf("%d %s", resp.StatusCode, msg)
	}
	stop()
}

// TestRunRealProvidersAgainstFakeLLM runs the demo through the real
// Anthropic and OpenAI clients, over HTTP, against `deputy fakellm`.
func TestRunRealProvidersAgainstFakeLLM(t *testing.T) {
	t.Parallel()
	url, stop := startFakeLLM(t, "--scenario", "demo", "--api-key", "sk-test-secret-123")
	defer stop()
	for _, c := range []struct{ model, env string }{
		{"anthropic:fake", "ANTHROPIC_BASE_URL=" + url},
		{"openai:fake", "OPENAI_BASE_URL=" + url + "/v1"},
	} {
		ws := t.TempDir()
		env := []string{c.env, "ANTHROPIC_API_KEY=sk-test-secret-123", "OPENAI_API_KEY=sk-test-secret-123"}
		out, errOut, code := deputy(t, ws, env, "run", "--json", "-q", "--model", c.model, "--workspace", ws, "tell me")
		if code != 0 || !strings.Contains(out, `"stop_reason": "completed"`) {
			t.Fatalf("%s: exit %d\n%s\n%s", c.model, code, out, errOut)
		}
		if _, err := os.Stat(filepath.Join(ws, "deputy-demo.md")); err != nil {
			t.Fatalf("%s: %v", c.model, err)
		}
	}
}

// TestWrongKeyIsOneLineWithoutTheKey: a bad credential fails the run with
// one clear line that names the provider and status but never the key.
func TestWrongKeyIsOneLineWithoutTheKey(t *testing.T) {
	t.Parallel()
	url, stop := startFakeLLM(t, "--api-key", "right-key")
	defer stop()
	secret := "sk-wrong-key-do-not-print-4242"
	out, errOut, code := deputy(t, t.TempDir(), []string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=" + secret},
		"run", "--model", "anthropic:fake", "hi")
	if code != exitUsage || strings.Contains(out+errOut, secret) || !strings.Contains(errOut, "401") ||
		strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
}
