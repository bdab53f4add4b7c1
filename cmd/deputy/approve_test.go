package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const pushScenario = `
rules:
  - match: {turn: 1}
    text: "pushing"
    tool_calls: [{name: bash, input: {command: "git push -q origin HEAD:refs/heads/main"}}]
  - match: {turn: 2}
    text: "result: {{index .ToolResults 0}}"
`

// pushRepo makes ws a git repository with one commit whose origin is a
// real bare repository; every push it receives appends a line to the file
// returned (its post-receive hook), so "ran once" is counted by git.
func pushRepo(t *testing.T, ws string) (pushes string) {
	t.Helper()
	remote := filepath.Join(t.TempDir(), "remote.git")
	pushes = filepath.Join(t.TempDir(), "pushes")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(ws, "init", "-q", "--bare", remote)
	hook := filepath.Join(remote, "hooks", "post-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho pushed >> '"+pushes+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	git(ws, "init", "-q")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(ws, "add", "a.txt")
	git(ws, "commit", "-q", "-m", "a")
	git(ws, "remote", "add", "origin", remote)
	return pushes
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// A git push an ask rule of .claude/settings.json holds stops deputy run
// with exit 4 and the call (tool, arguments, rule), nothing pushed; ps
// and show say what waits; deputy approve lets the worker make the push,
// once; deputy deny makes it a tool error the model reads.
func TestApproveAndDenyThroughTheCLI(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		approve bool
		kill    string // the worker's failpoint: SIGKILLed there, a second worker goes on
		report  string
	}{
		{true, "", "result: "},
		// Between the approval and the push: the push runs once, in the
		// worker that takes the run over.
		{true, "before:turn-0/call-1-bash/start", "result: "},
		// After the push, before its result was checkpointed: it is not
		// run again (it may have had effects), so it was made once.
		{true, "during:turn-0/call-1-bash", "interrupted: this call had started"},
		{false, "", "permission denied: the call was denied: not on a Friday"},
	} {
		approve := c.approve
		ws := t.TempDir()
		pushes := pushRepo(t, ws)
		if err := os.MkdirAll(filepath.Join(ws, ".claude"), 0o755); err != nil {
			t.Fatal(err)
		}
		settings := `{"permissions": {"ask": ["Bash(git push:*)"], "allow": ["Bash(git status)"]}}`
		if err := os.WriteFile(filepath.Join(ws, ".claude", "settings.json"), []byte(settings), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "push.yaml"), []byte(pushScenario), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "--scenario", "push.yaml", "-q", "--json", "push it")
		var res struct {
			ID, State string
			Approval  struct {
				InstanceID string `json:"instance_id"`
				Tool, Rule string
				Input      json.RawMessage
			}
		}
		if code != exitWaiting || json.Unmarshal([]byte(out), &res) != nil || res.State != "asking" ||
			res.Approval.Tool != "bash" || res.Approval.Rule != "Bash(git push:*)" || !strings.Contains(string(res.Approval.Input), "git push") {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
		}
		id := res.ID
		if !strings.Contains(errOut, "deputy approve "+id) || countLines(t, pushes) != 0 {
			t.Fatalf("run: %q, %d pushes", errOut, countLines(t, pushes))
		}
		if out, _, _ := deputy(t, ws, nil, "ps"); !strings.Contains(out, "asking (approval)") {
			t.Errorf("ps does not show the approval:\n%s", out)
		}
		if out, _, _ := deputy(t, ws, nil, "show", id); !strings.Contains(out, "approval: bash") {
			t.Errorf("show does not show the approval:\n%s", out)
		}
		args := []string{"deny", id, "--reason", "not on a Friday"}
		if approve {
			args = []string{"approve", id}
		}
		if out, errOut, code := deputy(t, ws, nil, args...); code != 0 || !strings.Contains(out, "bash call") {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		if c.kill != "" {
			_, errOut, code := deputy(t, ws, []string{"DEPUTY_FAILPOINT=" + c.kill}, "worker", "--until-idle", "-q", "--scenario", "push.yaml")
			if code != -1 { // killed by its signal
				t.Fatalf("worker with failpoint %s: exit %d\n%s", c.kill, code, errOut)
			}
		}
		if _, errOut, code := deputy(t, ws, nil, "worker", "--until-idle", "-q", "--scenario", "push.yaml"); code != 0 {
			t.Fatalf("worker: exit %d\n%s", code, errOut)
		}
		out, _, _ = deputy(t, ws, nil, "show", "--json", id)
		var shown struct{ State, Report string }
		if json.Unmarshal([]byte(out), &shown) != nil || shown.State != "completed" {
			t.Fatalf("show after the worker: %s", out)
		}
		want := 0
		if approve {
			want = 1
		}
		if n := countLines(t, pushes); n != want || !strings.Contains(shown.Report, c.report) {
			t.Errorf("approve %v, killed at %q: %d pushes, report %q", approve, c.kill, n, shown.Report)
		}
		args[0] = "approve"
		if _, errOut, code := deputy(t, ws, nil, args[:2]...); code != exitUsage || !strings.Contains(errOut, "waits for approval") {
			t.Errorf("approve again: exit %d %q", code, errOut)
		}
	}
}
