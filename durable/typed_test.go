package durable_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// look is a read-only tool.
type look struct{}

func (look) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "look", Description: "looks", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (look) ReadOnly() bool                                       { return true }
func (look) Run(context.Context, json.RawMessage) (string, error) { return "a long road", nil }

// Every rule answers only the type's system prompt: a root that did not
// run as the type would get the last one.
const surveyScenario = `
rules:
  - match: {system: "^You survey", last_user: "Rewrite it within"}
    text: "Short survey."
  - match: {system: "^You survey", turn: 1, tools: [look, ask_parent]}
    tool_calls: [{name: ask_parent, input: {question: "Which road?"}}]
  - match: {system: "^You survey", turn: 2, tools: [look]}
    tool_calls: [{name: look, input: {}}, {name: count, input: {}}]
  - match: {system: "^You survey", turn: 3}
    text: "{{lorem 300}}"
  - text: "WRONG: not run as the type"
`

func surveyRig(t *testing.T, runs *atomic.Int64) *rig {
	cat, _ := agentdef.Load(agentdef.LoadOptions{})
	cat, err := cat.With(&agentdef.Definition{Name: "surveyor", Description: "Surveys.", SystemPrompt: "You survey.",
		Tools: []string{"look", agentdef.AskTool}, ReportCap: 50},
		&agentdef.Definition{Name: "boxed", Description: "Fenced.", SystemPrompt: "x", Isolation: agentdef.IsolationSandbox})
	if err != nil {
		t.Fatal(err)
	}
	return newRigWith(t, &rig{scenario: surveyScenario, tools: []tool.Tool{look{}, counter{runs}}, catalog: cat})
}

// A root started as a type runs as that type over all its runs (the
// answer's run is built from the recorded definition again): its prompt,
// its allowlist (count, outside it, is an unknown tool), its report cap.
// The instance is recorded under the type's name.
func TestTypedRootRunsAsItsTypeOverItsRuns(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	r := surveyRig(t, &runs)
	ctx := context.Background()
	id, err := r.e.Start(ctx, "survey the roads", durable.Spec{Type: "surveyor", Model: "fake", System: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := r.e.Settle(ctx, id)
	if err != nil || in.State != instance.Asking || in.Type != "surveyor" {
		t.Fatalf("%+v %v", in, err)
	}
	var spec durable.Spec
	if err := json.Unmarshal(in.Definition, &spec); err != nil || spec.Definition == nil || spec.Definition.SystemPrompt != "You survey." {
		t.Fatalf("recorded spec %s: %v", in.Definition, err)
	}
	if err := r.ctl.Answer(ctx, id, "the north road"); err != nil {
		t.Fatal(err)
	}
	if in, err = r.e.Settle(ctx, id); err != nil {
		t.Fatal(err)
	}
	if in.State != instance.Completed || in.Report != "Short survey." {
		t.Fatalf("%s: %q", in.State, in.Report)
	}
	if runs.Load() != 0 {
		t.Errorf("count ran %d times: it is outside the type's allowlist", runs.Load())
	}
	msgs, err := r.st.Transcript(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var countResult string
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == llm.TypeToolResult && b.IsError {
				countResult = b.Text
			}
		}
	}
	if !strings.Contains(countResult, "unknown tool") {
		t.Errorf("count's result: %q", countResult)
	}
}

// An unknown type, a fenced one, or a spec whose definition is another
// type's is refused at Start, and nothing is recorded.
func TestTypedRootRefusals(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	r := surveyRig(t, &runs)
	ctx := context.Background()
	for _, c := range []struct {
		spec durable.Spec
		want string
	}{
		{durable.Spec{Type: "nobody", Model: "fake"}, `unknown subagent type "nobody"; the types are: boxed, explorer`},
		{durable.Spec{Type: "boxed", Model: "fake"}, "asks for isolation sandbox"},
		{durable.Spec{Type: "surveyor", Model: "fake", Definition: &agentdef.Definition{Name: "other"}}, `type "surveyor" and its definition's name "other" differ`},
	} {
		if _, err := r.e.Start(ctx, "x", c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.spec.Type, err)
		}
	}
	all, err := r.st.ListInstances(ctx, store.Filter{})
	if err != nil || len(all) != 0 {
		t.Errorf("recorded %d instances, %v", len(all), err)
	}
}
