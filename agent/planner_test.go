package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm/fake"
)

// A planner root's answer is its fan_out's whole result, however many
// tasks: deputy.WaitFanOut decodes it, and at 400 tasks it is past the
// 50,000 characters a tool result is otherwise cut to.
func TestPlannerAnswerIsWhole(t *testing.T) {
	t.Parallel()
	s, err := fake.ParseScenario([]byte("rules:\n  - text: \"Done with {{.Task}}, as asked.\"\n"), "planner.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := fake.NewModel(s, fake.WithoutLatency())
	const n = 400
	var in agent.FanOutInput
	in.Format = "json"
	for i := range n {
		in.Tasks = append(in.Tasks, agent.FanTaskInput{FanTask: agent.FanTask{ID: fmt.Sprintf("task-%03d", i), Type: "w", Task: fmt.Sprintf("part %d", i)}})
	}
	plan, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	r := &agent.Runner{MaxParallel: 50}
	o, err := r.Run(context.Background(), agent.Task{Task: string(plan), Model: agent.Planner{}, ModelName: agent.PlannerModel,
		Volatile:  []*agentdef.Definition{{Name: "w", Description: "works", Tools: []string{}, Mode: agentdef.ModeIsolated}},
		Inherited: &agent.ModelRef{Model: m, Name: "fake", Spec: "fake"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Result.Answer) <= 50_000 {
		t.Fatalf("the answer is %d characters: the workload no longer tests the cut", len(o.Result.Answer))
	}
	var out agent.FanOutput
	if err := json.Unmarshal([]byte(o.Result.Answer), &out); err != nil {
		t.Fatalf("the planner's answer does not decode: %v", err)
	}
	if len(out.Results) != n {
		t.Fatalf("%d results, want %d", len(out.Results), n)
	}
	for _, res := range out.Results {
		if res.State != instance.Completed {
			t.Fatalf("task %s: %s", res.ID, res.State)
		}
	}
}
