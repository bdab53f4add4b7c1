package loop_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// benchScenario: nine turns that each call one tool, then an answer.
const benchScenario = `
name: bench
rules:
  - match: {turn: "1-9"}
    tool_calls:
      - name: noop
        input: {path: internal/server/handler.go}
  - match: {turn: 10}
    text: done
`

type noopTool struct{}

func (noopTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "noop", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)}
}
func (noopTool) ReadOnly() bool                                       { return true }
func (noopTool) Run(context.Context, json.RawMessage) (string, error) { return "ok", nil }

// BenchmarkScriptedTurn is the headline figure: the loop's cost per
// turn with deputy's in-process scripted model (scenario matching, usage
// estimation and reply building included) and one tool call per turn.
func BenchmarkScriptedTurn(b *testing.B) {
	s, err := fake.ParseScenario([]byte(benchScenario), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg := loop.Config{Model: fake.NewModel(s, fake.WithoutLatency()), ModelName: "fake",
		Tools: tool.MustSet(noopTool{}), Compaction: loop.Compaction{Threshold: -1}}
	msgs := []llm.Message{llm.UserText("task")}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := loop.Run(ctx, cfg, msgs)
		if err != nil || res.Turns != 10 || res.StopReason != loop.StopCompleted {
			b.Fatalf("turns %d stop %s err %v", res.Turns, res.StopReason, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10), "ns/turn")
	b.ReportMetric(float64(testing.AllocsPerRun(1, func() { _, _ = loop.Run(ctx, cfg, msgs) }))/10, "allocs/turn")
}
