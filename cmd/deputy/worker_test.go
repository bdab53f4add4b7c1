package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// resumeScenario's root runs one bash call, then answers in words only
// this scenario has: a run finished on the demo or another script cannot
// say them.
const resumeScenario = `name: resume
rules:
  - match: {turn: 1, tools: [bash]}
    tool_calls: [{name: bash, input: {command: "echo step one >> steps.txt; echo ran"}}]
  - match: {turn: 2}
    text: "finished on resume.yaml after {{index .ToolResults 0}}"
`

// A `deputy run --model fake --scenario FILE` killed mid-run (SIGKILL, by
// its failpoint, after its tool call and before its second model call) is
// finished by `deputy worker` on that scenario's answers without being
// told the scenario again; a worker told another one refuses, naming the
// one it needs, and runs nothing. The worker prints the instance's line.
func TestWorkerFinishesAKilledRunOnItsScenario(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for name, body := range map[string]string{"resume.yaml": resumeScenario, "other.yaml": "rules:\n  - text: other\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, errOut, code := deputy(t, ws, []string{"DEPUTY_FAILPOINT=before:turn-2/generate"},
		"run", "--model", "fake", "--scenario", "resume.yaml", "-q", "do the steps"); code != -1 {
		t.Fatalf("the run was not killed by its failpoint: exit %d\n%s", code, errOut)
	}
	if err := os.Remove(filepath.Join(ws, "resume.yaml")); err != nil { // the record is all the worker has
		t.Fatal(err)
	}

	out, errOut, code := deputy(t, ws, nil, "worker", "--until-idle", "-q", "--scenario", "other.yaml")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "was started on scenario resume.yaml, and this runtime plays scenario other.yaml") ||
		!strings.Contains(errOut, "deputy worker --scenario resume.yaml") {
		t.Fatalf("a worker on another scenario: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}

	out, errOut, code = deputy(t, ws, nil, "worker", "--until-idle")
	if code != 0 || !strings.Contains(errOut, "playing scenario resume.yaml, which its runs were started on") {
		t.Fatalf("worker: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f := strings.Fields(lines[0])
	if len(lines) != 1 || len(f) != 5 || f[1] != "root" || f[2] != "completed" || f[3] != "turns=2" || !strings.HasPrefix(f[4], "cost=") {
		t.Fatalf("want one line: ID root completed turns=2 cost=…; got %q", out)
	}
	show, errOut, code := deputy(t, ws, nil, "show", "--json", f[0])
	if code != 0 || !strings.Contains(show, "finished on resume.yaml after ran") {
		t.Fatalf("show %s: exit %d %s\n%s", f[0], code, errOut, show)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "steps.txt")); err != nil || string(b) != "step one\n" {
		t.Fatalf("the bash call ran %q times over (%v): a finished call must not run again", b, err)
	}
}

// A `deputy run --model fake --scenario FILE` stopped by SIGTERM while its
// bash call runs drains (the call finishes, exit 6) and `deputy worker`,
// told no scenario, finishes it on FILE's answers: its second turn's words
// are FILE's, which the demo's are not.
func TestWorkerFinishesASIGTERMedRunOnItsScenario(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"s.yaml": strings.Replace(drainScenario, `"result: `, `"finished on s.yaml: `, 1)})
	p := startProc(t, ws, "run", "--model", "fake", "--scenario", "s.yaml", "--json", "--drain-timeout", "10m", "drain me")
	signalWhileBashRuns(t, p, ws)
	if code := p.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d, want %d (interrupted)\nstderr:\n%s", code, exitInterrupted, p.stderr)
	}
	var res runResult
	if err := json.Unmarshal([]byte(p.stdout.String()), &res); err != nil || res.ID == "" {
		t.Fatalf("--json: %v\n%s", err, p.stdout)
	}
	out, errOut, code := deputy(t, ws, nil, "worker", "--until-idle")
	if code != 0 || !strings.HasPrefix(out, res.ID+" root completed turns=2 cost=") || strings.Count(out, "\n") != 1 {
		t.Fatalf("worker: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	if state, result, _ := showJSON(t, ws, res.ID); state != "completed" || !strings.HasPrefix(result, "finished on s.yaml: ") {
		t.Fatalf("finished %s with %q: not on s.yaml's answers", state, result)
	}
	if got := readFile(t, filepath.Join(ws, "done.txt")); got != "done\n" {
		t.Errorf("done.txt is %q after the worker: the call ran again", got)
	}
}
