package deputy

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/telemetry"
)

// Any process opens a program's fan-out root's model (deputy worker
// resumes a fan-out a library started): it plans, then answers with the
// tool's result.
func TestModelsOpenThePlanner(t *testing.T) {
	t.Parallel()
	m, name, err := (&models{}).open(agent.PlannerModel)
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

// The tracer learns a root's model and a resumed grandchild's root from the
// store, as the engine recorded them.
func TestTelemetryLookupReadsTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "deputy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, in := range []*store.Instance{
		{ID: "i-root", Type: "root", Task: "the task", Model: "anthropic:claude-x"},
		{ID: "i-child", Parent: "i-root", Type: "explorer", Model: "fake"},
		{ID: "i-grandchild", Parent: "i-child", Type: "explorer", Model: "fake"},
	} {
		if err := st.CreateInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	look := storeLookup(st)
	if k, ok := look("i-root"); !ok || k != (telemetry.Known{Root: "i-root", Model: "anthropic:claude-x", Task: "the task"}) {
		t.Errorf("root: %+v %v", k, ok)
	}
	if k, ok := look("i-grandchild"); !ok || k.Root != "i-root" {
		t.Errorf("grandchild: %+v %v", k, ok)
	}
	if _, ok := look("i-nobody"); ok {
		t.Error("an unknown instance was found")
	}
}
