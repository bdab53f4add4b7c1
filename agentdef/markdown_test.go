package agentdef

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/permission"
)

// hasIssue reports whether issues hold one at line whose text contains sub.
func hasIssue(issues []Issue, line int, sub string) bool {
	for _, i := range issues {
		if i.Line == line && strings.Contains(i.Error(), sub) {
			return true
		}
	}
	return false
}

func TestParseErrorsCarryFileAndLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		line      int
		want      string
	}{
		{"no name", "---\ndescription: d\n---\nbody\n", 1, "name: missing"},
		{"no description", "---\nname: a\n---\nbody\n", 1, "description: missing"},
		{"bad mode", "---\nname: a\ndescription: d\nmode: forked\n---\n", 4, `mode: "forked" does not exist`},
		{"bad isolation", "---\nname: a\ndescription: d\n\nisolation: vm\n---\n", 5, `isolation: "vm" does not exist`},
		{"bad max turns", "---\nname: a\ndescription: d\nmaxTurns: many\n---\n", 4, `maxTurns: "many" is not a whole number`},
		{"fork with a model", "---\nname: a\ndescription: d\nmode: fork\nmodel: opus\n---\n", 5, "model: a fork child runs on the parent's model"},
		{"bad name", "---\nname: has space\ndescription: d\n---\n", 2, "not a valid name"},
		{"no front matter", "just text\n", 1, "no front matter"},
		{"unclosed", "---\nname: a\ndescription: d\n", 1, "not closed"},
		{"bad YAML in a flow list", "---\nname: a\ndescription: [unclosed\n  nested: x\n---\n", 4, "description: not valid YAML"},
		{"bad budget", "---\nname: a\ndescription: d\nbudget:\n  wallTime: soon\n---\n", 4, "budget: wallTime"},
		{"name is a list", "---\nname: [a, b]\ndescription: d\n---\n", 2, "name: want a string, got a list"},
		{"fractional turns", "---\nname: a\ndescription: d\nmaxTurns: 1.5\n---\n", 4, "maxTurns: 1.5 is not a whole number"},
		{"huge turns", "---\nname: a\ndescription: d\nmaxTurns: 99999999999\n---\n", 4, "maxTurns: 99999999999 is out of range"},
		{"negative cap", "---\nname: a\ndescription: d\nreportCap: -5\n---\n", 4, "reportCap: -5 is negative"},
		{"bool that is not", "---\nname: a\ndescription: d\nbackground: maybe\n---\n", 4, `background: "maybe" is not true or false`},
		{"tools as a mapping", "---\nname: a\ndescription: d\ntools:\n  Read: yes\n---\n", 4, "tools: want a list or a comma-separated string, got a mapping"},
		{"budget not a mapping", "---\nname: a\ndescription: d\nbudget: 5\n---\n", 4, "budget: want a mapping"},
		{"budget unknown key", "---\nname: a\ndescription: d\nbudget:\n  tokens: 5\n---\n", 4, "budget: tokens: unknown key"},
		{"duplicate key", "---\nname: a\ndescription: d\nname: b\n---\n", 4, `key "name" appears twice`},
		{"top level list", "---\n- a\n- b\n---\n", 2, `"- a" is not key: value`},
		{"duplicate key far apart", "---\nname: a\ndescription: d\nmodel: haiku\n\nname: b\n---\n", 6, `key "name" appears twice (first on line 2)`},
		{"tool choice outside allowlist", "---\nname: a\ndescription: d\ntools: Read\ntoolChoice: bash\n---\n", 5, "toolChoice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := ParseDefinition("agents/x.md", []byte(c.src))
			if p.Def != nil {
				t.Fatalf("loaded; want an error containing %q", c.want)
			}
			if !hasIssue(p.Errors, c.line, c.want) {
				t.Fatalf("errors %v; want one at line %d containing %q", p.Errors, c.line, c.want)
			}
			for _, e := range p.Errors {
				if !strings.HasPrefix(e.Error(), "agents/x.md") {
					t.Errorf("error %q does not name the file", e.Error())
				}
			}
		})
	}
}

func TestParseAllFields(t *testing.T) {
	t.Parallel()
	src := `---
name: checker
description: Checks things
tools:
  - Read
  - Grep
  - LS
  - Bash(git diff:*)
  - mcp__github__get_issue
  - TeamCreate
disallowedTools: Write, Edit, WebFetch(domain:example.com)
model: anthropic:claude-haiku-4-5
maxTurns: 12
skills: [pdf, review]
background: true
isolation: worktree
toolChoice: grep
network: [example.com]
readPaths: [/data]
writePaths: [/tmp/out]
budget:
  totalTokens: 50000
  wallTime: 2m
  toolCalls: 40
  outputTokensPerCall: 4000
reportCap: 1500
color: blue
hooks:
  PreToolUse: []
permissionMode: plan
---

# Checker

Check it.
`
	p := ParseDefinition("c.md", []byte(src))
	if p.Def == nil {
		t.Fatalf("errors: %v", p.Errors)
	}
	d := p.Def
	// Bash(git diff:*) grants nothing: all of bash would be more than asked.
	if want := []string{"read_file", "grep", "glob", "mcp__github__get_issue"}; !slices.Equal(d.Tools, want) {
		t.Errorf("tools %v, want %v", d.Tools, want)
	}
	if !slices.Equal(d.DeclaredTools, []string{"Read", "Grep", "LS", "Bash(git diff:*)", "mcp__github__get_issue", "TeamCreate"}) {
		t.Errorf("declared %v", d.DeclaredTools)
	}
	if !slices.Equal(d.UnresolvedTools(), []string{"mcp__github__get_issue"}) {
		t.Errorf("unresolved %v", d.UnresolvedTools())
	}
	if !slices.Equal(d.DisallowedTools, []string{"write_file", "edit_file", "web_fetch"}) {
		t.Errorf("disallowed %v", d.DisallowedTools)
	}
	if d.Model != "anthropic:claude-haiku-4-5" || d.MaxTurns != 12 || !d.Background || !d.Worktree ||
		d.Isolation != IsolationNone || d.ToolChoice != "grep" || d.ReportCap != 1500 || d.Mode != ModeIsolated {
		t.Errorf("fields: %+v", d)
	}
	if !slices.Equal(d.Skills, []string{"pdf", "review"}) || !slices.Equal(d.Network, []string{"example.com"}) ||
		!slices.Equal(d.ReadPaths, []string{"/data"}) || !slices.Equal(d.WritePaths, []string{"/tmp/out"}) {
		t.Errorf("lists: %+v", d)
	}
	if d.Budgets != (Budgets{TotalTokens: 50000, WallTime: 2 * time.Minute, ToolCalls: 40, OutputTokensPerCall: 4000}) {
		t.Errorf("budgets %+v", d.Budgets)
	}
	if d.SystemPrompt != "# Checker\n\nCheck it." {
		t.Errorf("prompt %q", d.SystemPrompt)
	}
	if d.Extra["color"] != "blue" || len(d.Extra) != 1 {
		t.Errorf("extra %v", d.Extra)
	}
	if d.PermissionMode != permission.ModePlan {
		t.Errorf("permission mode %q", d.PermissionMode)
	}
	if h := d.Hooks; h == nil || h.File != "c.md" || h.Line != 28 || !reflect.DeepEqual(h.Value, map[string]any{"PreToolUse": []any{}}) {
		t.Errorf("hooks %+v", h)
	}
	if d.Source.File != "c.md" || d.Source.Line != 2 {
		t.Errorf("source %+v", d.Source)
	}
	for _, w := range []struct {
		line int
		sub  string
	}{{4, `"TeamCreate" is not a tool deputy can serve`}, {4, "Bash(git diff:*) is not granted"}, {11, "WebFetch(domain:example.com) disallows all of web_fetch"},
		{27, "color: kept but not used"}} {
		if !hasIssue(p.Warnings, w.line, w.sub) {
			t.Errorf("no warning at c.md:%d containing %q in %v", w.line, w.sub, p.Warnings)
		}
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	p := ParseDefinition("d.md", []byte("---\nname: d\ndescription: x\n---\n"))
	if p.Def == nil {
		t.Fatal(p.Errors)
	}
	d := p.Def
	if d.MaxTurns != 30 || d.ReportCap != 3000 || d.Mode != ModeIsolated || d.Isolation != IsolationNone ||
		d.Tools != nil || d.Model != "" || d.SystemPrompt != "" {
		t.Fatalf("defaults: %+v", d)
	}
	// With no allowlist it inherits every tool, writers included: the
	// only warning is that it has no isolation.
	if len(p.Warnings) != 1 || !hasIssue(p.Warnings, 1, "can change the workspace (write_file, edit_file, bash) and has no isolation") {
		t.Fatalf("warnings %v", p.Warnings)
	}
	for _, extra := range []string{"tools: read_file, grep", "tools: bash\nworktree: true", "tools: edit_file\nisolation: sandbox"} {
		p := ParseDefinition("d.md", []byte("---\nname: d\ndescription: x\n"+extra+"\n---\n"))
		if len(p.Warnings) != 0 || len(p.Errors) != 0 {
			t.Errorf("%s: warnings %v errors %v", extra, p.Warnings, p.Errors)
		}
	}
}

func TestParseColonInValueReadAsClaudeCodeReadsIt(t *testing.T) {
	t.Parallel()
	// Strict YAML rejects the unquoted ": " in the description; Claude Code
	// quotes such a value and parses again, and so does deputy. CRLF and a
	// BOM are what editors on other systems write.
	src := "\xef\xbb\xbf---\r\nname: lenient\r\ndescription: Use it. Triggers on: 'x', 'y'\r\ntools:\r\n  - Read\r\n  - Grep\r\nmaxTurns: 5\r\nbackground: true\r\n---\r\nPrompt\r\n"
	p := ParseDefinition("l.md", []byte(src))
	if p.Def == nil {
		t.Fatal(p.Errors)
	}
	d := p.Def
	if d.Description != "Use it. Triggers on: 'x', 'y'" || !slices.Equal(d.Tools, []string{"read_file", "grep"}) ||
		d.MaxTurns != 5 || !d.Background || d.SystemPrompt != "Prompt" {
		t.Fatalf("%+v", d)
	}
	if len(p.Warnings) != 1 || !hasIssue(p.Warnings, 3, "l.md:3: description: not valid YAML as written") ||
		!hasIssue(p.Warnings, 3, "read as Claude Code reads it") {
		t.Fatalf("warnings %v", p.Warnings)
	}

	// Other one-line values that are text to a person and broken to YAML.
	for _, c := range []struct{ line, want string }{
		{"description: Reviews code. Examples:", "Reviews code. Examples:"},
		{"description: @mentions the owner: always", "@mentions the owner: always"},
		{"description: It's for: this, that # and more", "It's for: this, that # and more"},
		{"description: *bold* claims: none", "*bold* claims: none"},
	} {
		p := ParseDefinition("v.md", []byte("---\nname: v\n"+c.line+"\n---\nbody\n"))
		if p.Def == nil || p.Def.Description != c.want {
			t.Errorf("%s: def %+v errors %v", c.line, p.Def, p.Errors)
			continue
		}
		if !hasIssue(p.Warnings, 3, "read as Claude Code reads it") {
			t.Errorf("%s: warnings %v", c.line, p.Warnings)
		}
	}
}

// Front matter that is not YAML however its values are read is refused,
// at the line to fix: never loaded as a guess (issue 16, item 9: "tools:
// [read_file, glob" used to load as [glob]).
func TestParseBrokenFrontMatterIsRefusedAtItsLine(t *testing.T) {
	t.Parallel()
	const head = "---\nname: a\n" // the next line is file line 3
	for _, c := range []struct {
		name, src string
		line      int
		want      string
	}{
		{"flow list not closed, then a key", head + "tools: [read_file, glob\ndescription: d\n", 3, "tools: not valid YAML"},
		{"flow list not closed at the end", head + "description: d\ntools: [read_file, glob\n", 4, "tools: not valid YAML"},
		{"flow list then text", head + "description: d\ntools: [Read] and Grep\n", 4, "tools: not valid YAML"},
		{"flow mapping not closed", head + "description: d\nbudget: {toolCalls: 5\n", 4, "budget: not valid YAML"},
		{"quoted value not closed", head + "description: \"helps\nmodel: haiku\n", 3, "description: not valid YAML"},
		{"key indented under a value", head + "description: d\n  tools: Read\n", 4, `"tools: Read" is indented under description's value`},
		{"key indented after the first", "---\nname: a\n  description: d\ntools: Read\n", 3, `"description: d" is indented under name's value`},
		{"list item out of line", head + "description: d\ntools:\n  - Read\n - Grep\n", 6, "tools: not valid YAML"},
		{"first line indented", "---\n  name: a\ndescription: d\n", 2, `"name: a" is indented where a top-level key was expected`},
		{"tab indentation", head + "description: d\ntools: Read\n\tmodel: haiku\n", 5, `"model: haiku" is indented under tools's value`},
		{"value over unindented lines", head + "description: Reviews. Examples:\n<example>\nuser: hi\n</example>\n", 4,
			`"<example>" is not key: value (a value that goes on over several lines must be indented`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := ParseDefinition("agents/x.md", []byte(c.src+"---\nbody\n"))
			if p.Def != nil {
				t.Fatalf("loaded %+v (warnings %v); want an error at line %d", p.Def, p.Warnings, c.line)
			}
			if len(p.Errors) != 1 || !hasIssue(p.Errors, c.line, fmt.Sprintf("agents/x.md:%d: ", c.line)) || !hasIssue(p.Errors, c.line, c.want) {
				t.Fatalf("errors %v; want one at agents/x.md:%d containing %q", p.Errors, c.line, c.want)
			}
		})
	}
}

func TestParseToolsForms(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tools string
		want  []string
	}{
		{"tools: Read, Write, Edit, MultiEdit", []string{"read_file", "write_file", "edit_file"}},
		{"tools: [Read, WebFetch, WebSearch, Task]", []string{"read_file", "web_fetch", "web_search", "spawn_subagent"}},
		{"tools: []", []string{}},
		{"tools: read_file, bash", []string{"read_file", "bash"}},
		{"tools: SendMessage", []string{}}, // asked for specific tools: never all of them
	} {
		p := ParseDefinition("t.md", []byte("---\nname: t\ndescription: d\n"+c.tools+"\n---\n"))
		if p.Def == nil {
			t.Fatalf("%s: %v", c.tools, p.Errors)
		}
		if p.Def.Tools == nil || !slices.Equal(p.Def.Tools, c.want) {
			t.Errorf("%s: %#v, want %#v", c.tools, p.Def.Tools, c.want)
		}
	}
}

func TestParseModelsAndResolve(t *testing.T) {
	t.Parallel()
	cfg := &Config{Tiers: map[string]string{"haiku": "openai:gpt-5-mini"}}
	for _, c := range []struct {
		model   string
		warn    bool
		pm      string
		inherit bool
	}{
		{"", false, "", true}, {"inherit", false, "", true}, {"haiku", false, "openai:gpt-5-mini", false},
		{"opus", false, "", true}, // no mapping: inherit
		{"anthropic:claude-opus-4-1", false, "anthropic:claude-opus-4-1", false},
		{"fable", true, "", true},
	} {
		src := "---\nname: m\ndescription: d\n"
		if c.model != "" {
			src += "model: " + c.model + "\n"
		}
		p := ParseDefinition("m.md", []byte(src+"---\n"))
		if p.Def == nil {
			t.Fatalf("%q: %v", c.model, p.Errors)
		}
		if got := hasIssue(p.Warnings, 4, "model:"); got != c.warn {
			t.Errorf("%q: warning %v, want %v (%v)", c.model, got, c.warn, p.Warnings)
		}
		pm, inherit := cfg.ResolveModel(p.Def.Model)
		if pm != c.pm || inherit != c.inherit {
			t.Errorf("%q resolves to %q inherit=%v, want %q %v", c.model, pm, inherit, c.pm, c.inherit)
		}
	}
}

func TestDefinitionJSONRoundTrip(t *testing.T) {
	t.Parallel()
	d := &Definition{Name: "j", Description: "d", Tools: []string{}, Budgets: Budgets{WallTime: 90 * time.Second, ToolCalls: 3},
		Source: Source{Level: LevelProject, File: "x.md", Line: 2}, Extra: map[string]any{"color": "red"}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"wall_time":"1m30s"`) || !strings.Contains(string(b), `"level":"project"`) ||
		!strings.Contains(string(b), `"tools":[]`) || !strings.Contains(string(b), `"declared_tools":null`) {
		t.Fatalf("json %s", b)
	}
	var back Definition
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Budgets != d.Budgets || back.Source != d.Source || back.Tools == nil || back.Extra["color"] != "red" {
		t.Fatalf("round trip %+v", back)
	}
}

// Loading a catalog from a directory leaves a broken file out with its
// file:line, and loads the rest.
func TestLoadLeavesBrokenFrontMatterOutWithItsLine(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	dir := filepath.Join(proj, ".claude", "agents")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"broken.md": "---\nname: broken\ndescription: reads\ntools: [read_file, glob\n---\nRead.\n",
		"colon.md":  "---\nname: colon\ndescription: Use it. Triggers on: 'x'\n---\nC.\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, res := Load(LoadOptions{ProjectDir: proj, NoBuiltins: true})
	errs, warns := res.Issues()
	want := filepath.Join(dir, "broken.md") + ":4: tools: not valid YAML"
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
		t.Fatalf("errors %v; want one starting %q", errs, want)
	}
	if _, ok := c.Lookup("broken"); ok {
		t.Fatal("the broken definition is in the catalog")
	}
	if d, ok := c.Lookup("colon"); !ok || d.Description != "Use it. Triggers on: 'x'" || !hasIssue(warns, 3, "read as Claude Code reads it") {
		t.Fatalf("colon: %+v %v, warnings %v", d, ok, warns)
	}
}

// Where a mapping read as a Go map (budget, an MCP server's env) has more
// than one problem, the one reported is the same every run: the first key
// in sorted order, not whichever the map yields first.
func TestFirstProblemIsTheSameEveryRun(t *testing.T) {
	t.Parallel()
	cases := []struct{ src, want string }{
		{"---\nname: a\ndescription: d\nbudget:\n  wallTime: soon\n  toolCalls: many\n  bogus: 1\n---\n",
			`agents/x.md:4: budget: bogus: unknown key`},
		{"---\nname: a\ndescription: d\nmcpServers:\n  s:\n    command: x\n    env: {Z: [1], B: [2], M: [3]}\n---\n",
			`agents/x.md:5: mcpServers: server s: env: B: want a string, got a list`},
	}
	for _, c := range cases {
		for range 30 {
			p := ParseDefinition("agents/x.md", []byte(c.src))
			if len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0].Error(), c.want) {
				t.Fatalf("errors %v; want one starting %q", p.Errors, c.want)
			}
		}
	}
}
