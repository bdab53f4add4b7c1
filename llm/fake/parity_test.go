package fake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/anthropic"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/retry"
)

// paritySrc answers by the content of the tool result in the request, so
// every case below has the same transcript shape (system, tools, a tool
// call and its result) and exercises input counting of tool blocks too.
const paritySrc = `
rules:
  - match: {tool_result: "^plain$"}
    text: "Hello there, this is plain text."
  - match: {tool_result: "^tool$"}
    text: "Looking."
    tool_calls: [{name: glob, input: {pattern: "**/*.go"}}]
  - match: {tool_result: "^stop$"}
    text: "alpha beta STOP gamma delta epsilon"
    tool_calls: [{name: glob, input: {pattern: "*"}}]
  - match: {tool_result: "^long$"}
    text: "{{lorem 200}} STOP after"
    tool_calls: [{name: glob, input: {pattern: "*"}}]
  - match: {tool_result: "^pinned$"}
    stop_reason: end_turn
    text: "alpha beta STOP gamma delta epsilon zeta eta theta"
`

// parityRequest is the request of one case: key selects the rule.
func parityRequest(key string, maxTokens int, stops ...string) *llm.Request {
	return &llm.Request{
		Model:  "fake-parity",
		System: "You are terse.",
		Tools: []llm.ToolSpec{{Name: "glob", Description: "List files.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"}}}`)}},
		Messages: []llm.Message{
			llm.UserText("Look around."),
			// Two results in one message: one wire message each on OpenAI,
			// which must still count like the one deputy message.
			{Role: llm.Assistant, Content: []llm.Block{llm.Text("Listing."), llm.ToolUse("toolu_1", "glob", json.RawMessage(`{"pattern":"*"}`)),
				llm.ToolUse("toolu_2", "glob", json.RawMessage(`{"pattern":"*/*"}`))}},
			{Role: llm.User, Content: []llm.Block{llm.ToolResult("toolu_1", key, false), llm.ToolResult("toolu_2", "(none)", false)}},
		},
		MaxTokens:     maxTokens,
		StopSequences: stops,
	}
}

// answer is what a case is compared on: everything but IDs.
type answer struct {
	content []string // "text:…" or "tool_use:name:input"
	stop    llm.StopReason
	stopSeq string
	in, out int64 // whole prompt (cache fields included), output
}

func answerOf(r *llm.Response) answer {
	a := answer{stop: r.StopReason, stopSeq: r.StopSequence, in: r.Usage.Prompt(), out: r.Usage.OutputTokens}
	for _, b := range r.Content {
		switch b.Type {
		case llm.TypeText:
			a.content = append(a.content, "text:"+b.Text)
		case llm.TypeToolUse:
			a.content = append(a.content, "tool_use:"+b.Name+":"+string(b.Input))
		default:
			a.content = append(a.content, b.Type+":"+string(b.Raw))
		}
	}
	return a
}

func (a answer) String() string {
	return fmt.Sprintf("%q stop=%s seq=%q in=%d out=%d", a.content, a.stop, a.stopSeq, a.in, a.out)
}

func (a answer) equal(b answer) bool {
	return slices.Equal(a.content, b.content) && a.stop == b.stop && a.stopSeq == b.stopSeq && a.in == b.in && a.out == b.out
}

// TestScriptedModelAndServerAgree plays the same scenario to the same
// requests in process and through deputy's Anthropic and OpenAI adapters
// against the fake server, streaming and not, and requires the same
// content, stop reason and usage everywhere: the request's max_tokens and
// stop sequences end the answer the same way, and tokens are counted by the
// same rule.
func TestScriptedModelAndServerAgree(t *testing.T) {
	t.Parallel()
	lorem := func(n int) string {
		s, err := fake.ParseScenario([]byte(fmt.Sprintf("rules: [{text: \"{{lorem %d}}\"}]", n)), "lorem")
		if err != nil {
			t.Fatal(err)
		}
		return s.Respond(&llm.Request{}, fake.RequestInfo{N: 1}).Content[0].Text
	}
	cases := []struct {
		name  string
		req   *llm.Request
		want  answer // content and stop only; usage is compared across
		oaiEq llm.StopReason
	}{
		{name: "plain", req: parityRequest("plain", 0),
			want: answer{content: []string{"text:Hello there, this is plain text."}, stop: llm.StopEndTurn}},
		{name: "tool call", req: parityRequest("tool", 0),
			want: answer{content: []string{"text:Looking.", `tool_use:glob:{"pattern":"**/*.go"}`}, stop: llm.StopToolUse}},
		{name: "tool call over max_tokens is dropped", req: parityRequest("tool", 3),
			want: answer{content: []string{"text:Looking."}, stop: llm.StopMaxTokens}},
		{name: "stop sequence", req: parityRequest("stop", 100, "zzz", "STOP"),
			want: answer{content: []string{"text:alpha beta "}, stop: llm.StopSequence, stopSeq: "STOP"},
			// Chat Completions reports a stop sequence as finish_reason
			// "stop", which is end_turn, and does not say which one.
			oaiEq: llm.StopEndTurn},
		{name: "max_tokens before the stop sequence", req: parityRequest("stop", 2, "STOP"),
			want: answer{content: []string{"text:alpha be"}, stop: llm.StopMaxTokens}},
		{name: "stop sequence drops later tool calls", req: parityRequest("long", 0, "STOP"),
			want: answer{content: []string{"text:" + lorem(200) + " "}, stop: llm.StopSequence, stopSeq: "STOP"}, oaiEq: llm.StopEndTurn},
		{name: "max_tokens cuts text", req: parityRequest("long", 10),
			want: answer{content: []string{"text:" + lorem(200)[:40]}, stop: llm.StopMaxTokens}},
		{name: "pinned stop reason is still cut by max_tokens", req: parityRequest("pinned", 3, "STOP"),
			want: answer{content: []string{"text:alpha beta S"}, stop: llm.StopMaxTokens}},
		{name: "pinned stop reason ignores stop sequences", req: parityRequest("pinned", 0, "STOP"),
			want: answer{content: []string{"text:alpha beta STOP gamma delta epsilon zeta eta theta"}, stop: llm.StopEndTurn}},
		{name: "default text", req: parityRequest("unmatched", 4),
			want: answer{content: []string{"text:" + fake.DefaultText[:16]}, stop: llm.StopMaxTokens}},
	}

	srv := fake.NewServer(fake.Options{Responder: mustScenario(t, paritySrc)})
	url, closeSrv, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeSrv() })
	noRetry := &retry.Policy{MaxAttempts: 1}
	anth, err := anthropic.New("claude-parity", anthropic.Options{APIKey: "k", BaseURL: url, Retry: noRetry})
	if err != nil {
		t.Fatal(err)
	}
	oai, err := openai.New("gpt-parity", openai.Options{APIKey: "k", BaseURL: url + "/v1", Retry: noRetry})
	if err != nil {
		t.Fatal(err)
	}
	scripted := fake.NewModel(mustScenario(t, paritySrc))

	ctx := context.Background()
	for _, c := range cases {
		for _, streamed := range []bool{false, true} {
			name := fmt.Sprintf("%s/stream=%v", c.name, streamed)
			// generate runs the case on m; a streamed run must stream
			// exactly the text it returns.
			generate := func(m llm.Model) answer {
				t.Helper()
				var text strings.Builder
				var stream func(llm.Delta)
				if streamed {
					stream = func(d llm.Delta) {
						if d.Type == llm.TypeText {
							text.WriteString(d.Text)
						}
					}
				}
				resp, err := m.Generate(ctx, c.req, stream)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if streamed {
					var want strings.Builder
					for _, b := range resp.Content {
						want.WriteString(b.Text)
					}
					if text.String() != want.String() {
						t.Errorf("%s: streamed %q, returned %q", name, text.String(), want.String())
					}
				}
				return answerOf(resp)
			}
			in := generate(scripted)
			if !slices.Equal(in.content, c.want.content) || in.stop != c.want.stop || in.stopSeq != c.want.stopSeq {
				t.Errorf("%s: in process %v, want %v", name, in, c.want)
			}
			if want := int64(llm.EstimateRequest(c.req)); in.in != want {
				t.Errorf("%s: in process input %d, want EstimateRequest %d", name, in.in, want)
			}
			if a := generate(anth); !a.equal(in) {
				t.Errorf("%s: anthropic wire\n got %v\nwant %v", name, a, in)
			}
			o := generate(oai)
			want := in
			if c.oaiEq != "" {
				want.stop, want.stopSeq = c.oaiEq, ""
			}
			if !o.equal(want) {
				t.Errorf("%s: openai wire\n got %v\nwant %v", name, o, want)
			}
		}
	}
}

func mustScenario(t *testing.T, src string) *fake.Scenario {
	t.Helper()
	s, err := fake.ParseScenario([]byte(src), "parity.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
