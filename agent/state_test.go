package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// A run that stops to wait leaves its instance in the state it waits in:
// asking after a turn that asked its parent, paused when its inbox said
// pause. Neither is an end, so neither has EndedAt.
func TestASuspendedRunWaitsAskingOrPaused(t *testing.T) {
	t.Parallel()
	rt := &runtime{}
	asks := recorded(t, `rules: [{tool_calls: [{name: ask_parent, input: {question: "Which branch?"}}]}]`)
	o, err := (&agent.Runner{Questions: rt}).Run(context.Background(), agent.Task{Task: "go", Model: asks, ModelName: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	root := o.Instances[0]
	if o.Result.StopReason != loop.StopSuspended || root.State != instance.Asking || !root.EndedAt.IsZero() ||
		root.Root != root.ID || len(rt.asked) != 1 {
		t.Fatalf("asking root: stop %s, record %+v, asked %q", o.Result.StopReason, root, rt.asked)
	}

	works := recorded(t, `
rules:
  - match: {tool_result: "noop ran"}
    text: "done"
  - tool_calls: [{name: noop, input: {}}]
`)
	pause := func(context.Context, int) ([]string, loop.StopReason, error) { return nil, loop.StopSuspended, nil }
	o, err = (&agent.Runner{}).Run(context.Background(), agent.Task{Task: "go", Model: works, ModelName: "fake",
		Tools: tool.MustSet(nop("noop")), Inbox: pause})
	if err != nil {
		t.Fatal(err)
	}
	if root := o.Instances[0]; o.Result.StopReason != loop.StopSuspended || root.State != instance.Paused || !root.EndedAt.IsZero() {
		t.Fatalf("paused root: stop %s, record %+v", o.Result.StopReason, root)
	}
}

// Asked looks at the last turn only, and only at an ask_parent call that
// succeeded: a failed ask does not suspend, so a suspension after it was a
// pause.
func TestAsked(t *testing.T) {
	t.Parallel()
	turn := llm.Message{Role: llm.Assistant, Content: []llm.Block{
		llm.ToolUse("c1", "noop", nil), llm.ToolUse("c2", agentdef.AskTool, nil)}}
	result := func(id string, isErr bool) llm.Block {
		return llm.Block{Type: llm.TypeToolResult, ToolUseID: id, Text: "r", IsError: isErr}
	}
	suspended := func(results ...llm.Block) *loop.Result {
		return &loop.Result{StopReason: loop.StopSuspended, Messages: []llm.Message{llm.UserText("go"), turn},
			Pending: &llm.Message{Role: llm.User, Content: results}}
	}
	for _, c := range []struct {
		name string
		res  *loop.Result
		want bool
	}{
		{"asked", suspended(result("c1", false), result("c2", false)), true},
		{"the ask failed", suspended(result("c1", false), result("c2", true)), false},
		{"another tool's result", suspended(result("c1", false)), false},
		{"not suspended", &loop.Result{StopReason: loop.StopCompleted, Messages: []llm.Message{turn}}, false},
		{"nothing pending", &loop.Result{StopReason: loop.StopSuspended, Messages: []llm.Message{turn}}, false},
	} {
		if got := agent.Asked(c.res); got != c.want {
			t.Errorf("%s: Asked = %v", c.name, got)
		}
	}
}

func TestStateOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		stop    loop.StopReason
		asked   bool
		err     bool
		want    instance.State
		partial bool
	}{
		{loop.StopCompleted, false, false, instance.Completed, false},
		{loop.StopRefusal, false, false, instance.Completed, false},
		{loop.StopWallTime, false, false, instance.TimedOut, true},
		{loop.StopCancelled, false, true, instance.Cancelled, true},
		{loop.StopModelError, false, true, instance.Failed, true},
		{loop.StopStepError, false, false, instance.Failed, true},
		{loop.StopSuspended, true, false, instance.Asking, false},
		{loop.StopSuspended, false, false, instance.Paused, false},
		{loop.StopBudget, false, false, instance.Completed, true},
		{loop.StopMaxTurns, false, false, instance.Completed, true},
		{"", false, true, instance.Failed, true},
	} {
		var err error
		if c.err {
			err = context.Canceled
		}
		got, partial := agent.StateOf(c.stop, c.asked, err)
		if got != c.want || partial != c.partial {
			t.Errorf("StateOf(%q, asked %v, err %v) = %s, %v; want %s, %v", c.stop, c.asked, err, got, partial, c.want, c.partial)
		}
	}
}

// A relay built from a record carries what the record holds, its duration
// from its times, and says so when the store could not read all of it.
func TestRelayOf(t *testing.T) {
	t.Parallel()
	cost := 0.25
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	rec := &instance.Record{ID: "i-kid", Type: "explorer", State: instance.Completed, Report: "found it", StopReason: "completed",
		Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}, Cost: &cost, Turns: 2, ToolCalls: 3, Artifacts: []string{"a.go"},
		CreatedAt: start, EndedAt: start.Add(4 * time.Second)}
	r := agent.RelayOf(rec)
	if r.ID != "i-kid" || r.State != instance.Completed || r.Report != "found it" || r.Duration != 4*time.Second ||
		r.Usage != rec.Usage || r.Cost != &cost || r.Turns != 2 || r.ToolCalls != 3 || len(r.Artifacts) != 1 || r.Failed() {
		t.Fatalf("relay %+v", r)
	}
	r.Artifacts[0] = "changed"
	if rec.Artifacts[0] != "a.go" {
		t.Fatal("the relay shares the record's artifact list")
	}

	rec.Artifacts, rec.Problems = nil, []string{"its artifacts (the files it wrote) could not be read: bad JSON"}
	text, failed := agent.RelayOf(rec).ToolResult()
	if failed || strings.Contains(text, "artifacts:") || !strings.Contains(text, "found it") ||
		!strings.Contains(text, "record is damaged: its artifacts (the files it wrote) could not be read") {
		t.Fatalf("damaged record's relay:\n%s", text)
	}
}
