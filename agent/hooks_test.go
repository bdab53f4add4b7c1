//go:build unix

package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/hook"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/permission"
)

// Claude Code hooks wired into real runs: the root and its children run
// against the fake server over HTTP, with real hook scripts
// (testdata/hooks) read from a settings file as Claude Code's.

// script is the absolute path of a test hook script, with its arguments.
func script(t *testing.T, name string, args ...string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "hooks", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(append([]string{p}, args...), " ")
}

// withHooks gives e's runner the hooks of a settings file's text.
func (e *env) withHooks(settings string) *agent.Hooks {
	e.t.Helper()
	cfg, err := hook.ParseSettings(filepath.Join(e.ws, ".claude", "settings.json"), []byte(settings))
	if err != nil {
		e.t.Fatal(err)
	}
	if len(cfg.Skipped) > 0 {
		e.t.Fatalf("settings: %v", cfg.Skipped)
	}
	h := &agent.Hooks{Settings: cfg, Runner: hook.Runner{ProjectDir: e.ws}, TranscriptDir: filepath.Join(e.t.TempDir(), "transcripts")}
	e.runner.Hooks = h
	return h
}

// hookReports are the EventHook events of the run so far.
func (e *env) hookReports() []*agent.HookReport {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*agent.HookReport
	for _, ev := range e.events {
		if ev.Kind == agent.EventHook {
			out = append(out, ev.Hook)
		}
	}
	return out
}

// lastRequest is the last request the fake server answered.
func (e *env) lastRequest() *llm.Request {
	e.t.Helper()
	reqs := e.srv.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Request != nil {
			return reqs[i].Request
		}
	}
	e.t.Fatal("no request")
	return nil
}

func settingsOf(event, matcher string, commands ...string) string {
	var hs []string
	for _, c := range commands {
		hs = append(hs, fmt.Sprintf(`{"type": "command", "command": %q}`, c))
	}
	return fmt.Sprintf(`{"hooks": {%q: [{"matcher": %q, "hooks": [%s]}]}}`, event, matcher, strings.Join(hs, ", "))
}

func anthropicWire() wire { return wires()[0] }

func TestHookPreToolUseDeniesRmRf(t *testing.T) {
	t.Parallel()
	e := newEnv(t, anthropicWire(), `
rules:
  - match: {turn: 1}
    tool_calls: [{name: bash, input: {command: "rm -rf victim"}}]
  - match: {turn: 2}
    text: "I read: {{index .ToolResults 0}}"
`)
	if err := os.Mkdir(filepath.Join(e.ws, "victim"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.withHooks(settingsOf("PreToolUse", "Bash", script(t, "deny-rm.sh")))
	o, err := e.run(e.task("clean up"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "victim")); err != nil {
		t.Fatalf("the command ran: %v", err)
	}
	res := resultsOfTurn(t, o, 1)
	if !res[0].IsError || !strings.Contains(res[0].Text, "Destructive command blocked by policy: rm -rf") {
		t.Fatalf("result %+v", res[0])
	}
	// The model read the reason: its next request carried it.
	last := e.lastRequest().Messages
	if got := toolResults(last[len(last)-1]); len(got) != 1 || !strings.Contains(got[0].Text, "blocked by policy") {
		t.Fatalf("the model's second request: %+v", last[len(last)-1])
	}
	if !strings.Contains(o.Result.Answer, "blocked by policy") {
		t.Errorf("answer %q", o.Result.Answer)
	}
}

func TestHookPreToolUseRewritesInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, anthropicWire(), `
rules:
  - match: {turn: 1}
    tool_calls: [{name: bash, input: {command: "echo original > out.txt"}}]
  - match: {turn: 2}
    text: "done"
`)
	e.withHooks(settingsOf("PreToolUse", "Bash", script(t, "rewrite.sh")))
	o, err := e.run(e.task("write it"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(e.ws, "out.txt"))
	if err != nil || string(b) != "rewritten\n" {
		t.Fatalf("out.txt = %q, %v; want the rewritten command's output", b, err)
	}
	// The transcript keeps what the model sent.
	if calls := o.Result.Messages[1].ToolUses(); len(calls) != 1 || !strings.Contains(string(calls[0].Input), "echo original") {
		t.Errorf("transcript call %+v", calls)
	}
}

func TestHookPostToolUseBlocksWithFeedback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, anthropicWire(), `
rules:
  - match: {turn: 1}
    tool_calls: [{name: bash, input: {command: "echo 'FAIL: TestStore'"}}]
  - match: {turn: 2, tool_result: "fix them"}
    text: "I will fix the store."
  - match: {turn: 2}
    text: "no feedback seen"
`)
	e.withHooks(settingsOf("PostToolUse", "Bash", script(t, "post-block.sh")))
	o, err := e.run(e.task("run the tests"))
	if err != nil {
		t.Fatal(err)
	}
	last := e.lastRequest().Messages
	got := toolResults(last[len(last)-1])
	if len(got) != 1 || !strings.Contains(got[0].Text, "FAIL: TestStore") ||
		!strings.Contains(got[0].Text, "PostToolUse hook feedback: The tests failed: fix them before going on.") ||
		!strings.Contains(got[0].Text, "failing package: ./store") {
		t.Fatalf("the model's second request's result: %+v", got)
	}
	if o.Result.Answer != "I will fix the store." {
		t.Errorf("answer %q", o.Result.Answer)
	}
}

func TestHookSubagentStopSendsTheChildBackOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, anthropicWire(), `
rules:
  - match: {system: "read-only explorer", last_user: "Check your report"}
    text: "Conclusion: checked twice."
  - match: {system: "read-only explorer", last_user: "House style: be brief"}
    text: "Conclusion: first look."
  - match: {system: "read-only explorer"}
    text: "Conclusion: no SubagentStart context."
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: explorer, task: "look around"}}]
  - match: {turn: 2}
    text: "root got: {{index .ToolResults 0}}"
`)
	log := filepath.Join(t.TempDir(), "stops.log")
	start := `printf '{"hookSpecificOutput":{"hookEventName":"SubagentStart","additionalContext":"House style: be brief."}}'`
	e.withHooks(`{"hooks": {
	  "SubagentStart": [{"matcher": "explorer", "hooks": [{"type": "command", "command": ` + fmt.Sprintf("%q", start) + `}]}],
	  "SubagentStop": [{"matcher": "explorer", "hooks": [{"type": "command", "command": ` +
		fmt.Sprintf("%q", script(t, "stop-once.sh", log, "json")) + `}]}]}}`)
	o, err := e.run(e.task("delegate"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(o.Result.Answer, "checked twice") {
		t.Fatalf("answer %q", o.Result.Answer)
	}
	b, _ := os.ReadFile(log)
	// The child's transcript had its task and first answer when the hook
	// first ran, and the note and its second answer the second time.
	if want := "SubagentStop active=false lines=2\nSubagentStop active=true lines=4\n"; string(b) != want {
		t.Fatalf("the hook's runs:\n%s\nwant\n%s", b, want)
	}
	kid := children(o)[0]
	tr, _ := o.Transcript(kid.ID)
	if len(tr) != 4 || !strings.Contains(tr[2].Text(), "Check your report against the task") {
		t.Errorf("child transcript %+v", tr)
	}
}

func TestHookStopGuardedByStopHookActive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, anthropicWire(), `
rules:
  - match: {last_user: "CHANGELOG.md is not updated"}
    text: "second answer"
  - match: {turn: 1}
    text: "first answer"
`)
	log := filepath.Join(t.TempDir(), "stops.log")
	e.withHooks(settingsOf("Stop", "", script(t, "stop-once.sh", log)))
	o, err := e.run(e.task("finish"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Result.StopReason != loop.StopCompleted || o.Result.Answer != "second answer" || o.Result.Turns != 2 {
		t.Fatalf("stop %s after %d turns, answer %q", o.Result.StopReason, o.Result.Turns, o.Result.Answer)
	}
	b, _ := os.ReadFile(log)
	if want := "Stop active=false lines=2\nStop active=true lines=4\n"; string(b) != want {
		t.Fatalf("the hook's runs:\n%s\nwant\n%s", b, want)
	}
}

func TestHookTimeoutIsAnEventAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, anthropicWire(), `
rules:
  - match: {turn: 1}
    tool_calls: [{name: bash, input: {command: "echo ran > ran.txt"}}]
  - match: {turn: 2}
    text: "done"
`)
	h := e.withHooks(`{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": ` +
		fmt.Sprintf("%q", script(t, "hang.sh")) + `, "timeout": 5}]}]}}`)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h.Runner.Clock = clk
	wait := e.start(e.task("go"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clk.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second)
	o, err := wait()
	if err != nil || o.Result.StopReason != loop.StopCompleted {
		t.Fatalf("run: %v %+v", err, o)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "ran.txt")); err != nil {
		t.Errorf("a timed-out PreToolUse hook is no verdict: the call should have run: %v", err)
	}
	reps := e.hookReports()
	if len(reps) != 1 || len(reps[0].Outcome.Errors) != 1 || !strings.Contains(reps[0].Outcome.Errors[0].Error(), "timed out") {
		t.Fatalf("hook reports %+v", reps)
	}
	// What the person reads never reached the model.
	for _, r := range e.srv.Requests() {
		if r.Request != nil && strings.Contains(fmt.Sprint(r.Request.Messages), "timed out") {
			t.Errorf("the hook's error reached the model")
		}
	}
}

func TestHookInvalidJSONIsAnEventAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, anthropicWire(), `
rules:
  - match: {turn: 1}
    tool_calls: [{name: bash, input: {command: "echo ran > ran.txt"}}]
  - match: {turn: 2}
    text: "done"
`)
	e.withHooks(settingsOf("PreToolUse", "*", script(t, "bad-json.sh")))
	o, err := e.run(e.task("go"))
	if err != nil || o.Result.StopReason != loop.StopCompleted {
		t.Fatalf("run: %v %+v", err, o)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "ran.txt")); err != nil {
		t.Errorf("JSON that does not parse is no deny: the call should have run: %v", err)
	}
	reps := e.hookReports()
	if len(reps) != 1 || reps[0].Event != hook.PreToolUse || reps[0].Tool != "bash" || len(reps[0].Outcome.Errors) == 0 ||
		!strings.Contains(fmt.Sprint(reps[0].Outcome.Errors), "JSON") {
		t.Fatalf("hook reports %+v", reps)
	}
}

func TestHookUserPromptSubmitBlockDropsThePrompt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, anthropicWire(), `
rules:
  - match: {last_user: "Project context"}
    text: "saw the context"
  - match: {turn: 1}
    text: "no context"
`)
	block := `case "$(cat)" in *secret*) echo "Prompts about secrets are not allowed." >&2; exit 2;; esac; echo "Project context: a Go module."`
	e.withHooks(settingsOf("UserPromptSubmit", "", block))
	o, err := e.run(e.task("say the secret"))
	if err != nil || o.Result.StopReason != loop.StopHalted || len(e.srv.Requests()) != 0 {
		t.Fatalf("blocked prompt: %v, stop %s, %d requests", err, o.Result.StopReason, len(e.srv.Requests()))
	}
	o, err = e.run(e.task("describe it"))
	if err != nil || o.Result.Answer != "saw the context" {
		t.Fatalf("a prompt with context: %v, answer %q", err, o.Result.Answer)
	}
}

// A PreToolUse hook's allow skips the mode's prompt only: the permission
// policy's ask and deny rules still hold, in that order after the hook.
func TestHookAllowComposesWithThePermissionPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, anthropicWire(), `
rules:
  - match: {turn: 1}
    tool_calls:
      - {name: bash, input: {command: "echo ok > allowed.txt"}}
      - {name: bash, input: {command: "git push origin main"}}
      - {name: bash, input: {command: "curl -s http://127.0.0.1:1/ > curled.txt"}}
  - match: {turn: 2}
    text: "done"
`)
	allow := `cat > /dev/null; printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"the team hook allows bash"}}'`
	e.withHooks(settingsOf("PreToolUse", "Bash", allow))
	ask, _ := permission.ParseRule("Bash(git push:*)")
	deny, _ := permission.ParseRule("Bash(curl:*)")
	approver := &refuser{}
	e.runner.Approver = approver
	e.runner.Permissions = &agent.Permissions{Policy: permission.Policy{Mode: permission.ModeDefault,
		Set: permission.NewSet(nil, []permission.Rule{ask}, []permission.Rule{deny})}, ProjectDir: e.ws}
	o, err := e.run(e.task("ship it"))
	if err != nil {
		t.Fatal(err)
	}
	res := resultsOfTurn(t, o, 1)
	if _, err := os.Stat(filepath.Join(e.ws, "allowed.txt")); err != nil || res[0].IsError {
		t.Errorf("the hook's allow should skip default mode's prompt: %v %+v", err, res[0])
	}
	if len(approver.asked) != 1 || !strings.Contains(string(approver.asked[0].Input), "git push") {
		t.Errorf("approvals asked: %+v; want git push's alone (its ask rule holds whatever the hook said)", approver.asked)
	}
	if !res[1].IsError || !strings.Contains(res[1].Text, "asked") {
		t.Errorf("git push: %+v", res[1])
	}
	if _, err := os.Stat(filepath.Join(e.ws, "curled.txt")); err == nil || !res[2].IsError || !strings.Contains(res[2].Text, "Bash(curl:*)") {
		t.Errorf("curl should be denied by its rule: %+v", res[2])
	}
}

// A child's own definition's hooks front matter runs for its calls, on top
// of the settings'; its parent's calls do not see them.
func TestHookDefinitionFrontMatter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, anthropicWire(), `
rules:
  - match: {system: "You are the cleaner"}
    tool_calls: [{name: bash, input: {command: "rm -rf victim"}}]
    times: 1
  - match: {system: "You are the cleaner"}
    text: "Conclusion: {{index .ToolResults 0}}"
  - match: {turn: 1}
    tool_calls:
      - {name: bash, input: {command: "rm -rf other"}}
      - {name: spawn_subagent, input: {subagent_type: cleaner, task: "clean"}}
  - match: {turn: 2}
    text: "done"
`)
	for _, d := range []string{"victim", "other"} {
		if err := os.Mkdir(filepath.Join(e.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	md := "---\nname: cleaner\ndescription: cleans\ntools: [bash]\nhooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n" +
		"        - type: command\n          command: " + script(t, "deny-rm.sh") + "\n---\nYou are the cleaner.\n"
	p := agentdef.ParseDefinition(filepath.Join(e.ws, ".deputy", "agents", "cleaner.md"), []byte(md))
	if p.Def == nil || p.Def.Hooks == nil {
		t.Fatalf("definition: %+v", p)
	}
	def := p.Def
	e.runner.Hooks = &agent.Hooks{Runner: hook.Runner{ProjectDir: e.ws}}
	task := e.task("clean")
	task.Volatile = []*agentdef.Definition{def}
	o, err := e.run(task)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Instances) != 2 || !strings.Contains(children(o)[0].Report, "blocked by policy: rm -rf") {
		t.Fatalf("instances %+v", o.Instances)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "victim")); err != nil {
		t.Errorf("the child's own hook should have denied its rm -rf: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "other")); err == nil {
		t.Errorf("the root's rm -rf ran under its child's hook")
	}
}
