//go:build unix

package durable_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/hook"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
)

// stopOnce is a Stop hook guarded by stop_hook_active, as Claude Code's
// reference writes one: it sends the agent back once (exit 2, the reason
// on stderr) and logs every run to $1, so a test counts them.
const stopOnce = `#!/bin/sh
input=$(cat)
case "$input" in
*'"stop_hook_active":true'*) echo "Stop active=true" >> "$1"; exit 0 ;;
esac
echo "Stop active=false" >> "$1"
echo "Not done yet: CHANGELOG.md is not updated." >&2
exit 2
`

const hookCrashScenario = `
rules:
  - match: {last_user: "CHANGELOG.md is not updated"}
    text: "second answer"
  - match: {last_user: "^call$"}
    tool_calls: [{name: bash, input: {command: "echo ran >> count.txt"}}]
  - match: {turn: 2, tool_result: ".*"}
    text: "called"
  - match: {turn: 1}
    text: "first answer"
`

// hookCrashEngine opens an engine on dir's database whose roots run the
// Stop hook of dir's settings.
func hookCrashEngine(t *testing.T, dir, failpoint string) (*durable.Engine, *store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "deputy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := fake.ParseScenario([]byte(hookCrashScenario), "hookcrash.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := hook.LoadSettings(filepath.Join(dir, "settings.json"))
	if err != nil || len(cfg.Skipped) > 0 {
		t.Fatalf("settings: %v %v", err, cfg.Skipped)
	}
	model := fake.NewModel(s, fake.WithoutLatency())
	e, err := durable.Open(ctx, durable.Options{
		Store:     st,
		Failpoint: failpoint,
		Models:    func(string) (llm.Model, string, error) { return model, "fake", nil },
		Tools: func(sp durable.Spec) (*tool.Set, error) {
			ts, err := builtin.Tools(builtin.Config{Workspace: sp.Workspace})
			if err != nil {
				return nil, err
			}
			return tool.NewSet(ts...)
		},
		Runner: agent.Runner{Hooks: &agent.Hooks{Settings: cfg, Runner: hook.Runner{ProjectDir: dir},
			TranscriptDir: filepath.Join(dir, "transcripts")}},
	})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return e, st
}

// TestHookCrashChild is the process TestStopHookDecisionIsReplayed kills:
// it starts the run, writes its id, and dies at its failpoint.
func TestHookCrashChild(t *testing.T) {
	dir := os.Getenv("DEPUTY_HOOK_CRASH_DIR")
	if dir == "" {
		t.Skip("the child process of TestStopHookDecisionIsReplayed")
	}
	e, _ := hookCrashEngine(t, dir, os.Getenv("DEPUTY_HOOK_CRASH_FAILPOINT"))
	ctx := context.Background()
	id, err := e.Start(ctx, os.Getenv("DEPUTY_HOOK_CRASH_TASK"), durable.Spec{System: "root", Model: "fake", Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "id"), []byte(id), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = e.Wait(ctx, id)
	t.Fatalf("the run ended (%v) instead of dying at its failpoint", err)
}

// TestStopHookDecisionIsReplayed: a process killed right after a Stop
// hook's decision was recorded (the step turn-2/hook-Stop) resumes without
// running the hook again: the recorded block sends the agent back, and the
// hook runs once more only for the second stop (stop_hook_active true). A
// replay that ran it again would log a second active=false run.
func TestStopHookDecisionIsReplayed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "stops.log")
	sh := filepath.Join(dir, "stop-once.sh")
	if err := os.WriteFile(sh, []byte(stopOnce), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "` + sh + " " + log + `"}]}]}}`
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	crashAt(t, dir, "finish", "after:turn-2/hook-Stop")
	if b, _ := os.ReadFile(log); string(b) != "Stop active=false\n" {
		t.Fatalf("before the crash the hook logged %q", b)
	}
	id, err := os.ReadFile(filepath.Join(dir, "id"))
	if err != nil {
		t.Fatal(err)
	}

	e, st := hookCrashEngine(t, dir, "") // recovers the run
	t.Cleanup(func() { e.Close(5 * time.Second); st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, err := e.Wait(ctx, string(id))
	if err != nil || in.State != instance.Completed || in.Report != "second answer" || in.Turns != 2 {
		t.Fatalf("resumed run: %+v %v", in, err)
	}
	if b, _ := os.ReadFile(log); string(b) != "Stop active=false\nStop active=true\n" {
		t.Fatalf("the hook's runs:\n%s\nwant one before the crash and one for the second stop", b)
	}
	msgs, err := st.Transcript(ctx, string(id))
	if err != nil || len(msgs) != 4 || !strings.Contains(msgs[2].Text(), "CHANGELOG.md is not updated") {
		t.Fatalf("transcript %+v %v", msgs, err)
	}
	// The JSONL transcript hooks read was continued, not written twice.
	tb, err := os.ReadFile(filepath.Join(dir, "transcripts", string(id)+".jsonl"))
	if err != nil || strings.Count(string(tb), "\n") != 4 {
		t.Errorf("JSONL transcript: %v\n%s", err, tb)
	}
}

// crashAt runs task in a child process over dir's database, which dies
// at failpoint.
func crashAt(t *testing.T, dir, task, failpoint string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHookCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DEPUTY_HOOK_CRASH_DIR="+dir, "DEPUTY_HOOK_CRASH_FAILPOINT="+failpoint,
		"DEPUTY_HOOK_CRASH_TASK="+task)
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child did not die at its failpoint: %v\n%s", err, out)
	}
}

// TestPreToolUseHookIsNotRunAgainForACheckpointedCall: PreToolUse runs in
// the gate, inside the tool call's own step, so a process killed after the
// call's result was checkpointed replays the result on recovery and runs
// neither the call nor its hook again.
func TestPreToolUseHookIsNotRunAgainForACheckpointedCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "pre.log")
	cmdline := "cat > /dev/null; echo pre >> " + log
	settings := `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "` + cmdline + `"}]}]}}`
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	crashAt(t, dir, "call", "after:turn-1/call-1-bash")
	id, err := os.ReadFile(filepath.Join(dir, "id"))
	if err != nil {
		t.Fatal(err)
	}
	e, st := hookCrashEngine(t, dir, "")
	t.Cleanup(func() { e.Close(5 * time.Second); st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, err := e.Wait(ctx, string(id))
	if err != nil || in.State != instance.Completed || in.Report != "called" {
		t.Fatalf("resumed run: %+v %v", in, err)
	}
	pre, _ := os.ReadFile(log)
	count, _ := os.ReadFile(filepath.Join(dir, "count.txt"))
	if string(pre) != "pre\n" || string(count) != "ran\n" {
		t.Fatalf("the hook logged %q and the call wrote %q; want each once", pre, count)
	}
}
