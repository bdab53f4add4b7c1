package hook

import (
	"encoding/json"
	"testing"

	"github.com/deputy-run/deputy/permission"
)

// FuzzConfig: any settings text loads or fails with an error; never a
// panic, and every skipped entry has a line.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(one("PreToolUse", "Bash|Edit", "check.sh", `, "timeout": 3`)))
	f.Add([]byte(`{"hooks":{"Stop":[{"hooks":[{"type":"http","url":"http://127.0.0.1:1/h","headers":{"A":"$B"},"allowedEnvVars":["B"]}]}]}}`))
	f.Add([]byte(`{"hooks":{"PreToolUse":[{"matcher":"(","hooks":[]}],"X":1}}`))
	f.Add([]byte(`{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"x","timeout":1e400}]}]}}`))
	f.Add([]byte(`{"hooks":[]}`))
	f.Add([]byte(`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"x","timeout":"9"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseSettings("s.json", data)
		if err != nil {
			return
		}
		for _, e := range c.Skipped {
			if ce, ok := e.(*ConfigError); !ok || ce.Line < 1 {
				t.Fatalf("skipped without a line: %v", e)
			}
		}
		for _, ev := range Events() {
			c.Matching(&Input{Event: ev, Tool: "bash"})
		}
	})
}

// FuzzAnswer: whatever a hook prints, combining it never panics, and the
// outcome's invariants hold.
func FuzzAnswer(f *testing.F) {
	f.Add(`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}`, 0, 0)
	f.Add(`{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"ls","timeout":5}}}`, 0, 0)
	f.Add(`{"decision":"block","reason":"r","continue":false,"stopReason":"s"}`, 0, 3)
	f.Add(`{"decision": oops`, 0, 1)
	f.Add("plain text", 2, 2)
	f.Add(`{"hookSpecificOutput":{"updatedInput":{"file_path":"/w/a","replace_all":true}}}`, 0, 0)
	f.Fuzz(func(t *testing.T, stdout string, exit int, event int) {
		evs := Events()
		ev := evs[uint(event)%uint(len(evs))]
		tools := []string{"bash", "edit_file", "read_file", "mcp__x__y"}
		c := combiner{ev: ev, tool: tools[uint(exit)%uint(len(tools))], dir: "/w"}
		h := Hook{Type: TypeCommand, Command: "x", Source: "s.json:1"}
		c.add(&result{hook: &h, exit: exit % 4, stdout: stdout, stderr: stdout})
		o := c.done()
		if o.Block && !blocking(ev) {
			t.Fatalf("%s blocked", ev)
		}
		if ev == PreToolUse && o.Block != (o.Permission == permission.Deny) {
			t.Fatalf("block %v permission %v", o.Block, o.Permission)
		}
		if o.UpdatedInput != nil && !json.Valid(o.UpdatedInput) {
			t.Fatalf("updated input %q", o.UpdatedInput)
		}
		if _, err := json.Marshal(o); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzMarkdown: any definition file's hooks load or fail with an error,
// never a panic; every skipped entry has a line.
func FuzzMarkdown(f *testing.F) {
	f.Add([]byte("---\nhooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n        - type: command\n          command: x\n---\n"))
	f.Add([]byte("---\nhooks: {Stop: [{hooks: [{type: http, url: 'http://h/'}]}]}\n---\n"))
	f.Add([]byte("---\nhooks:\n  - a\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := FromMarkdown("a.md", data)
		if err != nil {
			return
		}
		for _, e := range c.Skipped {
			if ce, ok := e.(*ConfigError); !ok || ce.Line < 1 {
				t.Fatalf("skipped without a line: %v", e)
			}
		}
	})
}
