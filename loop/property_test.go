package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// TestRunInvariants drives the loop with random models, tools and limits and
// checks what must hold for every run: the transcript is one a provider
// accepts, the stop reason is a known one, no budget is overrun, and the
// usage is exactly the sum of the model's responses.
func TestRunInvariants(t *testing.T) {
	t.Parallel()
	known := map[StopReason]bool{StopCompleted: true, StopRefusal: true, StopMaxTurns: true, StopMaxTotalTokens: true,
		StopMaxToolCalls: true, StopMaxOutputTokens: true, StopModelError: true, StopStepError: true}
	fails := fn{name: "fails", run: func(context.Context, json.RawMessage) (string, error) { return "", errors.New("no") }}
	tools := tool.MustSet(echo("ro", true), echo("rw", false), fails)
	names := []string{"ro", "rw", "fails", "missing"}

	rapid.Check(t, func(t *rapid.T) {
		lim := Limits{
			MaxTurns:       rapid.IntRange(1, 12).Draw(t, "maxTurns"),
			MaxToolCalls:   rapid.IntRange(0, 15).Draw(t, "maxToolCalls"),
			MaxTotalTokens: int64(rapid.IntRange(0, 400).Draw(t, "maxTokens")),
		}
		var mu sync.Mutex
		var sum llm.Usage
		calls := 0
		model := llm.ModelFunc(func(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			// The total-token budget: no call starts once it is spent, and
			// no call may produce more output than what is left.
			if lim.MaxTotalTokens > 0 && (sum.Total() >= lim.MaxTotalTokens || int64(req.MaxTokens) > lim.MaxTotalTokens-sum.Total()) {
				t.Fatalf("call with max_tokens %d after %d of %d tokens", req.MaxTokens, sum.Total(), lim.MaxTotalTokens)
			}
			if rapid.IntRange(0, 30).Draw(t, "modelError") == 0 {
				return nil, errors.New("provider down")
			}
			out := min(int64(rapid.IntRange(1, 20).Draw(t, "out")), int64(req.MaxTokens)) // a model never exceeds max_tokens
			u := llm.Usage{InputTokens: int64(rapid.IntRange(1, 50).Draw(t, "in")), OutputTokens: out}
			sum.Add(u)
			resp := &llm.Response{Usage: u, StopReason: llm.StopEndTurn}
			n := rapid.IntRange(0, 4).Draw(t, "calls")
			for i := range n {
				name := rapid.SampledFrom(names).Draw(t, "tool")
				resp.Content = append(resp.Content, llm.ToolUse(fmt.Sprintf("t%d_%d", calls, i), name, json.RawMessage(`{}`)))
				resp.StopReason = llm.StopToolUse
			}
			if n == 0 {
				resp.Content = []llm.Block{llm.Text("answer")}
			}
			switch rapid.IntRange(0, 20).Draw(t, "stop") {
			case 0:
				resp.StopReason = llm.StopMaxTokens
			case 1:
				if n == 0 {
					resp.StopReason = llm.StopRefusal
				}
			}
			return resp, nil
		})
		res, err := Run(context.Background(), Config{Model: model, Tools: tools, Limits: lim,
			Compaction: Compaction{Threshold: -1}}, task("go"))
		if !known[res.StopReason] {
			t.Fatalf("unknown stop reason %q", res.StopReason)
		}
		if (err != nil) != (res.StopReason == StopModelError) {
			t.Fatalf("err %v with stop %s", err, res.StopReason)
		}
		checkTranscript(t, res.Messages)
		if res.Turns > lim.MaxTurns {
			t.Fatalf("%d turns over the limit %d", res.Turns, lim.MaxTurns)
		}
		if lim.MaxToolCalls > 0 && res.ToolCalls > lim.MaxToolCalls {
			t.Fatalf("%d tool calls over the limit %d", res.ToolCalls, lim.MaxToolCalls)
		}
		if res.Usage != sum {
			t.Fatalf("usage %+v, model reported %+v", res.Usage, sum)
		}
		ran := 0
		for _, m := range res.Messages {
			for _, b := range m.Content {
				if b.Type == llm.TypeToolResult && !(b.IsError && len(b.Text) >= 8 && b.Text[:8] == "not run:") {
					ran++
				}
			}
		}
		if ran != res.ToolCalls {
			t.Fatalf("%d results of run calls, ToolCalls %d", ran, res.ToolCalls)
		}
	})
}
