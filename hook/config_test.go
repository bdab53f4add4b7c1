package hook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/permission"
)

func TestLoadSettingsSkipsWithFileLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := `{
  "permissions": {"allow": ["Bash(ls:*)"]},
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {"type": "command", "command": "check.sh", "timeout": 30},
          {"type": "prompt", "prompt": "is this safe?"},
          {"type": "command", "command": "slow.sh", "timeout": -1}
        ]
      },
      {"matcher": "Edit(", "hooks": [{"type": "command", "command": "x"}]},
      {"matcher": "Write", "hooks": [{"type": "http", "url": "ftp://example.com/h"}]}
    ],
    "PermissionRequest": [],
    "Stop": [{"hooks": [{"type": "command"}]}],
    "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}]
  }
}`
	p := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadSettings(filepath.Join(dir, "missing.json"), p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		p + ":9: hooks.PreToolUse[0].hooks[1].type: hook type \"prompt\" is not one deputy runs",
		p + ":10: hooks.PreToolUse[0].hooks[2].timeout: must be a positive number of seconds",
		p + ":13: hooks.PreToolUse[1].matcher: matcher \"Edit(\" is not a regular expression",
		p + ":14: hooks.PreToolUse[2].hooks[0].url: an http hook's url must be an absolute http:// or https:// URL",
		p + ":16: hooks.PermissionRequest: event \"PermissionRequest\" is not one deputy runs hooks at",
		p + ":17: hooks.Stop[0].hooks[0].command: a command hook needs a command",
	}
	if len(cfg.Skipped) != len(want) {
		t.Fatalf("skipped %d: %v", len(cfg.Skipped), cfg.Skipped)
	}
	for i, w := range want {
		if !strings.HasPrefix(cfg.Skipped[i].Error(), w) {
			t.Errorf("skipped[%d] = %q\nwant prefix %q", i, cfg.Skipped[i], w)
		}
	}
	g := cfg.Groups(PreToolUse)
	if len(g) != 1 || len(g[0].Hooks) != 1 || g[0].Hooks[0].Command != "check.sh" || g[0].Hooks[0].Timeout != 30*time.Second ||
		g[0].Hooks[0].Source != p+":8" || g[0].Source != p+":5" {
		t.Fatalf("PreToolUse: %+v", g)
	}
	if s := cfg.Groups(SessionStart); len(s) != 1 || s[0].Hooks[0].Timeout != DefaultTimeout || !s[0].Match("startup") || s[0].Match("resume") {
		t.Fatalf("SessionStart: %+v", s)
	}
	if len(cfg.Groups(Stop)) != 0 {
		t.Errorf("a group with no hook left loaded")
	}
	if l := cfg.List(); len(l) != 2 || l[0].Event != SessionStart || l[0].Matcher != "startup" || l[1].Event != PreToolUse || l[1].Hook.Command != "check.sh" {
		t.Errorf("list %+v", l)
	}
	if !slicesEqual(cfg.Files, []string{p}) {
		t.Errorf("files %v", cfg.Files)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

func TestLoadSettingsFailsOnBadFile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ src, want string }{
		{"{\n  \"hooks\": {\n    \"Stop\": [,]\n  }\n}", ":3: malformed JSON"},
		{"{\n  \"hooks\": [\"Stop\"]\n}", ":2: hooks must be an object of events, not an array"},
		{"[1, 2]", ":1: malformed JSON: settings must be a JSON object"},
		{"{\"hooks\": {", ":1: malformed JSON"},
	} {
		p := filepath.Join(t.TempDir(), "settings.json")
		if err := os.WriteFile(p, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadSettings(p)
		if err == nil || !strings.HasPrefix(err.Error(), p+c.want) {
			t.Errorf("%q: %v, want %s%s", c.src, err, p, c.want)
		}
	}
}

// TestSettingsOrder: hooks of every file run, highest precedence first,
// as permission.SettingsPaths orders them.
func TestSettingsOrder(t *testing.T) {
	t.Parallel()
	dir, home := t.TempDir(), t.TempDir()
	paths := permission.SettingsPaths(dir, home)
	for i, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(one("Stop", "", "echo "+string(rune('a'+i)), "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := LoadSettings(paths...)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Config: cfg, ProjectDir: dir}
	if o := r.Run(bg, Input{Event: Stop}); strings.Join(o.Output, "") != "abc" || o.Ran != 3 {
		t.Fatalf("%+v", o)
	}
}

func TestFromFrontMatter(t *testing.T) {
	t.Parallel()
	// As agentdef decodes YAML: map[string]any, []any, uint64 numbers.
	v := map[string]any{
		"PreToolUse": []any{map[string]any{"matcher": "Bash", "hooks": []any{
			map[string]any{"type": "command", "command": "./check.sh", "timeout": uint64(5)},
			map[string]any{"type": "command", "command": 7},
		}}},
		"Stop": "not a list",
	}
	cfg, err := FromFrontMatter("agents/checker.md", 12, v)
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.Groups(PreToolUse); len(g) != 1 || g[0].Hooks[0].Timeout != 5*time.Second || g[0].Hooks[0].Source != "agents/checker.md:12" {
		t.Fatalf("%+v", g)
	}
	if len(cfg.Skipped) != 2 || !strings.HasPrefix(cfg.Skipped[0].Error(), "agents/checker.md:12: hooks.") {
		t.Fatalf("skipped %v", cfg.Skipped)
	}
	if _, err := FromFrontMatter("a.md", 3, []any{}); err == nil || !strings.HasPrefix(err.Error(), "a.md:3: hooks must be an object") {
		t.Fatalf("%v", err)
	}
	// Settings first, then the definition's.
	s, _ := ParseSettings("s.json", []byte(one("PreToolUse", "Bash", "first.sh", "")))
	m := s.Merge(cfg)
	hs := m.Matching(&Input{Event: PreToolUse, Tool: "bash"})
	if len(hs) != 2 || hs[0].Command != "first.sh" || hs[1].Command != "./check.sh" || len(m.Files) != 2 {
		t.Fatalf("merged %+v", hs)
	}
}

func TestMatchers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		matcher string
		event   Event
		in      Input
		want    bool
	}{
		{"", PreToolUse, Input{Tool: "bash"}, true},
		{"*", PreToolUse, Input{Tool: "mcp__github__create_issue"}, true},
		{"Bash", PreToolUse, Input{Tool: "bash"}, true},
		{"bash", PreToolUse, Input{Tool: "bash"}, true}, // deputy's name works too
		{"Bash", PreToolUse, Input{Tool: "read_file"}, false},
		{"Edit|Write", PreToolUse, Input{Tool: "write_file"}, true},
		{"Edit|Write", PreToolUse, Input{Tool: "edit_file"}, true},
		{"Edit|Write", PreToolUse, Input{Tool: "read_file"}, false},
		{"Edit", PreToolUse, Input{Tool: "MultiEdit"}, false}, // exact names are exact
		{"Notebook.*", PreToolUse, Input{Tool: "NotebookEdit"}, true},
		{"mcp__github__.*", PreToolUse, Input{Tool: "mcp__github__create_issue"}, true},
		{"mcp__github__.*", PreToolUse, Input{Tool: "mcp__gitlab__create_issue"}, false},
		{"mcp__.*__write.*", PreToolUse, Input{Tool: "mcp__fs__write_file"}, true},
		{"mcp__memory__create_entities", PreToolUse, Input{Tool: "mcp__memory__create_entities"}, true},
		{"Task", PreToolUse, Input{Tool: "spawn_subagent"}, true},
		{"Agent", PreToolUse, Input{Tool: "spawn_subagent"}, true},
		{"Web.*", PostToolUse, Input{Tool: "web_fetch"}, true},
		{"Read|Grep|Glob", PostToolUse, Input{Tool: "grep"}, true},
		{"reviewer", SubagentStop, Input{AgentType: "reviewer"}, true},
		{"reviewer", SubagentStart, Input{AgentType: "explorer"}, false},
		{"auto", PreCompact, Input{Trigger: "auto"}, true},
		{"manual", PreCompact, Input{Trigger: "auto"}, false},
		{"startup|resume", SessionStart, Input{Source: "resume"}, true},
		{"clear", SessionEnd, Input{Reason: "logout"}, false},
		{"permission_prompt", Notification, Input{NotificationType: "permission_prompt"}, true},
		{"Bash", Stop, Input{}, true},                // Stop has no matcher
		{"nothing", UserPromptSubmit, Input{}, true}, // nor UserPromptSubmit
	} {
		cfg, err := ParseSettings("s.json", []byte(one(string(c.event), c.matcher, "true", "")))
		if err != nil || len(cfg.Skipped) > 0 {
			t.Fatalf("%q: %v %v", c.matcher, err, cfg.Skipped)
		}
		in := c.in
		in.Event = c.event
		if got := len(cfg.Matching(&in)) == 1; got != c.want {
			t.Errorf("%s matcher %q on %+v: %v, want %v", c.event, c.matcher, c.in, got, c.want)
		}
	}
}

func TestFromMarkdown(t *testing.T) {
	t.Parallel()
	src := `---
name: checker
description: checks
hooks:
  PreToolUse:
    - matcher: Bash
      hooks:
        - type: command
          command: ./check.sh
          timeout: 5
        - type: command
          command: ./slow.sh
          timeout: soon
    - matcher: "Edit("
      hooks:
        - type: command
          command: x
  Stop:
    - hooks:
        - type: http
          url: http://127.0.0.1:9/stop
---

# Checker
`
	cfg, err := FromMarkdown("agents/checker.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"agents/checker.md:13: hooks.PreToolUse[0].hooks[1].timeout: must be a positive number of seconds, not \"soon\"",
		"agents/checker.md:14: hooks.PreToolUse[1].matcher: matcher \"Edit(\" is not a regular expression",
	}
	if len(cfg.Skipped) != len(want) {
		t.Fatalf("skipped %v", cfg.Skipped)
	}
	for i, w := range want {
		if !strings.HasPrefix(cfg.Skipped[i].Error(), w) {
			t.Errorf("skipped[%d] = %q, want prefix %q", i, cfg.Skipped[i], w)
		}
	}
	l := cfg.List()
	if len(l) != 2 || l[0].Event != PreToolUse || l[0].Hook.Source != "agents/checker.md:8" || l[0].Hook.Timeout != 5*time.Second ||
		l[1].Event != Stop || l[1].Hook.URL != "http://127.0.0.1:9/stop" || l[1].Hook.Source != "agents/checker.md:20" {
		t.Fatalf("%+v", l)
	}
	for _, c := range []struct{ src, want string }{
		{"# no front matter", ""},
		{"---\nname: x\n---\n", ""},
		{"---\nhooks:\n---\n", ""},
		{"---\nname: x\n", "agents/x.md:1: front matter is not closed"},
		{"---\nhooks: [1\n---\n", "agents/x.md:"},
		{"---\nhooks: &a {}\nother: *a\n---\n", "aliases"},
		{"---\nhooks: []\n---\n", "agents/x.md:2: hooks must be an object"},
	} {
		cfg, err := FromMarkdown("agents/x.md", []byte(c.src))
		if c.want == "" {
			if err != nil || !cfg.Empty() {
				t.Errorf("%q: %v %+v", c.src, err, cfg)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.src, err, c.want)
		}
	}
}
