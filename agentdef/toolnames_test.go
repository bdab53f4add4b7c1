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
