package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const askScenario = `
rules:
  - match: {turn: 1}
    text: "I need to know."
    tool_calls: [{name: ask_parent, input: {question: "Which file?"}}]
  - match: {turn: 2}
    text: "using {{index .ToolResults 0}}"
`

// A root's question goes to the person: deputy run stops with exit 4 and
// the question; pause, answer and resume act on it through the database;
// the worker carries the next run; show, tree and logs tell what happened.
func TestAskPauseAnswerResumeThroughTheCLI(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "ask.yaml"), []byte(askScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "--scenario", "ask.yaml", "-q", "--json", "pick a file")
	var res struct{ ID, State, Question string }
	if code != exitWaiting || json.Unmarshal([]byte(out), &res) != nil || res.State != "asking" || res.Question != "Which file?" {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	id := res.ID
	if !strings.Contains(errOut, "deputy answer "+id) {
		t.Errorf("run does not say how to answer: %q", errOut)
	}

	step := func(want string, args ...string) string {
		t.Helper()
		out, errOut, code := deputy(t, ws, nil, args...)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("%v: exit %d\nstdout %q\nstderr %q", args, code, out, errOut)
		}
		return errOut
	}
	out, _, _ = deputy(t, ws, nil, "show", id)
	if !strings.Contains(out, "question (deputy answer "+id+" TEXT)\nWhich file?") {
		t.Errorf("show does not give the question:\n%s", out)
	}
	step("paused "+id+" (now paused)", "pause", id)
	step(id+" is paused already: nothing to do", "pause", id)
	// Answered while paused: the answer waits for the resume.
	step("answered "+id+" (now paused)", "answer", id, "b.txt")
	args := []string{"answer", id, "c.txt"}
	out, errOut, code = deputy(t, ws, nil, args...)
	oneErrorLine(t, args, out, errOut, code, "answered already")
	hint := step("resumed "+id, "resume", id)
	if !strings.Contains(hint, "no worker is running") {
		t.Errorf("resume without a worker gives no hint: %q", hint)
	}
	step("", "worker", "--until-idle", "-q", "--scenario", "ask.yaml")

	out, _, _ = deputy(t, ws, nil, "show", "--json", id)
	var shown struct{ State, Report string }
	if json.Unmarshal([]byte(out), &shown) != nil || shown.State != "completed" || shown.Report != "using b.txt" {
		t.Fatalf("show after the worker: %s", out)
	}
	out, _, _ = deputy(t, ws, nil, "tree", "--json", id)
	var tree struct {
		ID, State string
		Children  []json.RawMessage
		Subtree   struct {
			Usage struct {
				InputTokens int `json:"input_tokens"`
			}
		}
	}
	if json.Unmarshal([]byte(out), &tree) != nil || tree.ID != id || tree.State != "completed" || len(tree.Children) != 0 ||
		tree.Subtree.Usage.InputTokens <= 0 {
		t.Fatalf("tree: %s", out)
	}
	out, _, _ = deputy(t, ws, nil, "logs", "-f", id)
	if !strings.Contains(out, "call ask_parent") || !strings.Contains(out, "result b.txt") || !strings.Contains(out, "using b.txt") {
		t.Fatalf("logs: %s", out)
	}

	// Bad input: one line, exit 2, nothing changed.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", id}, "is completed, so it cannot be paused"},
		{[]string{"resume", id}, "cannot be resumed"},
		{[]string{"answer", id, "again"}, "no open question"},
		{[]string{"cancel", "i-nosuch"}, "no instance"},
		{[]string{"send", id, " "}, "empty"},
	} {
		out, errOut, code := deputy(t, ws, nil, c.args...)
		oneErrorLine(t, c.args, out, errOut, code, c.want)
	}
}

// A subagent is its parent's to talk to: send and answer refuse it
// without --as-parent.
func TestChildNeedsAsParent(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if _, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "-q", "count files"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	out, _, _ := deputy(t, ws, nil, "ps", "--all", "--json")
	var list []struct{ ID, Parent string }
	if json.Unmarshal([]byte(out), &list) != nil {
		t.Fatal(out)
	}
	child := ""
	for _, in := range list {
		if in.Parent != "" {
			child = in.ID
		}
	}
	for _, args := range [][]string{{"send", child, "hi"}, {"answer", child, "yes"}} {
		out, errOut, code := deputy(t, ws, nil, args...)
		oneErrorLine(t, args, out, errOut, code, "is a subagent of", "--as-parent")
	}
	args := []string{"send", "--as-parent", child, "hi"}
	out, errOut, code := deputy(t, ws, nil, args...)
	oneErrorLine(t, args, out, errOut, code, "is completed")
}
