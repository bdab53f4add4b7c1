package setup

import (
	"context"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/llm"
)

// Any process opens a program's fan-out root's model (deputy worker
// resumes a fan-out a library started): it plans, then answers with the
// tool's result.
func TestModelsOpenThePlanner(t *testing.T) {
	t.Parallel()
	m, name, err := (&Models{}).Open(agent.PlannerModel)
	if err != nil || name != agent.PlannerModel {
		t.Fatalf("%v %q", err, name)
	}
	plan := `{"tasks":[{"id":"a","subagent_type":"explorer","task":"x"}]}`
	resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText(plan)}}, nil)
	if err != nil || len(resp.Message().ToolUses()) != 1 || string(resp.Content[0].Input) != plan {
		t.Fatalf("plan: %+v %v", resp, err)
	}
	msgs := []llm.Message{llm.UserText(plan), resp.Message(),
		{Role: llm.User, Content: []llm.Block{llm.ToolResult("fan_out_1", `{"merged":"m"}`, false)}}}
	resp, err = m.Generate(context.Background(), &llm.Request{Messages: msgs}, nil)
	if err != nil || resp.Message().Text() != `{"merged":"m"}` || resp.StopReason != llm.StopEndTurn {
		t.Fatalf("answer: %+v %v", resp, err)
	}
}
