package hook

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// testdata is the absolute path of a script in testdata.
func testdata(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// project makes a project directory with .claude/settings.json holding
// settings, and a Runner over it.
func project(t *testing.T, settings string) *Runner {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, ".claude", "settings.json")
	if err := os.WriteFile(p, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadSettings(filepath.Join(dir, ".claude", "settings.local.json"), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Skipped) > 0 {
		t.Fatalf("skipped: %v", cfg.Skipped)
	}
	return &Runner{Config: cfg, ProjectDir: dir, Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}}
}

// one is settings with one command hook for an event.
func one(event, matcher, command string, extra string) string {
	return `{"hooks": {"` + event + `": [{"matcher": ` + quote(matcher) + `, "hooks": [{"type": "command", "command": ` +
		quote(command) + extra + `}]}]}}`
}

func quote(s string) string {
	b, _ := marshal(s)
	return string(b)
}

func bashCall(cmd string) Input {
	in, _ := marshal(map[string]string{"command": cmd})
	return Input{Event: PreToolUse, SessionID: "s1", Tool: "bash", ToolInput: in, ToolUseID: "toolu_1"}
}

func errorsText(o Outcome) string {
	var s []string
	for _, e := range o.Errors {
		s = append(s, e.Error())
	}
	return strings.Join(s, "\n")
}

var bg = context.Background()

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
