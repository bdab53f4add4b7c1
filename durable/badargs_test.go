package durable_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/anthropic"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// badArgsScenario: the model's first turn makes two calls whose arguments
// are not JSON, the kind models served by Ollama, vLLM and llama.cpp make;
// once told so it makes the call right, then answers.
const badArgsScenario = `
rules:
  - match: {turn: 1}
    tool_calls:
      - {name: count, raw_input: '{"n": 1'}
      - {name: count, raw_input: 'not json at all'}
  - match: {turn: 2, tool_result: "^invalid arguments for count"}
    tool_calls: [{name: count, input: {}}]
  - match: {turn: 3, tool_result: "^count 1$"}
    text: "done"
default:
  text: "unexpected request"
`

// TestBadArgumentsDurable: a streamed call whose arguments are not JSON
// used to fail the durable run ("turn-1/generate ... failed to serialize
// step output: json.RawMessage: unexpected end of JSON input"). The step
// output serializes now, the model hears what was wrong, the run completes,
// and the stored transcript keeps the arguments as sent beside the error
// results. On both wires, over HTTP, on SQLite.
func TestBadArgumentsDurable(t *testing.T) {
	t.Parallel()
	sc, err := fake.ParseScenario([]byte(badArgsScenario), "badargs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake.NewServer(fake.Options{Responder: sc}))
	t.Cleanup(hs.Close)
	for _, wire := range []string{"openai", "anthropic"} {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			var model llm.Model
			var err error
			if wire == "openai" {
				model, err = openai.New("fake", openai.Options{APIKey: "k", BaseURL: hs.URL + "/v1"})
			} else {
				model, err = anthropic.New("fake", anthropic.Options{APIKey: "k", BaseURL: hs.URL})
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			st, err := store.Open(ctx, filepath.Join(t.TempDir(), "deputy.db"), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int64
			e, err := durable.Open(ctx, durable.Options{
				Store:  st,
				Models: func(string) (llm.Model, string, error) { return model, "fake", nil },
				Tools:  func(durable.Spec) (*tool.Set, error) { return tool.NewSet(counter{&runs}) },
			})
			if err != nil {
				st.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close(5 * time.Second); st.Close() })
			id, err := e.Start(ctx, "count once", durable.Spec{System: "root", Model: wire + ":fake", Workspace: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			in, err := e.Wait(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			msgs, terr := st.Transcript(ctx, id)
			if in.State != instance.Completed || in.Report != "done" || in.Turns != 3 || runs.Load() != 1 {
				raw, _ := json.Marshal(msgs)
				t.Fatalf("instance %s %q after %d turns, count ran %d times; want completed, done, 3, 1\ntranscript %s",
					in.State, in.Report, in.Turns, runs.Load(), raw)
			}
			if terr != nil || len(msgs) != 6 {
				t.Fatalf("transcript: %d messages, %v", len(msgs), terr)
			}
			calls, results := msgs[1].ToolUses(), msgs[2].Content
			want := []string{`{"n": 1`, `not json at all`}
			if len(calls) != 2 || len(results) != 2 {
				t.Fatalf("turn 1: %d calls, %d results", len(calls), len(results))
			}
			for i := range calls {
				if calls[i].InvalidInput != want[i] || len(calls[i].Input) != 0 {
					t.Errorf("stored call %d: input %q, invalid input %q; want %q kept as sent", i, calls[i].Input, calls[i].InvalidInput, want[i])
				}
				r := results[i]
				if !r.IsError || !strings.Contains(r.Text, "arguments are not valid JSON") || !strings.Contains(r.Text, "you sent: "+want[i]) {
					t.Errorf("stored result %d: %+v", i, r)
				}
			}
		})
	}
}
