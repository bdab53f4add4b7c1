//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `deputy run` honours the workspace's Claude Code settings hooks: a
// PreToolUse hook denies the model's rm -rf (the command never runs, the
// model reads the reason), and the hook reads the run's JSONL transcript
// under .deputy/transcripts.
func TestRunHonoursSettingsHooks(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "victim"), 0o755); err != nil {
		t.Fatal(err)
	}
	hook := `input=$(cat); path=$(printf '%s' "$input" | sed -n 's/.*"transcript_path":"\([^"]*\)".*/\1/p'); ` +
		`case "$input" in *'rm -rf'*) printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny",` +
		`"permissionDecisionReason":"no rm -rf here (transcript lines: %s)"}}' "$(wc -l < "$path" | tr -d ' ')";; esac`
	cmdline, _ := json.Marshal(hook)
	settings := `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": ` + string(cmdline) + `}]}]}}`
	if err := os.WriteFile(filepath.Join(ws, ".claude", "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := filepath.Join(t.TempDir(), "rm.yaml")
	if err := os.WriteFile(sc, []byte(`
rules:
  - match: {turn: 1}
    tool_calls: [{name: bash, input: {command: "rm -rf victim"}}]
  - match: {turn: 2}
    text: "read: {{index .ToolResults 0}}"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "--scenario", sc, "-q", "clean up")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(ws, "victim")); err != nil {
		t.Fatalf("rm -rf ran: %v", err)
	}
	// The task and the model's call were in the transcript when the hook ran.
	if !strings.Contains(out, "no rm -rf here (transcript lines: 2)") {
		t.Fatalf("answer %q", out)
	}
	files, _ := filepath.Glob(filepath.Join(ws, ".deputy", "transcripts", "*.jsonl"))
	if len(files) != 1 {
		t.Errorf("transcripts %v", files)
	}
}
