package main

import (
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The drain tests stop real processes on SQLite with SIGTERM while a bash
// call runs. The call waits for a file the test writes once the process
// has said it is stopping, so the signal lands while the call runs however
// slow the machine: nothing here depends on a sleep being long enough.

// drainScenario: the root's one bash call says it started, waits for
// go.txt, and appends to done.txt; the root then answers with its result.
const drainScenario = `
rules:
  - match: {turn: 1}
    tool_calls: [{name: bash, input: {command: "echo started > started.txt; while [ ! -e go.txt ]; do sleep 0.05; done; echo done >> done.txt"}}]
  - match: {turn: 2}
    text: "result: {{index .ToolResults 0}}"
`

// drainKids: the root spawns two writers (they take turns), each running
// a bash call like the root's above.
const drainKids = `
rules:
  - match: {turn: 1, last_user: "^part"}
    tool_calls: [{name: bash, input: {command: "echo started > started.txt; while [ ! -e go.txt ]; do sleep 0.05; done; echo child >> done.txt"}}]
  - match: {last_user: "^part"}
    text: "child: {{index .ToolResults 0}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, repeat: 2, input: {subagent_type: general-purpose, task: "part {{.I}}"}}]
  - match: {turn: 2}
    text: "both done"
`

// proc is a deputy process the test signals.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{}
	code           int
}

func startProc(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEPUTY_FAKE_LATENCY=off"}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -2
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// eventDeadline is how long a test waits for something that should
// happen in a moment: generous, for a loaded CI machine.
const eventDeadline = 2 * time.Minute

// waitFor polls cond until it holds; the process ending first, or the
// deadline, fails the test with its output.
func (p *proc) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventDeadline)
	for !cond() {
		select {
		case <-p.done:
			if cond() {
				return
			}
			t.Fatalf("the process exited %d before %s\nstderr:\n%s", p.code, what, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s\nstderr:\n%s", what, eventDeadline, p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(eventDeadline):
		t.Fatalf("the process has not exited within %s\nstderr:\n%s", eventDeadline, p.stderr)
		return 0
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// signalWhileBashRuns waits for p's bash call to start, signals p, waits
// until p says it is stopping, then lets the call finish.
func signalWhileBashRuns(t *testing.T, p *proc, ws string) {
	t.Helper()
	p.waitFor(t, "bash call starting", func() bool { return exists(filepath.Join(ws, "started.txt")) })
	p.signal(t, syscall.SIGTERM)
	p.waitFor(t, "stopping line", func() bool { return strings.Contains(p.stderr.String(), "deputy: stopping:") })
	if exists(filepath.Join(ws, "done.txt")) {
		t.Fatal("the call finished before the signal: the test proves nothing")
	}
	writeFiles(t, ws, map[string]string{"go.txt": ""})
}

// checkpoint is the recorded outcome of step name of instance id's run
// (DBOS's record in the same SQLite file), "" if none is recorded.
func checkpoint(t *testing.T, ws, id, name string) string {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(ws, ".deputy", "deputy.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out sql.NullString
	err = db.QueryRow(`SELECT output FROM operation_outputs WHERE workflow_uuid = ? AND function_name = ?`,
		"deputy-"+id, name).Scan(&out)
	if errors.Is(err, sql.ErrNoRows) {
		return ""
	} else if err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(out.String)
	if err != nil {
		return out.String
	}
	return string(b)
}

// showJSON is `deputy show ID --json`, decoded.
func showJSON(t *testing.T, ws, id string) (state, result, transcript string) {
	t.Helper()
	out, errOut, code := deputy(t, ws, nil, "show", id, "--json")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	return str(t, m["state"]), str(t, m["report"]), string(m["transcript"])
}

// SIGTERM to `deputy run` on SQLite drains: the bash call that runs
// finishes and its result is recorded, nothing new starts, the run exits 6
// (interrupted, resumable) saying so, and a worker resumes the run to its
// end without running the call again.
func TestSIGTERMDrainsRunOnSQLite(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"s.yaml": drainScenario})
	p := startProc(t, ws, "run", "--model", "fake", "--scenario", "s.yaml", "--json", "--drain-timeout", "10m", "drain me")
	signalWhileBashRuns(t, p, ws)
	if code := p.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d, want %d (interrupted)\nstderr:\n%s", code, exitInterrupted, p.stderr)
	}
	errOut := p.stderr.String()
	if !strings.Contains(errOut, "interrupted, resumable") || !strings.Contains(errOut, "deputy worker resumes it") {
		t.Errorf("stderr does not say the run is interrupted and how to resume it:\n%s", errOut)
	}
	if strings.Contains(errOut, "cut off") {
		t.Errorf("the drain cut a step off:\n%s", errOut)
	}
	if got := readFile(t, filepath.Join(ws, "done.txt")); got != "done\n" {
		t.Fatalf("done.txt is %q: the call did not finish in the drain", got)
	}
	var res runResult
	if err := json.Unmarshal([]byte(p.stdout.String()), &res); err != nil || res.ID == "" || res.State != "interrupted" {
		t.Fatalf("--json: %v\n%s", err, p.stdout)
	}
	// The call's end is recorded (its outcome checkpointed), with its
	// real result; the transcript gets it when the run resumes, as after
	// any stop (the run appends nothing once its engine shuts down).
	if state, _, _ := showJSON(t, ws, res.ID); state != "running" {
		t.Fatalf("after the drain the root is %s, want running", state)
	}
	if out := checkpoint(t, ws, res.ID, "turn-1/call-1-bash"); !strings.Contains(out, "exit code: 0") {
		t.Fatalf("the call's recorded outcome is %q", out)
	}

	if _, errOut, code := deputy(t, ws, nil, "worker", "--until-idle", "-q", "--scenario", "s.yaml"); code != 0 {
		t.Fatalf("worker: exit %d\n%s", code, errOut)
	}
	if got := readFile(t, filepath.Join(ws, "done.txt")); got != "done\n" {
		t.Errorf("done.txt is %q after the worker: the call ran again", got)
	}
	state, result, transcript := showJSON(t, ws, res.ID)
	if state != "completed" || !strings.HasPrefix(result, "result: ") || !strings.Contains(transcript, "exit code: 0") ||
		strings.Contains(transcript, "interrupted") {
		t.Errorf("after the worker: state %s, result %q\ntranscript %s", state, result, transcript)
	}
}

// SIGTERM to `deputy worker` on SQLite drains it the same way; it exits 0
// (a signal is how a worker is stopped) and the next worker finishes the
// run without running the call again.
func TestSIGTERMDrainsWorkerOnSQLite(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"s.yaml": drainScenario})
	out, errOut, code := deputy(t, ws, nil, "run", "--detach", "--model", "fake", "--scenario", "s.yaml", "drain me")
	if code != 0 {
		t.Fatalf("run --detach: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	p := startProc(t, ws, "worker", "--scenario", "s.yaml", "--drain-timeout", "10m")
	signalWhileBashRuns(t, p, ws)
	if code := p.wait(t); code != 0 {
		t.Fatalf("worker: exit %d, want 0\nstderr:\n%s", code, p.stderr)
	}
	if got := readFile(t, filepath.Join(ws, "done.txt")); got != "done\n" {
		t.Fatalf("done.txt is %q: the call did not finish in the drain\nstderr:\n%s", got, p.stderr)
	}
	if out := checkpoint(t, ws, id, "turn-1/call-1-bash"); !strings.Contains(out, "exit code: 0") {
		t.Fatalf("the call's recorded outcome is %q", out)
	}
	if _, errOut, code := deputy(t, ws, nil, "worker", "--until-idle", "-q", "--scenario", "s.yaml"); code != 0 {
		t.Fatalf("second worker: exit %d\n%s", code, errOut)
	}
	if got := readFile(t, filepath.Join(ws, "done.txt")); got != "done\n" {
		t.Errorf("done.txt is %q after the second worker: the call ran again", got)
	}
	if state, result, transcript := showJSON(t, ws, id); state != "completed" || !strings.Contains(transcript, "exit code: 0") ||
		strings.Contains(transcript, "interrupted") {
		t.Errorf("after the second worker: state %s, result %q\ntranscript %s", state, result, transcript)
	}
}

// A second signal stops at once: the drain is cut short, the running call
// is cut off (its process group killed, so it never writes), the run still
// exits 6, and the worker reports the call interrupted rather than run it
// again.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"s.yaml": drainScenario})
	p := startProc(t, ws, "run", "--model", "fake", "--scenario", "s.yaml", "--json", "--drain-timeout", "10m", "drain me")
	p.waitFor(t, "bash call starting", func() bool { return exists(filepath.Join(ws, "started.txt")) })
	p.signal(t, syscall.SIGTERM)
	p.waitFor(t, "stopping line", func() bool { return strings.Contains(p.stderr.String(), "deputy: stopping:") })
	p.signal(t, syscall.SIGINT)
	// The call never finishes on its own (no go.txt): only the second
	// signal can end the 10-minute drain within the deadline.
	if code := p.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitInterrupted, p.stderr)
	}
	if errOut := p.stderr.String(); !strings.Contains(errOut, "stopping at once") || !strings.Contains(errOut, "cut off") {
		t.Errorf("stderr:\n%s", errOut)
	}
	var res runResult
	if err := json.Unmarshal([]byte(p.stdout.String()), &res); err != nil || res.State != "interrupted" {
		t.Fatalf("--json: %v\n%s", err, p.stdout)
	}
	// Were the call still alive, it would write now.
	writeFiles(t, ws, map[string]string{"go.txt": ""})
	if _, errOut, code := deputy(t, ws, nil, "worker", "--until-idle", "-q", "--scenario", "s.yaml"); code != 0 {
		t.Fatalf("worker: exit %d\n%s", code, errOut)
	}
	state, result, _ := showJSON(t, ws, res.ID)
	if state != "completed" || !strings.Contains(result, "interrupted: this call had started") {
		t.Errorf("after the worker: state %s, result %q", state, result)
	}
	if exists(filepath.Join(ws, "done.txt")) {
		t.Errorf("the cut-off call wrote done.txt, or ran again")
	}
}

// Children stopped with the process are reported as what they are,
// interrupted and resumable, not "failed in 0 turns" or "cancelled in 0
// turns"; the run exits 6 naming the command that resumes it, and the
// worker finishes both children, each one's call run once.
func TestInterruptedChildrenAreReportedResumable(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"s.yaml": drainKids})
	p := startProc(t, ws, "run", "--model", "fake", "--scenario", "s.yaml", "--drain-timeout", "10m", "two parts")
	signalWhileBashRuns(t, p, ws)
	if code := p.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitInterrupted, p.stderr)
	}
	errOut := p.stderr.String()
	for _, lie := range []string{"failed in", "cancelled in"} {
		if strings.Contains(errOut, lie) {
			t.Errorf("stderr says %q of a child that has not ended:\n%s", lie, errOut)
		}
	}
	// The root spawns its two children one step after the other, and the
	// signal comes once the first child's call has started: the second
	// may or may not be recorded (and its call started) by then.
	if !strings.Contains(errOut, "general-purpose i-") || !strings.Contains(errOut, "interrupted, resumable (saved") ||
		!regexp.MustCompile(`with (1 subagent|2 subagents) at work`).MatchString(errOut) ||
		!strings.Contains(errOut, "deputy worker resumes it") {
		t.Errorf("stderr does not say the children are interrupted and resumable:\n%s", errOut)
	}
	if got := readFile(t, filepath.Join(ws, "done.txt")); got != "child\n" && got != "child\nchild\n" {
		t.Fatalf("done.txt is %q: the calls that had started did not finish in the drain", got)
	}
	if _, errOut, code := deputy(t, ws, nil, "worker", "--until-idle", "-q", "--scenario", "s.yaml"); code != 0 {
		t.Fatalf("worker: exit %d\n%s", code, errOut)
	}
	if got := readFile(t, filepath.Join(ws, "done.txt")); got != "child\nchild\n" {
		t.Errorf("done.txt is %q after the worker, want one line per child", got)
	}
	out, _, code := deputy(t, ws, nil, "ps", "--all", "--json")
	var all []map[string]json.RawMessage
	if code != 0 || json.Unmarshal([]byte(out), &all) != nil || len(all) != 3 {
		t.Fatalf("ps --all --json: exit %d\n%s", code, out)
	}
	for _, in := range all {
		if str(t, in["state"]) != "completed" {
			t.Errorf("after the worker: %s %s", str(t, in["id"]), str(t, in["state"]))
		}
	}
}
