package durable_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/tool"
)

// countingFencer counts what the engine asks of fences.
type countingFencer struct {
	mu                     sync.Mutex
	built, released, ended int
	kept                   bool
}

func (f *countingFencer) Check(*agentdef.Definition) error { return nil }

func (f *countingFencer) Fence(context.Context, string, *agentdef.Definition) (*agent.Fence, error) {
	f.mu.Lock()
	f.built++
	f.mu.Unlock()
	return &agent.Fence{Tools: tool.MustSet(),
		Release: func() { f.mu.Lock(); f.released++; f.mu.Unlock() },
		End: func(_ context.Context, kept bool) ([]string, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.ended++
			f.kept = kept
			return nil, nil
		}}, nil
}

// A fenced child that asks stops without ending its fence (its work
// stays for the run the answer starts), which builds it again; the fence
// ends once, kept, when the child completes.
func TestFenceSurvivesAsking(t *testing.T) {
	t.Parallel()
	base, _ := agentdef.Load(agentdef.LoadOptions{})
	cat, err := base.With(&agentdef.Definition{Name: "boxed", Description: "fenced", SystemPrompt: "You are a subagent working fenced.",
		Isolation: agentdef.IsolationSandbox})
	if err != nil {
		t.Fatal(err)
	}
	f := &countingFencer{}
	r := newRigWith(t, &rig{scenario: strings.ReplaceAll(foregroundAskScenario, "general-purpose", "boxed"), catalog: cat,
		fence: func(durable.Spec) agent.Fencer { return f }})
	in := r.wait(r.start(durable.Spec{System: "root"}))
	if in.State != instance.Completed || !strings.Contains(in.Report, "painted blue") {
		t.Fatalf("root %s %q", in.State, in.Report)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.built != 2 || f.released != 1 || f.ended != 1 || !f.kept {
		t.Fatalf("fences built %d, released %d, ended %d (kept %v); want 2, 1, 1 (true)", f.built, f.released, f.ended, f.kept)
	}
}
