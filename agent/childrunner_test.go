package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
)

// childRunner is a ChildRunner that runs children in place with a step
// runner of its own, or hands back ends it holds as if recorded by an
// earlier execution.
type childRunner struct {
	mu       sync.Mutex
	ids      []string
	recorded map[string]agent.ChildEnd // by child id: returned without running
	ran      map[string]agent.ChildEnd
	steps    *countingSteps
}

func (c *childRunner) StartChild(context.Context, string, func(context.Context, agent.ChildEnv) agent.ChildEnd) error {
	return errors.New("not in this test")
}

func (c *childRunner) RunChild(ctx context.Context, id string, work func(context.Context, agent.ChildEnv) agent.ChildEnd) (agent.ChildEnd, error) {
	c.mu.Lock()
	c.ids = append(c.ids, id)
	end, ok := c.recorded[id]
	c.mu.Unlock()
	if ok {
		return end, nil
	}
	end = work(ctx, agent.ChildEnv{Steps: c.steps})
	c.mu.Lock()
	c.ran[id] = end
	c.mu.Unlock()
	return end, nil
}

// countingSteps is loop.Direct that counts the model calls it runs.
type countingSteps struct {
	loop.Direct
	mu     sync.Mutex
	models int
}

func (s *countingSteps) Model(ctx context.Context, turn int, p loop.StepPurpose, gen func(context.Context) (*llm.Response, error)) (*llm.Response, error) {
	s.mu.Lock()
	s.models++
	s.mu.Unlock()
	return s.Direct.Model(ctx, turn, p, gen)
}

const twoExplorers = `
rules:
  - match: {system: "read-only explorer", last_user: "one"}
    text: "first report"
  - match: {system: "read-only explorer"}
    text: "second report"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "look one"}}
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "look two"}}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}} | {{index .ToolResults 1}}"
`

// Under a ChildRunner, children run with its steps, are named after their
// spawn call (the same names on a replay of the same transcript), and a
// child it reports as ended earlier is taken in without running: its
// relay reaches the parent, its record the outcome, its cost the roll-up.
func TestChildRunnerRunsAndReattaches(t *testing.T) {
	t.Parallel()
	run := func(cr *childRunner) *agent.Outcome {
		l := newLocal(t, twoExplorers)
		l.runner.Children = cr
		l.task.ID = "i-root"
		return l.run(t)
	}
	first := &childRunner{ran: map[string]agent.ChildEnd{}, steps: &countingSteps{}}
	o := run(first)
	if len(first.ids) != 2 || first.steps.models != 2 || len(o.Instances) != 3 {
		t.Fatalf("ids %v, child model calls %d, instances %d", first.ids, first.steps.models, len(o.Instances))
	}
	named := slices.Sorted(slices.Values(first.ids))
	if kids := []string{o.Instances[1].ID, o.Instances[2].ID}; !slices.Equal(slices.Sorted(slices.Values(kids)), named) {
		t.Errorf("children %v, the runner saw %v", kids, first.ids)
	}
	for _, in := range o.Instances[1:] {
		if !strings.HasPrefix(in.ID, "i-") || in.State != instance.Completed {
			t.Errorf("child %+v", in)
		}
	}

	// The replay: the same transcript names the same children; the first
	// ended before the crash, the second resumes.
	done := first.ran[o.Instances[1].ID]
	done.Relay.Report = "first report, as recorded"
	done.Instance.Usage = llm.Usage{InputTokens: 1000, OutputTokens: 10}
	done.Relay.Usage = done.Instance.Usage
	second := &childRunner{ran: map[string]agent.ChildEnd{}, steps: &countingSteps{},
		recorded: map[string]agent.ChildEnd{o.Instances[1].ID: done}}
	o2 := run(second)
	if got := slices.Sorted(slices.Values(second.ids)); !slices.Equal(got, named) {
		t.Fatalf("a replay named the children %v, the first run %v", got, named)
	}
	if second.steps.models != 1 {
		t.Errorf("the recorded child ran again: %d child model calls", second.steps.models)
	}
	if !strings.Contains(o2.Result.Answer, "first report, as recorded") || !strings.Contains(o2.Result.Answer, "second report") {
		t.Errorf("root answer %q", o2.Result.Answer)
	}
	adopted := o2.Instances[1]
	if adopted.ID != o.Instances[1].ID || adopted.State != instance.Completed || adopted.Usage.InputTokens != 1000 {
		t.Errorf("adopted child %+v", adopted)
	}
	if o2.Usage.InputTokens < 1000 {
		t.Errorf("the tree's usage leaves out the adopted child: %+v", o2.Usage)
	}
}
