package loop

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// cannedModel answers every request with one of two prepared responses: a
// call of each tool in calls until turns are used up, then a final text. It
// allocates nothing, so the benchmark measures the loop, not the model.
type cannedModel struct {
	turns     int
	toolTurn  *llm.Response
	finalTurn *llm.Response
}

func newCanned(turns int, calls ...string) *cannedModel {
	m := &cannedModel{turns: turns,
		toolTurn:  &llm.Response{StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}},
		finalTurn: &llm.Response{Content: []llm.Block{llm.Text("done")}, StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 100, OutputTokens: 2}},
	}
	for i, name := range calls {
		m.toolTurn.Content = append(m.toolTurn.Content, llm.ToolUse("toolu_"+string(rune('a'+i)), name, json.RawMessage(`{"path":"x"}`)))
	}
	return m
}

func (m *cannedModel) Generate(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
	if len(req.Messages)/2 >= m.turns-1 || len(m.toolTurn.Content) == 0 {
		return m.finalTurn, nil
	}
	return m.toolTurn, nil
}

var noop = fn{name: "noop", readOnly: true,
	schema: `{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`,
	run:    func(context.Context, json.RawMessage) (string, error) { return "ok", nil }}

// benchRun runs b.N runs of turns turns each and reports per-turn figures.
func benchRun(b *testing.B, turns int, calls ...string) {
	cfg := Config{Model: newCanned(turns, calls...), ModelName: "fake", Tools: tool.MustSet(noop),
		Compaction: Compaction{Threshold: -1}}
	msgs := []llm.Message{llm.UserText("task")}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(ctx, cfg, msgs)
		if err != nil || res.Turns != turns {
			b.Fatalf("turns %d err %v", res.Turns, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*turns), "ns/turn")
}

// BenchmarkTurnNoTools is the loop's own cost per turn: request, step,
// bookkeeping, transcript growth (10 text-only turns cannot happen in a real
// run, so this is one turn).
func BenchmarkTurnNoTools(b *testing.B) { benchRun(b, 1) }

// BenchmarkTurnOneTool is a 10-turn run, each turn calling one tool.
func BenchmarkTurnOneTool(b *testing.B) { benchRun(b, 10, "noop") }

// BenchmarkTurnFourTools is a 10-turn run, each turn calling four read-only
// tools concurrently.
func BenchmarkTurnFourTools(b *testing.B) { benchRun(b, 10, "noop", "noop", "noop", "noop") }
