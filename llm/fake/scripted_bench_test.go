package fake

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

// benchScenario is the simple agent the loop benchmark runs: one tool call,
// then a final text.
const benchScenario = `
rules:
  - match: {turn: 1, tools: [read_file]}
    text: "Let me read it."
    tool_calls:
      - name: read_file
        input: {path: main.go, limit: 200}
  - text: "The file defines main."
`

// benchTurns are the two requests of that agent's run.
func benchTurns() [2]*llm.Request {
	spec := tools("read_file", "write_file", "bash")
	first := &llm.Request{Model: "fake", System: "You are a helpful agent.", Tools: spec,
		Messages: []llm.Message{llm.UserText("What does main.go do?")}}
	second := &llm.Request{Model: "fake", System: first.System, Tools: spec, Messages: []llm.Message{
		first.Messages[0],
		{Role: llm.Assistant, Content: []llm.Block{llm.Text("Let me read it."),
			llm.ToolUse("toolu_0123456789abcdefghijklmn", "read_file", json.RawMessage(`{"path":"main.go","limit":200}`))}},
		{Role: llm.User, Content: []llm.Block{llm.ToolResult("toolu_0123456789abcdefghijklmn", "package main\n\nfunc main() {}\n", false)}},
	}}
	return [2]*llm.Request{first, second}
}

// BenchmarkScriptedModel measures one model turn of the simple agent
// (alternating its two turns), with and without a stream callback. The agent
// loop's budget is < 5 µs and < 20 allocations per turn including this.
func BenchmarkScriptedModel(b *testing.B) {
	for _, bc := range []struct {
		name   string
		stream func(llm.Delta)
	}{
		{"nostream", nil},
		{"stream", func(llm.Delta) {}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := NewModel(mustParse(b, benchScenario))
			reqs := benchTurns()
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := m.Generate(ctx, reqs[i&1], bc.stream); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// TestScriptedModelAllocs pins the allocation budget the benchmark
// reports, so a change that makes the hot path allocate fails a test, not
// just a number nobody reads.
func TestScriptedModelAllocs(t *testing.T) {
	m := NewModel(mustParse(t, benchScenario))
	reqs := benchTurns()
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		req    *llm.Request
		stream func(llm.Delta)
		max    float64
	}{
		// Content slice, tool-use ID, Response, response ID.
		{"tool call", reqs[0], nil, 4},
		{"tool call, streamed", reqs[0], func(llm.Delta) {}, 4},
		// Content slice, Response, response ID.
		{"final text", reqs[1], nil, 3},
		{"final text, streamed", reqs[1], func(llm.Delta) {}, 3},
	} {
		got := testing.AllocsPerRun(200, func() {
			if _, err := m.Generate(ctx, c.req, c.stream); err != nil {
				t.Fatal(err)
			}
		})
		if got > c.max {
			t.Errorf("%s: %.0f allocations per call, budget %.0f", c.name, got, c.max)
		}
	}
}
