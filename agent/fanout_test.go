package agent_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/agent"
)

func ids(ts []agent.FanTask) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func TestPlanFanOutOrdersByDependencies(t *testing.T) {
	t.Parallel()
	tasks := []agent.FanTask{
		{ID: "report", DependsOn: []string{"a", "b"}},
		{ID: "a"},
		{ID: "b", DependsOn: []string{"a"}},
		{ID: "c"},
	}
	order, err := agent.PlanFanOut(tasks)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(order); !slices.Equal(got, []string{"a", "b", "report", "c"}) {
		t.Fatalf("order %v", got)
	}
}

func TestPlanFanOutRejectsBadGraphs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		tasks []agent.FanTask
		want  []string
	}{
		{"cycle", []agent.FanTask{{ID: "a", DependsOn: []string{"c"}}, {ID: "b", DependsOn: []string{"a"}}, {ID: "c", DependsOn: []string{"b"}}},
			[]string{"cycle: a -> c -> b -> a"}},
		{"self", []agent.FanTask{{ID: "a", DependsOn: []string{"a"}}}, []string{`"a" depends on itself`}},
		{"missing", []agent.FanTask{{ID: "a", DependsOn: []string{"z"}}}, []string{`"a" depends on "z", which is not a task`}},
		{"duplicate and empty", []agent.FanTask{{ID: "a"}, {ID: "a"}, {ID: " "}}, []string{`"a" is used twice`, "task 3 has no id"}},
	}
	for _, c := range cases {
		_, err := agent.PlanFanOut(c.tasks)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
}

func TestMergeConcat(t *testing.T) {
	t.Parallel()
	got := agent.MergeConcat([]agent.FanResult{
		{ID: "a", State: agent.StateCompleted, Report: " found 3 \n"},
		{ID: "b", State: agent.StateTimedOut, Incomplete: true, Report: "half"},
		{ID: "c", State: agent.StateSkipped, Skipped: "b did not complete"},
	})
	want := "## a\nfound 3\n\n## b (timed_out, incomplete)\nhalf\n\n## c (skipped: b did not complete)"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestMergeVote(t *testing.T) {
	t.Parallel()
	done := func(r string) agent.FanResult { return agent.FanResult{State: agent.StateCompleted, Report: r} }
	v := agent.MergeVote([]agent.FanResult{done("Paris"), done("  paris "), done("Lyon"), done("PARIS\n"),
		{State: agent.StateFailed, Report: "Lyon"}, {State: agent.StateCompleted, Incomplete: true, Report: "Lyon"}})
	if v.Answer != "Paris" || v.Votes != 3 || v.Counted != 4 || v.Tie != nil {
		t.Fatalf("vote %+v", v)
	}
	tie := agent.MergeVote([]agent.FanResult{done("yes"), done("No"), done("no  "), done("YES")})
	if tie.Answer != "" || tie.Votes != 2 || !slices.Equal(tie.Tie, []string{"yes", "No"}) {
		t.Fatalf("tie %+v", tie)
	}
	if none := agent.MergeVote(nil); none.Answer != "" || none.Counted != 0 {
		t.Fatalf("no answers %+v", none)
	}
}
