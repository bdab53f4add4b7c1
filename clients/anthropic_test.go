package clients

import (
	"strings"
	"testing"
)

// anthropicReport is what checks/anthropic-create.mjs and -stream.mjs print.
type anthropicReport struct {
	Tool       string         `json:"tool"`
	Input      map[string]any `json:"input"`
	InputJSON  map[string]any `json:"input_json"`
	FirstStop  string         `json:"first_stop"`
	FinalStop  string         `json:"final_stop"`
	FinalText  string         `json:"final_text"`
	Usage      anthropicUsage `json:"usage"`
	Counted    int            `json:"counted"`
	Billed     int            `json:"billed"`
	Calls      []any          `json:"calls"`
	Unknown    *refused       `json:"unknown_field"`
	PlainText  string         `json:"plain_text"`
	StreamText string         `json:"stream_text"`
}

// anthropicUsage is the Messages API's usage, the counts the checks compare.
type anthropicUsage struct {
	Input      int `json:"input_tokens"`
	Output     int `json:"output_tokens"`
	CacheWrite int `json:"cache_creation_input_tokens"`
	CacheRead  int `json:"cache_read_input_tokens"`
}

func anthropicChecks() []check {
	return []check{
		{"anthropic-sdk/messages.create", anthropicCreate},
		{"anthropic-sdk/messages.stream+finalMessage", anthropicStream},
		{"anthropic-sdk/messages.countTokens", anthropicCountTokens},
		{"anthropic-sdk/messages.parse", anthropicParse},
		{"anthropic-sdk/models.list", anthropicModels},
		{"anthropic-sdk/thinking", anthropicThinking},
		{"anthropic-sdk/thinking display omitted", anthropicThinkingOmitted},
		{"anthropic-sdk/prompt-caching", anthropicCaching},
		{"anthropic-sdk/beta.messages.toolRunner", anthropicToolRunner},
		{"anthropic-sdk/faults", anthropicFaults},
	}
}

func anthropicCreate(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[anthropicReport](t, m.script(t, f, "anthropic-create.mjs"))
	wantAnthropicTrip(t, r)
	r.Unknown.want(t, "an unknown top-level field", "bogus_field: Extra inputs are not permitted", "", "")
	trips{path: "/v1/messages", requests: 3, failed: []int{400}}.expect(t, f)
}

func anthropicStream(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[anthropicReport](t, m.script(t, f, "anthropic-stream.mjs"))
	wantAnthropicTrip(t, r)
	if r.InputJSON["city"] != "Paris" {
		t.Errorf("the streamed input_json_delta fragments joined to %v, want {city: Paris}", r.InputJSON)
	}
	trips{path: "/v1/messages", requests: 2, streamed: 2}.expect(t, f)
}

func anthropicCountTokens(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[anthropicReport](t, m.script(t, f, "anthropic-count-tokens.mjs"))
	wantQuoted(t, "the answer after counting", r.FinalText)
	// The fake counts both with deputy's one rule, so the count of
	// a request and the input it is billed for agree exactly.
	if r.Counted <= 0 || r.Counted != r.Billed {
		t.Errorf("countTokens said %d input tokens, create billed %d for the same request", r.Counted, r.Billed)
	}
	trips{path: "/v1/messages", requests: 2}.expect(t, f)
	trips{path: "/v1/messages/count_tokens", requests: 1}.expect(t, f)
}

func anthropicParse(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "forecast.yaml")
	r := decodeReport[struct {
		Parsed    forecast `json:"parsed"`
		FinalStop string   `json:"final_stop"`
	}](t, m.script(t, f, "anthropic-parse.mjs"))
	r.Parsed.want(t, "messages.parse()")
	reqs := trips{path: "/v1/messages", requests: 2}.expect(t, f)
	for _, q := range reqs {
		if !strings.Contains(string(q.Request), `"json_schema"`) {
			t.Errorf("the request did not carry output_config.format's json_schema: %v", q)
		}
	}
}

func anthropicModels(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[modelsReport](t, m.script(t, f, "anthropic-models.mjs"))
	r.want(t, f, "type", "model", "/v1/messages")
}

// anthropicThinking: extended thinking round-trips its signed block, and an
// edited block is refused.
func anthropicThinking(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "thinking.yaml")
	r := decodeReport[thinkingReport](t, m.script(t, f, "anthropic-thinking.mjs", "enabled"))
	if r.Thinking == "" || r.StreamedThinking != r.Thinking || r.Signature == "" {
		t.Errorf("thinking %q, streamed as %q, signature %q: want the scenario's, whole, signed", r.Thinking, r.StreamedThinking, r.Signature)
	}
	wantQuoted(t, "the answer after the thinking turn", r.FinalText)
	r.Edited.want(t, "an edited thinking block sent back", "messages.1.content.0: Invalid `signature` in `thinking` block", "", "")
	trips{path: "/v1/messages", requests: 3, streamed: 1, failed: []int{400}}.expect(t, f)
}

// anthropicThinkingOmitted: with display "omitted" (Claude Code's setting)
// the block comes back with its text redacted and its signature, and goes
// back so.
func anthropicThinkingOmitted(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "thinking.yaml")
	r := decodeReport[thinkingReport](t, m.script(t, f, "anthropic-thinking.mjs", "omitted"))
	if r.Thinking != "" || r.StreamedThinking != "" || r.Signature == "" {
		t.Errorf("thinking %q, streamed as %q, signature %q: want the text omitted, the signature sent", r.Thinking, r.StreamedThinking, r.Signature)
	}
	wantQuoted(t, "the answer after the thinking turn", r.FinalText)
	trips{path: "/v1/messages", requests: 2, streamed: 1}.expect(t, f)
}

// thinkingReport is what checks/anthropic-thinking.mjs prints.
type thinkingReport struct {
	Thinking         string   `json:"thinking"`
	StreamedThinking string   `json:"streamed_thinking"`
	Signature        string   `json:"signature"`
	FinalText        string   `json:"final_text"`
	Edited           *refused `json:"edited"`
}

func anthropicCaching(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[struct {
		First     anthropicUsage `json:"first_usage"`
		Second    anthropicUsage `json:"second_usage"`
		FinalText string         `json:"final_text"`
	}](t, m.script(t, f, "anthropic-cache.mjs"))
	wantQuoted(t, "the answer", r.FinalText)
	// The breakpoint's prefix (tools, system) is written by the
	// first request and read, whole, by the second.
	if w := r.First.CacheWrite; w <= 0 || r.Second.CacheRead != w || r.First.CacheRead != 0 {
		t.Errorf("first usage %+v, second %+v: want the first to write the prefix and the second to read it all", r.First, r.Second)
	}
	trips{path: "/v1/messages", requests: 2}.expect(t, f)
}

func anthropicToolRunner(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[anthropicReport](t, m.script(t, f, "anthropic-tool-runner.mjs"))
	if len(r.Calls) != 2 {
		t.Errorf("the runner ran get_weather %d times (%v), want once per run, 2", len(r.Calls), r.Calls)
	}
	wantQuoted(t, "the plain run's answer", r.PlainText)
	wantQuoted(t, "the streamed run's answer", r.StreamText)
	trips{path: "/v1/messages", requests: 4, streamed: 2}.expect(t, f)
}

func wantAnthropicTrip(t *testing.T, r anthropicReport) {
	t.Helper()
	if r.Tool != "get_weather" || r.Input["city"] != "Paris" || r.FirstStop != "tool_use" {
		t.Errorf("first turn: %s(%v), stop %q; want get_weather({city: Paris}), tool_use", r.Tool, r.Input, r.FirstStop)
	}
	if r.FinalStop != "end_turn" {
		t.Errorf("final stop_reason %q, want end_turn", r.FinalStop)
	}
	wantQuoted(t, "the final text", r.FinalText)
	if r.Usage.Output <= 0 {
		t.Errorf("final usage %+v: no output_tokens", r.Usage)
	}
}

// faultReport is what checks/anthropic-faults.mjs and openai-faults.mjs print.
type faultReport struct {
	FinalText   string `json:"final_text"`
	StreamError *struct {
		Name    string `json:"name"`
		Status  *int   `json:"status"`
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"stream_error"`
}

// anthropicFaults: requests 1 and 2 (the first turn) fail with 529 and 429,
// which the SDK retries; the 5th, streamed, ends in an error event.
func anthropicFaults(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml",
		"--fault", "1=overloaded", "--fault", "2=rate_limit,retry_after=50ms", "--fault", "5=error_event,after_bytes=120")
	r := decodeReport[faultReport](t, m.script(t, f, "anthropic-faults.mjs"))
	wantQuoted(t, "the answer after the retried first turn", r.FinalText)
	if e := r.StreamError; e == nil || e.Type != "overloaded_error" {
		t.Errorf("the stream ended by an error event failed as %+v, want an APIError of type overloaded_error", e)
	}
	trips{path: "/v1/messages", requests: 5, streamed: 1, failed: []int{529, 429}}.expect(t, f)
}
