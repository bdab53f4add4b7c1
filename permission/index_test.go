package permission

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// bashPool adds to rulePool the bash forms the index treats apart: rules
// with no fixed first word, operators, assignments, exact lines.
var bashPool = []string{
	"Bash(git status)", "Bash(git diff:*)", "Bash(git*)", "Bash(* --force)", "Bash(:*)", "Bash(make && make install)",
	"Bash(FOO=1 make:*)", "Bash(make:*)", "Bash(rm -rf *)", "Bash(tail:*)", "Bash(echo *)", "Bash(git status && git diff)",
	"Bash(npm test *)", "Bash(ls)", "mcp__db__drop", "mcp__gh", "Grep(/src/**)", "Glob", "Write", "Skill(pdf)",
}

var bashCalls = []Call{
	call("bash", cmd("git status && git diff")), call("bash", cmd("git diff --stat | tail -n 5")),
	call("bash", cmd("FOO=1 make && make install")), call("bash", cmd("X=2 rm -rf /tmp/a; echo done")),
	call("bash", cmd("gitk --all")), call("bash", cmd("git push --force")), call("bash", cmd("echo $(git status) `ls`")),
	call("bash", cmd("npm test")), call("bash", cmd("ls")), call("bash", cmd("echo 'unclosed")),
	call("bash", cmd("")), call("bash", cmd("  make   install ")), call("bash", cmd("make && make install")),
	call("skill", map[string]any{"name": "pdf"}), call("mcp__gh", nil), call("mcp__x__y", nil),
}

// TestIndexDecidesAsTheWalk: over random sets of up to 30 rules, a Set
// built with NewSet (looking only at the rules its index picks) gives the
// same outcome and names the same rule as the same rules walked whole.
func TestIndexDecidesAsTheWalk(t *testing.T) {
	t.Parallel()
	pool := append(append([]string{}, rulePool...), bashPool...)
	calls := append(append([]Call{}, callPool...), bashCalls...)
	r := rand.New(rand.NewPCG(20, 2))
	pick := func() []Rule {
		var out []Rule
		for range r.IntN(11) {
			out = append(out, mustRules(t, pool[r.IntN(len(pool))])...)
		}
		return out
	}
	var outcomes [Deny + 1]int
	for range 400 {
		walk := Set{Allow: pick(), Ask: pick(), Deny: pick()}
		indexed := NewSet(walk.Allow, walk.Ask, walk.Deny)
		if indexed.current() == nil {
			t.Fatal("NewSet built no index")
		}
		for _, c := range calls {
			want, got := walk.Decide(c), indexed.Decide(c)
			if want != got {
				t.Fatalf("%s %s over allow %v ask %v deny %v:\nindexed %+v\nwalk    %+v", c.Tool, c.Input, walk.Allow, walk.Ask, walk.Deny, got, want)
			}
			outcomes[got.Outcome]++
		}
	}
	for o, n := range outcomes {
		if n == 0 {
			t.Fatalf("no %v decision among the random sets: %v", Outcome(o), outcomes)
		}
	}
}

// A Set changed after it was indexed (a rule appended, a list replaced) is
// not decided by the stale index.
func TestStaleIndexIsNotUsed(t *testing.T) {
	t.Parallel()
	s := NewSet(mustRules(t, "Bash(git:*)"), nil, nil)
	s.Deny = append(s.Deny, mustRules(t, "Bash(git push:*)")...)
	if d := s.Decide(call("bash", cmd("git push"))); d.Outcome != Deny {
		t.Fatalf("appended deny rule ignored: %+v", d)
	}
	s.Allow = mustRules(t, "Read")
	if d := s.Decide(call("bash", cmd("git status"))); d.Outcome != Default {
		t.Fatalf("replaced allow list ignored: %+v", d)
	}
	// Policy.Child indexes the sets it keeps.
	p, err := Policy{Mode: ModeDefault, Set: s}.Child(Policy{Set: Set{Deny: mustRules(t, "Read(.env)")}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Set.current() == nil || p.ancestors[0].Set.current() == nil {
		t.Fatal("Child left a set unindexed")
	}
}

// A Set is read from many goroutines at once (every instance of a tree
// decides its calls against the same ancestors); -race checks it.
func TestIndexedSetConcurrentDecide(t *testing.T) {
	t.Parallel()
	s := NewSet(mustRules(t, "Bash(git:*)", "Read(/src/**)"), mustRules(t, "Bash(git push:*)"), mustRules(t, "Read(.env)"))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				for _, c := range callPool {
					s.Decide(c)
				}
			}
		})
	}
	wg.Wait()
}
