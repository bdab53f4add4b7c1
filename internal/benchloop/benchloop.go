// Package benchloop is the one definition of the loop benchmark's workload,
// shared by `go test -bench` in package loop and the `deputy-bench loop`
// macro benchmark so the two measure the same thing.
package benchloop

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// Scenario is a fake-model scenario of turns turns: each but the last calls
// the no-op tool once, the last answers.
func Scenario(turns int) string {
	return fmt.Sprintf(`
name: bench-loop
rules:
  - match: {turn: "1-%d"}
    tool_calls:
      - name: noop
        input: {path: internal/server/handler.go}
  - match: {turn: %d}
    text: done
`, turns-1, turns)
}

// Noop is the benchmark's tool: validated like any other, does nothing.
type Noop struct{}

// Spec names the tool and gives a schema of the built-ins' shape.
func (Noop) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "noop", Description: "does nothing", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)}
}

// ReadOnly is true: the tool changes nothing.
func (Noop) ReadOnly() bool { return true }

// Run does nothing.
func (Noop) Run(context.Context, json.RawMessage) (string, error) { return "ok", nil }

// Config is the loop configuration the benchmark runs: the model, the no-op
// tool, no compaction.
func Config(m llm.Model) loop.Config {
	return loop.Config{Model: m, ModelName: "fake", Tools: tool.MustSet(Noop{}), Compaction: loop.Compaction{Threshold: -1}}
}

// Run runs the workload once and checks it went as scripted.
func Run(ctx context.Context, cfg loop.Config, turns int) error {
	res, err := loop.Run(ctx, cfg, []llm.Message{llm.UserText("bench")})
	if err != nil {
		return err
	}
	if res.Turns != turns || res.StopReason != loop.StopCompleted {
		return fmt.Errorf("bench run: %d turns, stop %s, want %d turns, completed", res.Turns, res.StopReason, turns)
	}
	return nil
}
