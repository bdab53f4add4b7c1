package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
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
		{ID: "a", State: instance.Completed, Report: " found 3 \n"},
		{ID: "b", State: instance.TimedOut, Incomplete: true, Report: "half"},
		{ID: "c", Skipped: "b did not complete"},
	})
	want := "## a\nfound 3\n\n## b (timed_out, incomplete)\nhalf\n\n## c (skipped: b did not complete)"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestMergeVote(t *testing.T) {
	t.Parallel()
	done := func(r string) agent.FanResult { return agent.FanResult{State: instance.Completed, Report: r} }
	v := agent.MergeVote([]agent.FanResult{done("Paris"), done("  paris "), done("Lyon"), done("PARIS\n"),
		{State: instance.Failed, Report: "Lyon"}, {State: instance.Completed, Incomplete: true, Report: "Lyon"}})
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

const fanOutToolScenario = `
rules:
  - match: {system: "read-only explorer", last_user: "count a"}
    text: "a has 3"
  - match: {system: "read-only explorer", last_user: "count b"}
    text: "b has 4"
  - match: {system: "read-only explorer", last_user: "(?s)## a\na has 3.*## b\nb has 4.*add them"}
    text: "total 7"
  - match: {system: "read-only explorer"}
    text: "unexpected: {{.LastUser}}"
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          tasks:
            - {id: sum, subagent_type: explorer, task: "add them", depends_on: [a, b]}
            - {id: a, subagent_type: explorer, task: "count a"}
            - {id: b, subagent_type: explorer, task: "count b", context: "b lives in b.txt"}
            - {id: bad, subagent_type: nosuch, task: "x"}
            - {id: after-bad, subagent_type: explorer, task: "count a", depends_on: [bad]}
            - {id: anyway, subagent_type: explorer, task: "count b", depends_on: [bad], run_anyway: true}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

// fan_out runs independent tasks, then the one that depends on them with
// their reports in its task; a failed task's dependents are skipped unless
// they run anyway; the reports come back in task order under headings.
func TestFanOutTool(t *testing.T) {
	t.Parallel()
	l := newLocal(t, fanOutToolScenario)
	o := l.run(t)
	got := o.Result.Answer
	for _, want := range []string{"## sum\ntotal 7", "## a\na has 3", "## b\nb has 4", "## bad (failed)",
		"unknown subagent_type", "## after-bad (skipped: task bad it depends on ended failed)", "## anyway\nb has 4"} {
		if !strings.Contains(got, want) {
			t.Errorf("the merged reports lack %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "## sum") > strings.Index(got, "## a\n") {
		t.Errorf("reports not in task order:\n%s", got)
	}
	// sum, a, b, anyway ran; bad never started; after-bad was skipped.
	if len(o.Instances) != 5 {
		t.Errorf("%d instances, want the root and 4 children", len(o.Instances))
	}
	for _, in := range o.Instances[1:] {
		if m, _ := o.Transcript(in.ID); in.Description == "b" && !strings.Contains(m[0].Text(), "b lives in b.txt") {
			t.Errorf("task b's context is not in its task: %q", m[0].Text())
		}
	}
}

const fanVoteScenario = `
rules:
  - match: {system: "read-only explorer", last_user: "q1"}
    text: "Paris"
  - match: {system: "read-only explorer", last_user: "q2"}
    text: " paris "
  - match: {system: "read-only explorer"}
    text: "Lyon"
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          merge: vote
          tasks:
            - {id: q1, subagent_type: explorer, task: "q1"}
            - {id: q2, subagent_type: explorer, task: "q2"}
            - {id: q3, subagent_type: explorer, task: "q3"}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

func TestFanOutVote(t *testing.T) {
	t.Parallel()
	o := newLocal(t, fanVoteScenario).run(t)
	if !strings.HasPrefix(o.Result.Answer, `vote: "Paris" with 2 of 3 answers`) {
		t.Fatalf("vote result %q", o.Result.Answer)
	}
}

const fanCapScenario = `
rules:
  - match: {system: "subagent working", turn: 1}
    tool_calls: [{name: pair, input: {}}]
  - match: {system: "subagent working"}
    text: "done"
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          tasks:
            - {id: t1, subagent_type: general-purpose, task: "1"}
            - {id: t2, subagent_type: general-purpose, task: "2"}
            - {id: t3, subagent_type: general-purpose, task: "3"}
            - {id: t4, subagent_type: general-purpose, task: "4"}
            - {id: t5, subagent_type: general-purpose, task: "5"}
  - match: {turn: 2}
    text: "ok"
`

// fan_out's children take the same slots as spawns: max_parallel holds.
func TestFanOutHoldsMaxParallel(t *testing.T) {
	t.Parallel()
	// The children inside hold until the three others have said they wait
	// for a slot: then at most two ran at once, the others queued.
	all := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	queued := map[string]bool{}
	pair := fnTool{name: "pair", run: func(ctx context.Context) (string, error) {
		select {
		case <-all:
			return "paired", nil
		case <-time.After(20 * time.Second): // a guard, not a wait: fails a broken cap instead of hanging
			return "", errors.New("the others never queued")
		}
	}}
	l := newLocal(t, fanCapScenario, pair)
	l.runner.MaxParallel = 2
	record := l.runner.OnEvent
	l.runner.OnEvent = func(e agent.Event) {
		record(e)
		if e.Kind == agent.EventQueued {
			mu.Lock()
			queued[e.Instance] = true
			if len(queued) == 3 {
				once.Do(func() { close(all) })
			}
			mu.Unlock()
		}
	}
	o := l.run(t)
	if len(o.Instances) != 6 || !strings.Contains(o.Result.Answer, "ok") {
		t.Fatalf("%d instances, answer %q", len(o.Instances), o.Result.Answer)
	}
	running, most := 0, 0
	for _, e := range l.events {
		if e.Depth == 0 {
			continue
		}
		switch e.Kind {
		case agent.EventSpawned:
			running++
			most = max(most, running)
		case agent.EventEnded:
			running--
		}
	}
	if most != 2 {
		t.Fatalf("at most %d children at once, want 2", most)
	}
	for _, in := range o.Instances[1:] {
		if in.State != instance.Completed {
			t.Errorf("child %s: %s %s", in.Description, in.State, in.Error)
		}
	}
}

// fnTool is a read-only test tool made of a function.
type fnTool struct {
	name string
	run  func(context.Context) (string, error)
}

func (f fnTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: f.name, Description: f.name, InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (fnTool) ReadOnly() bool                                               { return true }
func (f fnTool) Run(ctx context.Context, _ json.RawMessage) (string, error) { return f.run(ctx) }

// The tasks that depend on none are listed together, in task order, before
// any of them starts (one EventListed, then each one's EventCreated); a task
// that depends on others, or that cannot be spawned, is not among them.
func TestFanOutListsReadyTasksTogether(t *testing.T) {
	t.Parallel()
	l := newLocal(t, fanOutToolScenario)
	var mu sync.Mutex
	var kinds []string
	record := l.runner.OnEvent
	l.runner.OnEvent = func(e agent.Event) {
		record(e)
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case agent.EventListed:
			var ids []string
			for _, c := range e.Listed {
				if c.Kind != agent.EventCreated || c.Spawned == nil || c.Parent != e.Instance {
					t.Errorf("listed %+v, not a child's EventCreated under %s", c, e.Instance)
				}
				ids = append(ids, c.Spawned.Task)
			}
			kinds = append(kinds, "listed "+strings.Join(ids, ","))
		case agent.EventCreated:
			kinds = append(kinds, "created "+e.Spawned.Task)
		case agent.EventSpawned:
			if e.Depth > 0 {
				kinds = append(kinds, "spawned")
			}
		}
	}
	l.run(t)
	mu.Lock()
	defer mu.Unlock()
	// a and b are ready; bad cannot be spawned (an unknown type), so it is
	// not listed; the others wait for tasks.
	want := []string{"listed count a,Context:\nb lives in b.txt\n\ncount b", "created count a", "created Context:\nb lives in b.txt\n\ncount b"}
	if len(kinds) < 3 || !reflect.DeepEqual(kinds[:3], want) {
		t.Fatalf("events %q, want them to begin with %q", kinds, want)
	}
	if n := strings.Count(strings.Join(kinds, "\n"), "listed"); n != 1 {
		t.Fatalf("%d EventListed, want 1: %q", n, kinds)
	}
}
