package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// waitScenario's bash call waits for the test to create the file "go": the
// run is at work, between two turns, for as long as the test needs.
const waitScenario = `
rules:
  - match: {turn: 1}
    tool_calls: [{name: bash, input: {command: "while [ ! -e go ]; do sleep 0.05; done"}}]
  - match: {turn: 2}
    text: "went"
`

// On a running instance a pause is only requested, and said so; a resume
// then is refused with the truth (a pause is on its way), not called a
// no-op; once the run has paused, the resume resumes.
func TestPauseOfARunningInstanceIsARequest(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "wait.yaml"), waitScenario)
	p := startProc(t, ws, "run", "--model", "fake", "--scenario", "wait.yaml", "--json", "wait for go")
	p.waitFor(t, "the bash call", func() bool { return strings.Contains(p.stderr.String(), "· bash") })
	out, _, _ := deputy(t, ws, nil, "ps", "--json")
	var list []struct{ ID string }
	if json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
		t.Fatalf("ps --json: %s", out)
	}
	id := list[0].ID // the root: this scenario spawns nothing

	out, errOut, code := deputy(t, ws, nil, "pause", id)
	if code != 0 || out != "pause requested: "+id+" stops at its next turn (now running)\n" {
		t.Fatalf("pause: exit %d\n%q\n%s", code, out, errOut)
	}
	args := []string{"resume", id}
	out, errOut, code = deputy(t, ws, nil, args...)
	oneErrorLine(t, args, out, errOut, code, "pause requested", "pauses at its next turn")

	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != exitWaiting || !strings.Contains(p.stdout.String(), `"state": "paused"`) {
		t.Fatalf("run: exit %d\n%s\n%s", code, p.stdout, p.stderr)
	}
	out, errOut, code = deputy(t, ws, nil, "resume", id)
	if code != 0 || !strings.HasPrefix(out, "resumed "+id+" (now running)") {
		t.Fatalf("resume once paused: exit %d\n%q\n%s", code, out, errOut)
	}
}

// A model with no known price: the cost table says "unpriced", never a
// bare "?", and gives the deputy.yaml line that prices it, once.
func TestUnpricedModelSaysHowToPriceIt(t *testing.T) {
	t.Parallel()
	url, stop := startFakeLLM(t, "--scenario", "demo")
	defer stop()
	ws := t.TempDir()
	out, errOut, code := deputy(t, ws, []string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=any"},
		"run", "--model", "anthropic:fake", "--workspace", ws, "tell me")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	hint := "  anthropic:fake: {input: 0, output: 0, cache_write: 0, cache_read: 0}"
	if strings.Contains(errOut, " ?  ") || strings.Count(errOut, hint) != 1 || strings.Count(errOut, "unpriced") < 5 {
		t.Errorf("cost table:\n%s", errOut)
	}
}
