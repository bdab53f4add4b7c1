package permission

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestChildRefusesWiderMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ parent, child Mode }{
		{ModeDefault, ModeBypassPermissions},
		{ModePlan, ModeAcceptEdits},
		{ModeDontAsk, ModeDefault},
		{ModeAcceptEdits, ModeBypassPermissions},
	} {
		_, err := Policy{Mode: tc.parent}.Child(Policy{Mode: tc.child})
		if err == nil {
			t.Errorf("%s under %s was accepted", tc.child, tc.parent)
			continue
		}
		if !strings.Contains(err.Error(), string(tc.parent)) || !strings.Contains(err.Error(), string(tc.child)) {
			t.Errorf("error %q does not name both modes", err)
		}
	}
	// A grandparent's mode binds too, however the chain was built.
	root := Policy{Mode: ModePlan}
	mid, err := root.Child(Policy{Mode: ModePlan})
	if err != nil {
		t.Fatal(err)
	}
	mid.Mode = ModeBypassPermissions // edited by hand after the fact
	if _, err := mid.Child(Policy{Mode: ModeDefault}); err == nil {
		t.Error("default under a plan grandparent was accepted")
	}
}

func TestChildIntersects(t *testing.T) {
	t.Parallel()
	parent := Policy{Mode: ModeDefault, Set: Set{
		Allow: mustRules(t, "Bash(go:*)", "Edit"),
		Deny:  mustRules(t, "Bash(go generate:*)"),
	}}
	child, err := parent.Child(Policy{Mode: ModeDontAsk, Set: Set{
		Allow: mustRules(t, "Bash", "Read"),
		Ask:   mustRules(t, "Edit(/go.mod)"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    Call
		want Outcome
	}{
		{call("bash", cmd("go test ./...")), Allow},            // both allow
		{call("bash", cmd("make")), Ask},                       // the parent asks
		{call("bash", cmd("go generate ./...")), Deny},         // the parent denies
		{call("edit_file", file("/home/u/proj/go.mod")), Deny}, // the child's ask, under dontAsk
		{call("edit_file", file("main.go")), Deny},             // the child has no rule and does not ask
	} {
		if d := child.Decide(tc.c); d.Outcome != tc.want {
			t.Errorf("%s %s = %v (%s), want %v", tc.c.Tool, tc.c.Input, d.Outcome, d.Reason, tc.want)
		}
	}
	if d := child.Decide(call("bash", cmd("make"))); !strings.Contains(d.Reason, "ancestor 0") {
		t.Errorf("the parent's ask is not attributed to it: %q", d.Reason)
	}
}

// rulePool is what random policies are made of: one of each rule kind.
var rulePool = []string{
	"Bash", "Bash(git:*)", "Bash(git push *)", "Bash(rm:*)", "Bash(npm run build)", "Bash(go test:*)",
	"Read", "Read(.env)", "Read(/src/**)", "Read(~/.ssh/**)", "Read(//etc/**)",
	"Edit", "Edit(/src/**)", "Write(//tmp/**)", "Edit(/.git/**)",
	"WebFetch", "WebFetch(domain:example.com)", "WebSearch",
	"mcp__db", "mcp__db__query", "mcp__gh__*", "Agent(explorer)",
}

var callPool = []Call{
	call("bash", cmd("git status")), call("bash", cmd("git push origin main")),
	call("bash", cmd("git status && rm -rf /")), call("bash", cmd("npm run build")),
	call("bash", cmd("go test ./... | tee log")), call("bash", cmd("make")),
	call("read_file", file(".env")), call("read_file", file("/home/u/proj/src/a.go")),
	call("read_file", file("/etc/hosts")), call("read_file", file("/home/u/.ssh/id")),
	call("grep", map[string]any{"pattern": "x", "path": "/home/u/proj/src"}), call("glob", map[string]any{"pattern": "**/*.go"}),
	call("write_file", file("/home/u/proj/src/a.go")), call("edit_file", file("/home/u/proj/.git/config")),
	call("write_file", file("/tmp/x")), call("edit_file", file("README.md")),
	call("web_fetch", fetch("https://example.com/x")), call("web_fetch", fetch("https://other.org/")),
	call("web_search", map[string]any{"query": "q"}), call("mcp__db__query", nil), call("mcp__db__drop", nil),
	call("mcp__gh__issue", nil), call("spawn_subagent", map[string]any{"subagent_type": "explorer"}),
}

func randomSet(r *rand.Rand) Set {
	pick := func() []Rule {
		var out []Rule
		for range r.IntN(4) {
			rule, err := ParseRule(rulePool[r.IntN(len(rulePool))])
			if err != nil {
				panic(err) // the pool is fixed: a bad entry is this test's bug
			}
			out = append(out, rule)
		}
		return out
	}
	return Set{Allow: pick(), Ask: pick(), Deny: pick()}
}

// TestChildNeverWidens builds random trees of policies (depth up to 5,
// random modes and rules) and checks, at every node and for every call,
// that the node's decision is at least as strict as its parent's, and that
// Child refuses exactly the modes wider than an ancestor's.
func TestChildNeverWidens(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(20, 1))
	var seen [Deny + 1]int
	var refused int
	var walk func(p Policy, depth int)
	walk = func(p Policy, depth int) {
		if depth == 5 {
			return
		}
		for range 1 + r.IntN(2) {
			def := Policy{Mode: modes[r.IntN(len(modes))], Set: randomSet(r)}
			child, err := p.Child(def)
			wider := def.Mode.Wider(p.Mode)
			for _, a := range p.ancestors {
				wider = wider || def.Mode.Wider(a.Mode)
			}
			if wider != (err != nil) {
				t.Fatalf("Child(%s) under %s (depth %d): err %v, wider %v", def.Mode, p.Mode, depth, err, wider)
			}
			if err != nil {
				refused++
				continue
			}
			for _, c := range callPool {
				pd, cd := p.Decide(c), child.Decide(c)
				seen[cd.Outcome]++
				if cd.Outcome < pd.Outcome || cd.Outcome == Default {
					t.Fatalf("depth %d: %s %s: child %v (%s) is wider than parent %v (%s)",
						depth+1, c.Tool, c.Input, cd.Outcome, cd.Reason, pd.Outcome, pd.Reason)
				}
			}
			walk(child, depth+1)
		}
	}
	for range 60 {
		root := Policy{Mode: modes[r.IntN(len(modes))], Set: randomSet(r)}
		walk(root, 0)
	}
	// The trees must have exercised every answer and the refusal, or the
	// check above proved little.
	if seen[Allow] == 0 || seen[Ask] == 0 || seen[Deny] == 0 || refused == 0 {
		t.Fatalf("degenerate trees: outcomes %v, refused %d", seen, refused)
	}
}
