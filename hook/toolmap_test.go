package hook

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestToolMapping covers every mapped tool both ways: deputy's call as a
// hook sees it, and that call as a hook would give it back.
func TestToolMapping(t *testing.T) {
	t.Parallel()
	const dir = "/work/proj"
	for _, c := range []struct {
		tool, in       string
		claude, ccArgs string
	}{
		{"bash", `{"command":"go test ./... 2>&1 | tail","timeout_s":30}`, "Bash", `{"command":"go test ./... 2>&1 | tail","timeout":30000}`},
		{"read_file", `{"path":"src/a.go","offset":10,"limit":20}`, "Read", `{"file_path":"/work/proj/src/a.go","offset":10,"limit":20}`},
		{"write_file", `{"path":"out/b.txt","content":"hi\n"}`, "Write", `{"file_path":"/work/proj/out/b.txt","content":"hi\n"}`},
		{"edit_file", `{"path":"a.go","old":"x := 1","new":"x := 2"}`, "Edit", `{"file_path":"/work/proj/a.go","old_string":"x := 1","new_string":"x := 2"}`},
		{"glob", `{"pattern":"**/*.go","include_ignored":true}`, "Glob", `{"pattern":"**/*.go","include_ignored":true}`},
		{"grep", `{"pattern":"func main","path":"cmd"}`, "Grep", `{"pattern":"func main","path":"/work/proj/cmd"}`},
		{"web_fetch", `{"url":"https://example.com/a?b=1&c=2"}`, "WebFetch", `{"url":"https://example.com/a?b=1&c=2"}`},
		{"web_search", `{"query":"deputy hooks"}`, "WebSearch", `{"query":"deputy hooks"}`},
		{"spawn_subagent", `{"subagent_type":"explorer","task":"map the store","description":"survey"}`, "Task", `{"subagent_type":"explorer","prompt":"map the store","description":"survey"}`},
		{"skill", `{"name":"pdf"}`, "Skill", `{"skill":"pdf"}`},
		{"mcp__github__create_issue", `{"title":"t"}`, "mcp__github__create_issue", `{"title":"t"}`},
		{"my_program_tool", `{"x": 1}`, "my_program_tool", `{"x": 1}`},
		{"read_file", `{"path":"/work/proj/abs.go"}`, "Read", `{"file_path":"/work/proj/abs.go"}`},
	} {
		name, args, err := ToClaude(c.tool, json.RawMessage(c.in), dir)
		if err != nil || name != c.claude || string(args) != c.ccArgs {
			t.Errorf("ToClaude(%s, %s) = %s %s %v, want %s %s", c.tool, c.in, name, args, err, c.claude, c.ccArgs)
			continue
		}
		if ClaudeName(c.tool) != c.claude || DeputyName(c.claude) != c.tool {
			t.Errorf("names: %s ↔ %s", ClaudeName(c.tool), DeputyName(c.claude))
		}
		back, bargs, err := FromClaude(name, args, dir)
		want := c.in
		if c.tool == "read_file" && strings.Contains(c.in, "/work/proj/abs.go") {
			want = `{"path":"abs.go"}`
		}
		if err != nil || back != c.tool || compact(t, string(bargs)) != compact(t, want) {
			t.Errorf("FromClaude(%s, %s) = %s %s %v, want %s %s", name, args, back, bargs, err, c.tool, want)
		}
	}
}

func compact(t *testing.T, s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	b, _ := marshal(v)
	return string(b)
}

func TestFromClaudeEdges(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in, tool, want, err string
	}{
		// Claude Code's extras deputy's tools have no field for are dropped.
		{"Bash", `{"command":"ls","description":"list"}`, "bash", `{"command":"ls"}`, ""},
		{"Bash", `{"command":"ls","timeout":1500}`, "bash", `{"command":"ls","timeout_s":2}`, ""},
		{"Bash", `{"command":"ls","timeout":"soon"}`, "", "", "not a number of milliseconds"},
		{"Bash", `{"command":"ls","run_in_background":true}`, "", "", "run_in_background true"},
		{"Bash", `{"command":"ls","run_in_background":false}`, "bash", `{"command":"ls"}`, ""},
		{"Edit", `{"file_path":"/work/proj/a","old_string":"a","new_string":"b","replace_all":true}`, "", "", "replace_all true"},
		{"Grep", `{"pattern":"x","output_mode":"content","-i":true}`, "grep", `{"pattern":"x"}`, ""},
		// deputy's own names are read too, and a path outside stays absolute.
		{"read_file", `{"path":"/etc/hosts"}`, "read_file", `{"path":"/etc/hosts"}`, ""},
		{"Read", `{"file_path":"/work/projector/x"}`, "read_file", `{"path":"/work/projector/x"}`, ""},
		{"Agent", `{"prompt":"go","subagent_type":"fixer"}`, "spawn_subagent", `{"task":"go","subagent_type":"fixer"}`, ""},
		{"Write", `[1]`, "", "", "not a JSON object"},
		{"Write", `{}`, "write_file", `{}`, ""},
	} {
		tool, args, err := FromClaude(c.name, json.RawMessage(c.in), "/work/proj")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("FromClaude(%s, %s): %v, want error %q", c.name, c.in, err, c.err)
			}
			continue
		}
		if err != nil || tool != c.tool || string(args) != c.want {
			t.Errorf("FromClaude(%s, %s) = %s %s %v, want %s %s", c.name, c.in, tool, args, err, c.tool, c.want)
		}
	}
}
