package agentdef

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/permission"
)

func TestPermissionModeField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		value string
		want  permission.Mode
		err   string // substring of the error at line 4, "" for none
	}{
		{"default", permission.ModeDefault, ""},
		{"manual", permission.ModeDefault, ""}, // Claude Code's newer alias
		{"acceptEdits", permission.ModeAcceptEdits, ""},
		{"plan", permission.ModePlan, ""},
		{"dontAsk", permission.ModeDontAsk, ""},
		{"bypassPermissions", permission.ModeBypassPermissions, ""},
		{"'  plan '", permission.ModePlan, ""},
		{"yolo", "", `permissionMode: unknown permission mode "yolo"`},
		{"BypassPermissions", "", `unknown permission mode "BypassPermissions"`},
		{"[plan]", "", "permissionMode: want a string, got a list"},
		{"{a: b}", "", "permissionMode: want a string, got a mapping"},
	} {
		src := "---\nname: p\ndescription: d\npermissionMode: " + c.value + "\n---\nbody\n"
		p := ParseDefinition("p.md", []byte(src))
		if c.err != "" {
			if p.Def != nil || !hasIssue(p.Errors, 4, c.err) {
				t.Errorf("%s: errors %v, want one at p.md:4 with %q", c.value, p.Errors, c.err)
			}
			continue
		}
		if p.Def == nil {
			t.Errorf("%s: %v", c.value, p.Errors)
			continue
		}
		if p.Def.PermissionMode != c.want {
			t.Errorf("%s: mode %q, want %q", c.value, p.Def.PermissionMode, c.want)
		}
		for _, w := range p.Warnings {
			if strings.Contains(w.Msg, "permissionMode") {
				t.Errorf("%s: warning %v", c.value, w)
			}
		}
	}
	// Absent, or null: not set, so the parent's mode applies.
	for _, src := range []string{"---\nname: p\ndescription: d\n---\n", "---\nname: p\ndescription: d\npermissionMode:\n---\n"} {
		if p := ParseDefinition("p.md", []byte(src)); p.Def == nil || p.Def.PermissionMode != "" {
			t.Errorf("%q: %+v", src, p)
		}
	}
}

// A definition built in Go (or read back from the database) goes through
// the same check.
func TestPermissionModeCheckedInGo(t *testing.T) {
	t.Parallel()
	d := &Definition{Name: "g", Description: "d", PermissionMode: "sudo"}
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), `permissionMode: unknown permission mode "sudo"`) {
		t.Fatalf("validate: %v", err)
	}
	d = &Definition{Name: "g", Description: "d", PermissionMode: "manual"}
	if err := d.Validate(); err != nil || d.PermissionMode != permission.ModeDefault {
		t.Fatalf("validate: %v, mode %q", err, d.PermissionMode)
	}
}

func TestHooksFieldKeptRawWithItsLine(t *testing.T) {
	t.Parallel()
	src := `---
name: h
description: d
tools: Read, Bash
hooks:
  PreToolUse:
    - matcher: "Bash"
      hooks:
        - type: command
          command: "./scripts/check.sh"
          timeout: 30
  Stop:
    - hooks:
        - type: http
          url: http://127.0.0.1:9/stop
---
body
`
	p := ParseDefinition("agents/h.md", []byte(src))
	if p.Def == nil {
		t.Fatal(p.Errors)
	}
	h := p.Def.Hooks
	if h == nil || h.File != "agents/h.md" || h.Line != 5 {
		t.Fatalf("hooks %+v", h)
	}
	m, ok := h.Value.(map[string]any)
	if !ok || len(m) != 2 {
		t.Fatalf("value %#v", h.Value)
	}
	pre := m["PreToolUse"].([]any)[0].(map[string]any)
	cmd := pre["hooks"].([]any)[0].(map[string]any)
	if pre["matcher"] != "Bash" || cmd["command"] != "./scripts/check.sh" || cmd["type"] != "command" {
		t.Fatalf("PreToolUse %#v", pre)
	}
	if _, ok := p.Def.Extra["hooks"]; ok {
		t.Error("hooks also in Extra")
	}
	for _, w := range p.Warnings {
		if strings.Contains(w.Msg, "hooks") {
			t.Errorf("warning %v", w)
		}
	}

	// Stored as JSON (the definitions table) and read back, the value and
	// its place survive; numbers come back as JSON numbers.
	b, err := json.Marshal(p.Def)
	if err != nil {
		t.Fatal(err)
	}
	var back Definition
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Hooks == nil || back.Hooks.Line != 5 || back.Hooks.File != "agents/h.md" {
		t.Fatalf("round trip %s -> %+v", b, back.Hooks)
	}
	var want any
	wb, _ := json.Marshal(h.Value)
	_ = json.Unmarshal(wb, &want)
	if !reflect.DeepEqual(back.Hooks.Value, want) {
		t.Fatalf("round trip value %#v, want %#v", back.Hooks.Value, want)
	}

	// A clone does not share the RawHooks.
	c := p.Def.Clone()
	c.Hooks.Line = 99
	if p.Def.Hooks.Line != 5 {
		t.Error("clone shares Hooks")
	}
}

func TestPermissionModeJSON(t *testing.T) {
	t.Parallel()
	d := &Definition{Name: "j", Description: "d", PermissionMode: permission.ModeAcceptEdits}
	b, err := json.Marshal(d)
	if err != nil || !strings.Contains(string(b), `"permission_mode":"acceptEdits"`) || strings.Contains(string(b), `"hooks"`) {
		t.Fatalf("%s %v", b, err)
	}
	var back Definition
	if err := json.Unmarshal(b, &back); err != nil || back.PermissionMode != permission.ModeAcceptEdits || back.Hooks != nil {
		t.Fatalf("%+v %v", back, err)
	}
}
