package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/llm/fake"
)

// post sends body to url+path as an Anthropic client does and returns the
// status.
func post(t *testing.T, client *http.Client, url, path, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("x-api-key", "sk-cli-secret-77")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestFakeLLMLogsAndInjectsFromFlags: a `deputy fakellm` process given
// --log, --fault and --latency fails the request it was told to, and every
// exchange is in the file (a line each, the key redacted) while the server
// still runs, and in /_deputy/requests.
func TestFakeLLMLogsAndInjectsFromFlags(t *testing.T) {
	t.Parallel()
	logFile := filepath.Join(t.TempDir(), "requests.jsonl")
	url, stop := startFakeLLM(t, "--log", logFile, "--fault", "2=overloaded", "--latency", "30ms", "--api-key", "sk-cli-secret-77")
	defer stop()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	body := `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	begun := time.Now()
	for i, want := range []int{200, 529, 200} {
		if got := post(t, client, url, "/v1/messages", body); got != want {
			t.Fatalf("request %d: status %d, want %d", i+1, got, want)
		}
	}
	if took := time.Since(begun); took < 60*time.Millisecond {
		t.Errorf("three requests at --latency 30ms (two answered) took %s", took)
	}
	raw, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "sk-cli-secret-77") {
		t.Fatal("the log holds the API key")
	}
	var lines []fake.LogEntry
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var e fake.LogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, e)
	}
	if len(lines) != 3 || lines[1].Status != 529 || lines[1].Fault == nil || lines[1].Fault.Kind != fake.FaultOverloaded ||
		lines[0].LatencyMS < 30 || lines[0].Response == nil {
		t.Fatalf("log file while serving:\n%s", raw)
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/_deputy/requests?since=1", nil)
	req.Header.Set("Authorization", "Bearer sk-cli-secret-77")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l fake.RequestLog
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || len(l.Requests) != 2 || l.LastSeq != 3 {
		t.Fatalf("GET /_deputy/requests?since=1: %v %+v", err, l)
	}
}

func TestFakeLLMRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fault", "3=overload"}, `--fault "3=overload": unknown fault "overload"`},
		{[]string{"--fault-rate", "2"}, `--fault-rate 2: a rate is from 0 to 1`},
		{[]string{"--random-fault", "rate_limit,retry_after=x"}, `--random-fault "rate_limit,retry_after=x": retry_after "x"`},
		{[]string{"--log", filepath.Join(t.TempDir(), "no", "such", "dir", "f.jsonl")}, "--log: open "},
	} {
		_, errOut, code := deputy(t, t.TempDir(), nil, append([]string{"fakellm", "--addr", "127.0.0.1:0"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, exitUsage, c.want)
		}
	}
}

func TestFakeLLMHelpShowsEveryKnob(t *testing.T) {
	t.Parallel()
	out, _, code := deputy(t, t.TempDir(), nil, "fakellm", "--help")
	for _, want := range []string{"--log", "--latency", "--per-token", "--fault ", "--fault-rate", "--random-fault", "--seed",
		"--max-delta", "--min-cache-tokens", "--max-logged", "Examples:", "/_deputy/requests"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
}
