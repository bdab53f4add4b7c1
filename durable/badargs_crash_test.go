//go:build unix

package durable_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
)

// badArgsCLIScenario is the break as reported: a streamed OpenAI-wire bash
// call whose arguments are cut short, and one that is prose. The model
// then makes the call right and answers.
const badArgsCLIScenario = `
rules:
  - match: {turn: 1}
    tool_calls:
      - {name: bash, raw_input: '{"command": "echo hi"'}
      - {name: bash, raw_input: 'not json at all'}
  - match: {turn: 2, tool_result: "^invalid arguments for bash"}
    tool_calls: [{name: bash, input: {command: "echo ran >> count.txt && echo ok"}}]
  - match: {turn: 3}
    text: "done"
default:
  text: "unexpected request"
`

// TestBadArgumentsCrash: `deputy run --model openai:...` on SQLite exits 0
// after the model's malformed calls (it exited 1: "turn-1/generate ...
// failed to serialize step output"), and a run killed at the steps around
// them resumes under `deputy worker` from the checkpointed response (whose
// calls' arguments must decode back as sent) to the same transcript: the
// error results, the good call run once, the answer.
func TestBadArgumentsCrash(t *testing.T) {
	t.Parallel()
	bin := buildDeputy(t)
	sc, err := fake.ParseScenario([]byte(badArgsCLIScenario), "badargs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake.NewServer(fake.Options{Responder: sc}))
	t.Cleanup(hs.Close)
	for _, fp := range []string{"", "after:turn-1/generate", "after:turn-1/call-2-bash", "before:turn-2/generate"} {
		name := fp
		if name == "" {
			name = "no-crash"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCrashCase(t, bin, hs.URL, "sqlite")
			c.env = append(c.env, "OPENAI_API_KEY=test-key", "OPENAI_BASE_URL="+hs.URL+"/v1", "DEPUTY_FAKE_LATENCY=off")
			cmd := c.cmd(map[string]string{"DEPUTY_FAILPOINT": fp}, "run", "--model", "openai:fake", "--workspace", c.ws, "say hi")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if fp == "" {
				if err != nil || strings.TrimSpace(stdout.String()) != "done" {
					t.Fatalf("deputy run: %v, stdout %q; want exit 0 and the answer\n%s", err, stdout.String(), stderr.String())
				}
			} else {
				ee, ok := err.(*exec.ExitError)
				if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("deputy run did not die at %s: %v\n%s", fp, err, stderr.String())
				}
				w := c.cmd(nil, "worker", "-q", "--until-idle", "--workspace", c.ws)
				if out, err := w.CombinedOutput(); err != nil {
					t.Fatalf("deputy worker: %v\n%s", err, out)
				}
			}
			out, err := c.cmd(nil, "ps", "--all", "--json").CombinedOutput()
			if err != nil {
				t.Fatalf("deputy ps: %v\n%s", err, out)
			}
			var list []struct {
				ID, State string
				Turns     int
			}
			if err := json.Unmarshal(out, &list); err != nil || len(list) != 1 {
				t.Fatalf("ps: %v\n%s", err, out)
			}
			if list[0].State != "completed" || list[0].Turns != 3 {
				t.Errorf("root %+v, want completed after 3 turns", list[0])
			}
			out, err = c.cmd(nil, "show", "--json", list[0].ID).CombinedOutput()
			if err != nil {
				t.Fatalf("deputy show: %v\n%s", err, out)
			}
			var shown struct {
				Transcript []llm.Message `json:"transcript"`
			}
			if err := json.Unmarshal(out, &shown); err != nil {
				t.Fatal(err)
			}
			checkTranscript(t, shown.Transcript, 3)
			msgs := shown.Transcript
			if len(msgs) != 6 {
				t.Fatalf("%d messages, want 6", len(msgs))
			}
			want := []string{`{"command": "echo hi"`, `not json at all`}
			calls, results := msgs[1].ToolUses(), msgs[2].Content
			for i := range want {
				if i >= len(calls) || calls[i].InvalidInput != want[i] {
					t.Fatalf("turn 1 calls %+v; want the arguments %q kept as sent", calls, want)
				}
				r := results[i]
				// A side-effecting call cut by the crash after its start
				// marker is reported interrupted, never run twice; none of
				// these failpoints cuts one.
				if !r.IsError || !strings.Contains(r.Text, "arguments are not valid JSON") || !strings.Contains(r.Text, "you sent: "+want[i]) {
					t.Errorf("result %d: %+v", i, r)
				}
			}
			counts, _ := os.ReadFile(filepath.Join(c.ws, "count.txt"))
			if n := strings.Count(string(counts), "ran"); n != 1 {
				t.Errorf("the good call ran %d times, want once", n)
			}
		})
	}
}
