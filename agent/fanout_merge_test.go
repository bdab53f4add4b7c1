package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
)

const fanSummarizeScenario = `
rules:
  - match: {system: "merge the reports", last_user: "(?s)at most 400 characters.*## a\na is red.*## b\nb is blue"}
    text: "a is red and b is blue"
  - match: {system: "merge the reports"}
    text: "unexpected: {{.LastUser}}"
  - match: {system: "read-only explorer", last_user: "color of a"}
    text: "a is red"
  - match: {system: "read-only explorer", last_user: "color of b"}
    text: "b is blue"
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          merge: summarize
          limit: 400
          tasks:
            - {id: a, subagent_type: explorer, task: "color of a"}
            - {id: b, subagent_type: explorer, task: "color of b"}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

// summarize: one more model call, a child of deputy's own with no tools,
// merges the reports within the limit; its usage is the tree's.
func TestFanOutSummarize(t *testing.T) {
	t.Parallel()
	o := newLocal(t, fanSummarizeScenario).run(t)
	got := o.Result.Answer
	if !strings.HasPrefix(got, "a is red and b is blue\n\nTasks:\n- a: completed (i-") || strings.Contains(got, "## a") {
		t.Fatalf("summarized result %q", got)
	}
	if len(o.Instances) != 4 {
		t.Fatalf("%d instances, want the root, two tasks and the summary", len(o.Instances))
	}
	var sum instance.Record
	var children llm.Usage
	for _, in := range o.Instances[1:] {
		children.Add(in.Usage)
		if in.Type == "fan-out-summary" {
			sum = in
		}
	}
	if sum.Turns != 1 || sum.Usage.Total() == 0 || sum.State != instance.Completed {
		t.Fatalf("summary instance %+v", sum)
	}
	if want := o.Instances[0].Usage.Total() + children.Total(); o.Usage.Total() != want {
		t.Errorf("tree usage %d, want the root's and every child's, the summary's included: %d", o.Usage.Total(), want)
	}
}

const fanSummarizeFailsScenario = `
rules:
  - match: {system: "merge the reports"}
    fault: {kind: server_error}
  - match: {system: "read-only explorer"}
    text: "found {{.LastUser}}"
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          merge: summarize
          tasks:
            - {id: a, subagent_type: explorer, task: "x"}
            - {id: b, subagent_type: explorer, task: "y"}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

// A summary that fails loses nothing: the reports come back as concat.
func TestFanOutSummarizeFailureKeepsReports(t *testing.T) {
	t.Parallel()
	got := newLocal(t, fanSummarizeFailsScenario).run(t).Result.Answer
	for _, want := range []string{"summarize: the merge did not complete (failed: turn 1: fake: 500", "## a\nfound x", "## b\nfound y"} {
		if !strings.Contains(got, want) {
			t.Errorf("result lacks %q:\n%s", want, got)
		}
	}
}

const fanJudgeScenario = `
rules:
  - match: {system: "reviewer", last_user: "(?s)Answer 1:\nParis.*Answer 2:\nLyon"}
    text: "2\nLyon is the one the task asked for."
  - match: {system: "read-only explorer", last_user: "q1"}
    text: "Paris"
  - match: {system: "read-only explorer"}
    text: "Lyon"
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          merge: vote
          judge: reviewer
          format: json
          tasks:
            - {id: q1, subagent_type: explorer, task: "q1"}
            - {id: q2, subagent_type: explorer, task: "q2"}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

// A judge breaks what the majority cannot (a tie here): it picks by
// number, and the JSON format carries every result as data.
func TestFanOutJudgeAndJSON(t *testing.T) {
	t.Parallel()
	o := newLocal(t, fanJudgeScenario).run(t)
	var out agent.FanOutput
	if err := json.Unmarshal([]byte(o.Result.Answer), &out); err != nil {
		t.Fatalf("fan_out json: %v\n%s", err, o.Result.Answer)
	}
	v := out.Vote
	if v == nil || v.Answer != "Lyon" || v.Votes != 1 || v.Counted != 2 || v.Judge == "" || len(v.Tie) != 0 {
		t.Fatalf("judged vote %+v", v)
	}
	if !strings.HasPrefix(out.Merged, "vote: judge i-") || out.Merger == nil || out.Merger.Type != "reviewer" {
		t.Fatalf("merged %q, merger %+v", out.Merged, out.Merger)
	}
	if len(out.Results) != 2 {
		t.Fatalf("results %+v", out.Results)
	}
	for _, r := range out.Results {
		if r.State != instance.Completed || r.Instance == "" || r.Usage.Total() == 0 || r.Type != "explorer" {
			t.Errorf("result %+v", r)
		}
	}
}

// A judge whose answer names no answer in range decides nothing: the
// tally (here a tie) stands, reported as such.
func TestFanOutJudgeWithoutAPick(t *testing.T) {
	t.Parallel()
	s := strings.Replace(fanJudgeScenario, `text: "2\nLyon is`, `text: "7\nLyon is`, 1)
	s = strings.Replace(s, "format: json", "format: text", 1)
	got := newLocal(t, s).run(t).Result.Answer
	if !strings.HasPrefix(got, "vote: judge i-") || !strings.Contains(got, "picked no answer (7 Lyon is") {
		t.Fatalf("result %q", got)
	}
}

// A judge goes with vote, and must be a type that exists.
func TestFanOutJudgeRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ edit, want string }{
		{"judge: reviewer", "judge goes with merge vote"},
		{"judge: nosuch", `judge "nosuch" is not a subagent type`},
	} {
		s := strings.Replace(fanJudgeScenario, "judge: reviewer", c.edit, 1)
		if c.want == "judge goes with merge vote" {
			s = strings.Replace(s, "merge: vote", "merge: concat", 1)
		}
		got := newLocal(t, s).run(t).Result.Answer
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q", c.edit, got)
		}
	}
}

// The delegation guidance ends the system prompt of an instance offered
// spawning, and only of one.
func TestDelegationGuidance(t *testing.T) {
	t.Parallel()
	const scenario = `
rules:
  - match: {system: "Delegating: match the number"}
    text: "guided"
  - match: {}
    text: "unguided"
`
	l := newLocal(t, scenario)
	if got := l.run(t).Result.Answer; got != "guided" {
		t.Errorf("a root that may spawn answered %q", got)
	}
	l = newLocal(t, scenario)
	l.runner.MaxDepth = -1
	if got := l.run(t).Result.Answer; got != "unguided" {
		t.Errorf("a root that may not spawn answered %q", got)
	}
}

// A task that asks for a fence this build cannot provide is refused, never
// run unfenced; the others run.
func TestFanOutTaskIsolation(t *testing.T) {
	t.Parallel()
	l := newLocal(t, `
rules:
  - match: {system: "read-only explorer"}
    text: "looked"
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          tasks:
            - {id: fenced, subagent_type: explorer, task: "x", isolation: sandbox}
            - {id: open, subagent_type: explorer, task: "y", isolation: none}
            - {id: lowered, subagent_type: boxed, task: "z", isolation: none}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`)
	l.task.Volatile = []*agentdef.Definition{{Name: "boxed", Description: "d", Isolation: agentdef.IsolationSandbox}}
	o := l.run(t)
	got := o.Result.Answer
	if !strings.Contains(got, "## lowered (failed)\nspawn refused: boxed runs with isolation sandbox; a task cannot lower it to none") {
		t.Errorf("a task lowered its type's isolation:\n%s", got)
	}
	if !strings.Contains(got, "## fenced (failed)\nspawn refused: explorer asks for isolation sandbox") ||
		!strings.Contains(got, "## open\nlooked") || len(o.Instances) != 2 {
		t.Fatalf("%d instances; result:\n%s", len(o.Instances), got)
	}
}
