package agentdef

import (
	"slices"
	"testing"
)

func TestMapToolName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Read": "read_file", "Write": "write_file", "Edit": "edit_file", "MultiEdit": "edit_file",
		"Glob": "glob", "LS": "glob", "Grep": "grep", "Bash": "bash", "WebFetch": "web_fetch",
		"WebSearch": "web_search", "Task": SpawnTool, "Agent": SpawnTool, "NotebookRead": "read_file",
		"read_file": "read_file", "mcp__github__get_issue": "mcp__github__get_issue", " Grep ": "grep",
	} {
		got, ok, pattern := MapToolName(in)
		if !ok || got != want || pattern {
			t.Errorf("%q -> %q %v, want %q", in, got, ok, want)
		}
	}
	if got, ok, pattern := MapToolName("Bash(npm test:*)"); got != "bash" || !ok || !pattern {
		t.Errorf("pattern: %q %v %v", got, ok, pattern)
	}
	for _, in := range []string{"TeamCreate", "SendMessage", "TodoWrite", "NotebookEdit", "code-reviewer", "mcp__", "Nope(x)", ""} {
		if got, ok, _ := MapToolName(in); ok {
			t.Errorf("%q mapped to %q; deputy cannot serve it", in, got)
		}
	}
}

func TestEffectiveTools(t *testing.T) {
	t.Parallel()
	avail := []string{"read_file", "write_file", "bash", SpawnTool, "mcp__gh__issue", "mcp__gh__pr", "mcp__db__q"}
	for _, c := range []struct {
		d    Definition
		want []string
	}{
		{Definition{}, []string{"read_file", "write_file", "bash", "mcp__gh__issue", "mcp__gh__pr", "mcp__db__q"}},
		{Definition{DisallowedTools: []string{"bash", "mcp__gh"}}, []string{"read_file", "write_file", "mcp__db__q"}},
		{Definition{Tools: []string{}}, []string{}},
		{Definition{Tools: []string{"read_file", "mcp__gh__pr", "grep"}}, []string{"read_file", "mcp__gh__pr"}},
		{Definition{Tools: []string{"mcp__gh", SpawnTool}}, []string{SpawnTool, "mcp__gh__issue", "mcp__gh__pr"}},
		{Definition{Tools: []string{"read_file", "bash"}, DisallowedTools: []string{"bash"}}, []string{"read_file"}},
	} {
		if got := c.d.EffectiveTools(avail); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.d, got, c.want)
		}
	}
}

// Allows is the allowlist's word on one tool, deputy's own included:
// absent inherits all but spawning; listed is exactly those; the deny
// list removes any.
func TestAllows(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    Definition
		tool string
		want bool
	}{
		{Definition{}, AskTool, true},
		{Definition{}, "anything", true},
		{Definition{}, SpawnTool, false},
		{Definition{}, FanOutTool, false},
		{Definition{Tools: []string{}}, AskTool, false},
		{Definition{Tools: []string{"noop"}}, AskTool, false},
		{Definition{Tools: []string{"noop", AskTool}}, AskTool, true},
		{Definition{Tools: []string{SpawnTool}}, SpawnTool, true},
		{Definition{Tools: []string{SpawnTool}}, FanOutTool, false},
		{Definition{Tools: []string{FanOutTool}}, FanOutTool, true},
		{Definition{DisallowedTools: []string{AskTool}}, AskTool, false},
		{Definition{Tools: []string{AskTool}, DisallowedTools: []string{AskTool}}, AskTool, false},
		{Definition{Tools: []string{"mcp__gh"}}, "mcp__gh__issue", true},
	} {
		if got := c.d.Allows(c.tool); got != c.want {
			t.Errorf("tools %q, denied %q: Allows(%s) = %v", c.d.Tools, c.d.DisallowedTools, c.tool, got)
		}
	}
	own := RuntimeTools()
	if len(own) != 13 || own[0] != SpawnTool || own[1] != FanOutTool || own[2] != WaitTool || own[len(own)-1] != AskTool {
		t.Errorf("runtime tools %v", own)
	}
	own[0] = "x" // a fresh slice each call
	if RuntimeTools()[0] != SpawnTool {
		t.Error("RuntimeTools shares its slice")
	}
}
