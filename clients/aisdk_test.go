package clients

import (
	"strings"
	"testing"
)

// aiSDKReport is what checks/ai-sdk.mjs prints.
type aiSDKReport struct {
	Calls       []any          `json:"calls"`
	PlainText   string         `json:"plain_text"`
	PlainSteps  int            `json:"plain_steps"`
	PlainFinish string         `json:"plain_finish"`
	StreamText  string         `json:"stream_text"`
	StreamSteps int            `json:"stream_steps"`
	StreamUsage map[string]any `json:"stream_usage"`
}

// aiSDKChecks run the Vercel AI SDK's generateText and streamText on each
// provider package, over the wire that provider speaks.
func aiSDKChecks() []check {
	wire := func(provider, path string) func(t *testing.T, m *matrix) {
		return func(t *testing.T, m *matrix) {
			f := startFake(t, m.deputy, "weather.yaml")
			r := decodeReport[aiSDKReport](t, m.script(t, f, "ai-sdk.mjs", provider))
			if len(r.Calls) != 2 {
				t.Errorf("the SDK ran get_weather %d times (%v), want once per call, 2", len(r.Calls), r.Calls)
			}
			wantQuoted(t, "generateText's text", r.PlainText)
			wantQuoted(t, "streamText's text stream", r.StreamText)
			if r.PlainSteps != 2 || r.StreamSteps != 2 || r.PlainFinish != "stop" {
				t.Errorf("steps %d and %d, finish %q; want 2 steps each (tool call, answer), stop", r.PlainSteps, r.StreamSteps, r.PlainFinish)
			}
			if n, _ := r.StreamUsage["outputTokens"].(float64); n <= 0 {
				t.Errorf("streamText's total usage %v has no output tokens", r.StreamUsage)
			}
			trips{path: path, requests: 4, streamed: 2}.expect(t, f)
		}
	}
	// object runs Output.object after the tool turn: scenarios/forecast.yaml
	// answers in the schema, quoting the tool result.
	object := func(provider, path string) func(t *testing.T, m *matrix) {
		return func(t *testing.T, m *matrix) {
			f := startFake(t, m.deputy, "forecast.yaml")
			r := decodeReport[struct {
				Calls  []any    `json:"calls"`
				Parsed forecast `json:"parsed"`
				Steps  int      `json:"steps"`
			}](t, m.script(t, f, "ai-sdk-object.mjs", provider))
			if len(r.Calls) != 1 || r.Steps != 2 {
				t.Errorf("%d tool calls in %d steps, want 1 in 2", len(r.Calls), r.Steps)
			}
			r.Parsed.want(t, "Output.object")
			for _, q := range (trips{path: path, requests: 2}).expect(t, f) {
				if !strings.Contains(string(q.Request), `"json_schema"`) {
					t.Errorf("the request did not carry the schema as json_schema: %v", q)
				}
			}
		}
	}
	return []check{
		{"ai-sdk/@ai-sdk/anthropic", wire("anthropic", "/v1/messages")},
		{"ai-sdk/@ai-sdk/openai (responses)", wire("openai", "/v1/responses")},
		{"ai-sdk/@ai-sdk/openai (chat)", wire("openai-chat", "/v1/chat/completions")},
		{"ai-sdk/@ai-sdk/anthropic Output.object", object("anthropic", "/v1/messages")},
		{"ai-sdk/@ai-sdk/openai (responses) Output.object", object("openai", "/v1/responses")},
		{"ai-sdk/@ai-sdk/openai (chat) Output.object", object("openai-chat", "/v1/chat/completions")},
	}
}
