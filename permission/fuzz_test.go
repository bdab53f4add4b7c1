package permission

import (
	"encoding/json"
	"testing"
)

// FuzzDecide feeds arbitrary rules and commands through parsing, splitting
// and deciding: none of them may panic, and a rule that parsed must decide
// a call without leaving it undecided under any mode.
func FuzzDecide(f *testing.F) {
	f.Add("Bash(git:*)", "git status && rm -rf / | tee $(echo `x`)")
	f.Add("Read(~/a/**/b?[c])", "echo 'unclosed")
	f.Add("mcp__a__*", "a\\")
	f.Add("WebFetch(domain:*.x.org)", "((a) && b) 2>&1 &>/dev/null")
	f.Fuzz(func(t *testing.T, rule, command string) {
		r, err := ParseRule(rule)
		if err != nil {
			return
		}
		s := Set{Deny: []Rule{r}, Ask: []Rule{r}, Allow: []Rule{r}}
		// Allow-only, with a second rule, so the allow path is reached
		// too; each set also indexed, which must decide as the walk does.
		git, _ := ParseRule("Bash(git:*)")
		allow := Set{Allow: []Rule{r, git}}
		in, _ := json.Marshal(map[string]string{"command": command, "path": command, "pattern": command, "url": command})
		for _, tool := range []string{"bash", "read_file", "glob", "web_fetch", "mcp__a__b", "write_file"} {
			c := Call{Tool: tool, Input: in, Cwd: "/w/p", ProjectDir: "/w", Home: "/h"}
			for _, set := range []Set{s, allow} {
				ix := NewSet(set.Allow, set.Ask, set.Deny)
				if w, i := set.Decide(c), ix.Decide(c); w != i {
					t.Fatalf("%s: indexed %+v, walk %+v", tool, i, w)
				}
			}
			for _, m := range modes {
				if d := Effective(m, s, c); d.Outcome == Default {
					t.Fatalf("%s under %s undecided", tool, m)
				}
			}
		}
	})
}

// FuzzSettings: no settings text may panic the parser.
func FuzzSettings(f *testing.F) {
	f.Add([]byte(`{"permissions": {"allow": ["Bash", 1, {"a": []}], "deny": [], "defaultMode": "plan"}, "x": [1, {"y": null}]}`))
	f.Add([]byte("{\n\"permissions\": [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = parseSettings("settings.json", data)
	})
}
