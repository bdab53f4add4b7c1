package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// probe is a read-only tool that says where it runs.
type probe struct{ where string }

func (probe) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "probe", Description: "Says where it runs.", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (probe) ReadOnly() bool                                         { return true }
func (p probe) Run(context.Context, json.RawMessage) (string, error) { return "in " + p.where, nil }

// fencer is a Fencer that records what it is asked.
type fencer struct {
	refuse error
	keep   error // End's error when the work is kept
	note   string

	mu    sync.Mutex
	built []string
	ended map[string]bool // id → kept
}

func (f *fencer) Check(def *agentdef.Definition) error { return f.refuse }

func (f *fencer) Fence(_ context.Context, id string, def *agentdef.Definition) (*agent.Fence, error) {
	f.mu.Lock()
	f.built = append(f.built, id)
	f.mu.Unlock()
	return &agent.Fence{Tools: tool.MustSet(probe{where: "the fence of " + id}), Note: f.note,
		End: func(_ context.Context, kept bool) ([]string, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.ended == nil {
				f.ended = map[string]bool{}
			}
			f.ended[id] = kept
			if kept {
				return []string{"branch deputy/" + id + ": 1 file, +1 -0"}, f.keep
			}
			return nil, nil
		}}, nil
}

const fenceScenario = `
rules:
  - match: {system: "You work fenced", last_user: "^fail$"}
    fault: {kind: server_error}
  - match: {system: "You work fenced", turn: 1}
    tool_calls: [{name: probe, input: {}}]
  - match: {system: "You work fenced"}
    text: "probe said: {{index .ToolResults 0}}"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: boxed, task: "work"}}
      - {name: spawn_subagent, input: {subagent_type: boxed, task: "fail"}}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}\n=====\n{{index .ToolResults 1}}"
`

func fencedLocal(t *testing.T, f agent.Fencer) *local {
	t.Helper()
	l := newLocal(t, fenceScenario, probe{where: "the parent's workspace"})
	l.runner.Fencer = f
	l.task.Volatile = []*agentdef.Definition{{Name: "boxed", Description: "Works in a sandbox.",
		SystemPrompt: "You work fenced.", Tools: []string{"probe"}, Isolation: agentdef.IsolationSandbox, Worktree: true}}
	return l
}

// A fenced child's calls run in its fence; its work is kept when it
// completes (the fence's artifacts join its relay) and discarded when it
// fails.
func TestFenceRunsToolsInsideAndEndsIt(t *testing.T) {
	t.Parallel()
	f := &fencer{note: "unsandboxed: allowed by the config"}
	o := fencedLocal(t, f).run(t)
	ok, failed, _ := strings.Cut(o.Result.Answer, "=====")
	if len(o.Instances) != 3 || len(f.built) != 2 {
		t.Fatalf("%d instances, fences %v", len(o.Instances), f.built)
	}
	good, bad := o.Instances[1], o.Instances[2]
	if !strings.Contains(ok, "probe said: in the fence of "+good.ID) || !strings.Contains(ok, "[deputy] unsandboxed: allowed by the config") {
		t.Errorf("the completed child's relay:\n%s", ok)
	}
	if !strings.Contains(ok, "branch deputy/"+good.ID) || len(good.Artifacts) != 1 {
		t.Errorf("the fence's artifacts are not relayed: %v\n%s", good.Artifacts, ok)
	}
	if !f.ended[good.ID] || f.ended[bad.ID] || bad.State != instance.Failed {
		t.Errorf("kept %v; the failed child %s", f.ended, bad.State)
	}
	if !strings.Contains(failed, "failed") {
		t.Errorf("the failed child's relay:\n%s", failed)
	}
}

// A fence that cannot be built refuses the spawn with its reason; one that
// cannot keep completed work fails the child, saying so.
func TestFenceRefusalsAndLostWork(t *testing.T) {
	t.Parallel()
	f := &fencer{refuse: errors.New("bwrap is not installed (apt-get install bubblewrap)")}
	o := fencedLocal(t, f).run(t)
	if len(o.Instances) != 1 || !strings.Contains(o.Result.Answer, "spawn refused: boxed: bwrap is not installed (apt-get install bubblewrap)") {
		t.Fatalf("%d instances:\n%s", len(o.Instances), o.Result.Answer)
	}

	f = &fencer{keep: errors.New("git commit: disk full")}
	o = fencedLocal(t, f).run(t)
	ok, _, _ := strings.Cut(o.Result.Answer, "=====")
	if o.Instances[1].State != instance.Failed || !strings.Contains(ok, "keeping the work (boxed): git commit: disk full") {
		t.Fatalf("%s:\n%s", o.Instances[1].State, ok)
	}

	// No Fencer at all: refused, never run unfenced.
	o = fencedLocal(t, nil).run(t)
	if len(o.Instances) != 1 || !strings.Contains(o.Result.Answer, "which this runner cannot provide") {
		t.Fatalf("without a Fencer:\n%s", o.Result.Answer)
	}
}

// advance is a read-only tool that moves a fake clock on: work that
// takes time.
type advance struct {
	clk *clock.Fake
	by  time.Duration
}

func (advance) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "advance", Description: "Takes time.", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (advance) ReadOnly() bool { return true }
func (a advance) Run(context.Context, json.RawMessage) (string, error) {
	a.clk.Advance(a.by)
	return "later", nil
}

// A child's wall time is never above what its parent has left.
func TestChildWallTimeWithinParents(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := newLocal(t, `
rules:
  - match: {system: "read-only explorer"}
    text: "looked"
  - match: {turn: 1}
    tool_calls: [{name: advance, input: {}}]
  - match: {turn: 2}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "unbounded"}}
      - {name: spawn_subagent, input: {subagent_type: bounded, task: "bounded"}}
  - match: {turn: 3}
    text: "done"
`, advance{clk: clk, by: 20 * time.Second})
	l.runner.Clock = clk
	l.task.Limits.WallTime = time.Minute
	l.task.Volatile = []*agentdef.Definition{{Name: "bounded", Description: "d", SystemPrompt: "read-only explorer",
		Budgets: agentdef.Budgets{WallTime: 10 * time.Second}}}
	l.run(t)
	got := map[string]time.Duration{}
	for _, e := range l.events {
		if e.Kind == agent.EventCreated {
			got[e.Spawned.Task] = e.Spawned.Definition.Budgets.WallTime
		}
	}
	if got["unbounded"] != 40*time.Second || got["bounded"] != 10*time.Second {
		t.Fatalf("children's wall times %v, want 40s (what the parent had left) and 10s (its own, shorter)", got)
	}
}
