package providertest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// badArgsScenario has the model make two calls whose arguments are not JSON
// (cut short, and prose), then, once it has heard so, the call done right,
// then answer. A run that fails on the bad calls, runs them with no
// arguments, or never tells the model, does not reach "done".
const badArgsScenario = `
rules:
  - match: {turn: 1}
    tool_calls:
      - {name: run, raw_input: '{"command": "echo hi"'}
      - {name: run, raw_input: 'not json at all'}
  - match: {turn: 2, tool_result: "^invalid arguments for run"}
    tool_calls:
      - {name: run, input: {command: echo hi}}
  - match: {turn: 3, tool_result: "^ran echo hi$"}
    text: done
default:
  text: "unexpected request"
`

// BadArgsRaw are the arguments badArgsScenario's first turn sends.
var badArgsRaw = []string{`{"command": "echo hi"`, `not json at all`}

// runTool is a tool that records the commands it ran.
type runTool struct {
	mu  sync.Mutex
	ran []string
}

func (*runTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "run", Description: "Run a command.", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"command":{"type":"string"}},"additionalProperties":false}`)}
}
func (*runTool) ReadOnly() bool { return false }
func (r *runTool) Run(_ context.Context, input json.RawMessage) (string, error) {
	in, err := tool.Decode[struct {
		Command string `json:"command"`
	}](input)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.ran = append(r.ran, in.Command)
	r.mu.Unlock()
	return "ran " + in.Command, nil
}

// testBadArguments: a tool call whose arguments are not a JSON object, as
// models served by Ollama, vLLM and llama.cpp make them, reaches the agent
// loop as the model sent it and becomes an error result the model hears;
// the run goes on, and the next request carries the call in a form the
// wire accepts (the fake refuses a tool_use input that is not an object).
func testBadArguments(t *testing.T, tg Target, m mode) {
	sc, err := fake.ParseScenario([]byte(badArgsScenario), "badargs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []*llm.Request
	_, root := StartServer(t, fake.Options{APIKey: Key, Responder: Respond(func(req *llm.Request, info fake.RequestInfo) fake.Reply {
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
		return sc.Respond(req, info)
	})})
	model := build(t, tg, m, root, fastPolicy(clock.NewInstant()))
	// Through call, so a streamed mode checks that the deltas rebuild the
	// response, the bad arguments included.
	checked := llm.ModelFunc(func(ctx context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
		return call(t, ctx, model, m, req, nil)
	})
	rt := &runTool{}
	res, err := loop.Run(context.Background(), loop.Config{Model: checked, Tools: tool.MustSet(rt)},
		[]llm.Message{llm.UserText("say hi")})
	if err != nil || res.StopReason != loop.StopCompleted || res.Answer != "done" {
		t.Fatalf("run: %v, stop %s, answer %q; transcript %s", err, res.StopReason, res.Answer, mustJSON(res.Messages))
	}
	if len(rt.ran) != 1 || rt.ran[0] != "echo hi" {
		t.Errorf("tool ran %q, want only the good call's [echo hi]", rt.ran)
	}
	// The model's first turn, as the transcript keeps it.
	calls := res.Messages[1].ToolUses()
	results := res.Messages[2].Content
	if len(calls) != 2 || len(results) != 2 {
		t.Fatalf("turn 1: %d calls, %d results; transcript %s", len(calls), len(results), mustJSON(res.Messages))
	}
	for i, c := range calls {
		if len(c.Input) != 0 || c.InvalidInput == "" {
			t.Errorf("call %d: input %q, invalid input %q; want the arguments kept as invalid input", i, c.Input, c.InvalidInput)
		}
		// On the Anthropic wire a non-streamed response can only carry a
		// JSON value, so the fake sends the text as a JSON string.
		want := badArgsRaw[i]
		if tg.Wire == fake.Anthropic && m.nonStreaming {
			b, _ := json.Marshal(want)
			want = string(b)
		}
		if c.InvalidInput != want {
			t.Errorf("call %d: invalid input %q, want %q as the model sent it", i, c.InvalidInput, want)
		}
		r := results[i]
		if r.ToolUseID != c.ID || !r.IsError || !strings.Contains(r.Text, "invalid arguments for run: arguments ") ||
			!strings.Contains(r.Text, "you sent: "+want) {
			t.Errorf("call %d: result %+v; want an error quoting %q", i, r, want)
		}
		if !(tg.Wire == fake.Anthropic && m.nonStreaming) && !strings.Contains(r.Text, "arguments are not valid JSON") {
			t.Errorf("call %d: result %q does not say the arguments were not JSON", i, r.Text)
		}
	}
	// The second request, as the fake decoded it from the wire: the bad
	// calls went back as {} (the OpenAI provider's default too; see
	// openai.Options.EchoInvalidArguments), their results as sent.
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("%d requests", len(seen))
	}
	back := seen[1].Messages[1].ToolUses()
	for i, b := range back {
		if string(b.Input) != "{}" || b.InvalidInput != "" {
			t.Errorf("request 2 call %d: input %q, invalid input %q; want {}", i, b.Input, b.InvalidInput)
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}
