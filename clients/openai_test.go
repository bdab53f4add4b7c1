package clients

import (
	"slices"
	"strings"
	"testing"
)

// forecast is the structured-output checks' schema (Forecast in
// checks/openai-parse.mjs and anthropic-parse.mjs), as scenarios/forecast.yaml
// answers it.
type forecast struct {
	City   string `json:"city"`
	Report string `json:"report"`
	Sunny  bool   `json:"sunny"`
}

func (p forecast) want(t *testing.T, what string) {
	t.Helper()
	if p.City != "Paris" || !strings.Contains(p.Report, mark) || !p.Sunny {
		t.Errorf("%s parsed %+v, want the scenario's {Paris, the tool's report, true}", what, p)
	}
}

// modelsReport is what checks/openai-models.mjs and anthropic-models.mjs print.
type modelsReport struct {
	IDs       []string       `json:"ids"`
	Retrieved map[string]any `json:"retrieved"`
	Model     string         `json:"model"`
	Text      string         `json:"text"`
}

// want checks a models check on its wire: the model retrieved is the one
// listed, of the wire's object type, and the tool round trip on it.
func (r modelsReport) want(t *testing.T, f *fakeLLM, objectKey, objectType, path string) {
	t.Helper()
	if r.Retrieved["id"] != r.Model || r.Retrieved[objectKey] != objectType {
		t.Errorf("models.retrieve(%q) = %v, want its id and %s %q", r.Model, r.Retrieved, objectKey, objectType)
	}
	wantQuoted(t, "the answer on "+r.Model, r.Text)
	trips{method: "GET", path: "/v1/models", requests: 1}.expect(t, f)
	trips{method: "GET", path: "/v1/models/" + r.Model, requests: 1}.expect(t, f)
	trips{path: path, requests: 2}.expect(t, f)
}

// call is a function call as the OpenAI wires carry it: arguments as text.
type call struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func (c call) want(t *testing.T, what string) {
	t.Helper()
	if c.Name != "get_weather" || strings.ReplaceAll(c.Arguments, " ", "") != `{"city":"Paris"}` {
		t.Errorf("%s: %s(%s), want get_weather({\"city\":\"Paris\"})", what, c.Name, c.Arguments)
	}
}

type openaiTurns struct {
	UnknownField    *refused `json:"unknown_field"`
	UnknownPrevious *refused `json:"unknown_previous"`
	Plain           struct {
		Echoed []string       `json:"echoed"`
		Call   call           `json:"call"`
		Text   string         `json:"text"`
		Usage  map[string]any `json:"usage"`
	} `json:"plain"`
	Stream struct {
		Call      call           `json:"call"`
		Text      string         `json:"text"`
		FinalText *string        `json:"final_text"`
		Usage     map[string]any `json:"usage"`
		Finish    string         `json:"finish"`
		Events    []string       `json:"events"`
	} `json:"stream"`
}

func openaiChecks() []check {
	return []check{
		{"openai/chat.completions.create", openaiChat},
		{"openai/chat.completions.runTools", openaiRunTools},
		{"openai/chat.completions.parse", openaiParse},
		{"openai/responses.create", openaiResponses},
		{"openai/prompt-caching", openaiCaching},
		{"openai-agents/run", openaiAgents},
		{"openai/models.list", openaiModels},
		{"openai/faults", openaiFaults},
	}
}

func openaiChat(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[openaiTurns](t, m.script(t, f, "openai-chat.mjs"))
	r.Plain.Call.want(t, "plain")
	// The real API's assistant message carries refusal and
	// annotations even when empty; echoing them back is the point.
	for _, k := range []string{"role", "content", "refusal", "annotations", "tool_calls"} {
		if !slices.Contains(r.Plain.Echoed, k) {
			t.Errorf("the assistant message echoed back has no %q (it has %v)", k, r.Plain.Echoed)
		}
	}
	wantQuoted(t, "the plain answer (after echoing "+strings.Join(r.Plain.Echoed, ",")+")", r.Plain.Text)
	r.Stream.Call.want(t, "streamed")
	wantQuoted(t, "the streamed answer", r.Stream.Text)
	if r.Stream.Finish != "stop" {
		t.Errorf("streamed finish_reason %q, want stop", r.Stream.Finish)
	}
	if n, _ := r.Stream.Usage["completion_tokens"].(float64); n <= 0 {
		t.Errorf("include_usage: the last chunk's usage is %v", r.Stream.Usage)
	}
	r.UnknownField.want(t, "an unknown parameter", "Unrecognized request argument supplied: bogus_field", "", "")
	trips{path: "/v1/chat/completions", requests: 5, streamed: 2, failed: []int{400}}.expect(t, f)
}

func openaiRunTools(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[struct {
		PlainText  string `json:"plain_text"`
		StreamText string `json:"stream_text"`
		Calls      []any  `json:"calls"`
	}](t, m.script(t, f, "openai-run-tools.mjs"))
	wantQuoted(t, "the plain runner's answer", r.PlainText)
	wantQuoted(t, "the streamed runner's answer", r.StreamText)
	if len(r.Calls) != 2 {
		t.Errorf("the runners called get_weather %d times (%v), want 2", len(r.Calls), r.Calls)
	}
	trips{path: "/v1/chat/completions", requests: 4, streamed: 2}.expect(t, f)
}

func openaiParse(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "forecast.yaml")
	r := decodeReport[struct {
		Parsed       forecast `json:"parsed"`
		StreamParsed forecast `json:"stream_parsed"`
	}](t, m.script(t, f, "openai-parse.mjs"))
	r.Parsed.want(t, "parse()")
	r.StreamParsed.want(t, "stream().finalChatCompletion()")
	reqs := trips{path: "/v1/chat/completions", requests: 4, streamed: 2}.expect(t, f)
	for _, q := range reqs {
		if !strings.Contains(string(q.Request), `"json_schema"`) {
			t.Errorf("the request did not carry the json_schema response_format: %v", q)
		}
	}
}

func openaiResponses(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[openaiTurns](t, m.script(t, f, "openai-responses.mjs"))
	r.Plain.Call.want(t, "plain")
	wantQuoted(t, "the plain answer (previous_response_id)", r.Plain.Text)
	r.Stream.Call.want(t, "streamed")
	wantQuoted(t, "the streamed answer's output_text.delta events", r.Stream.Text)
	for _, ev := range []string{"response.created", "response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_text.delta", "response.completed"} {
		if !slices.Contains(r.Stream.Events, ev) {
			t.Errorf("the streams had no %s event (got %v)", ev, r.Stream.Events)
		}
	}
	if n, _ := r.Plain.Usage["output_tokens"].(float64); n <= 0 {
		t.Errorf("plain usage %v: no output_tokens", r.Plain.Usage)
	}
	if _, ok := r.Plain.Usage["input_tokens_details"].(map[string]any)["cached_tokens"].(float64); !ok {
		t.Errorf("plain usage %v: no input_tokens_details.cached_tokens", r.Plain.Usage)
	}
	r.UnknownPrevious.want(t, "an unknown previous_response_id",
		"Previous response with id 'resp_doesnotexist0000' not found.", "previous_response_id", "previous_response_not_found")
	r.UnknownField.want(t, "an unknown parameter", "Unknown parameter: 'bogus_field'.", "bogus_field", "unknown_parameter")
	trips{path: "/v1/responses", requests: 6, streamed: 2, failed: []int{400, 400}}.expect(t, f)
}

func openaiCaching(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[struct {
		First     map[string]any `json:"first_usage"`
		Second    map[string]any `json:"second_usage"`
		FinalText string         `json:"final_text"`
	}](t, m.script(t, f, "openai-cache.mjs"))
	wantQuoted(t, "the answer", r.FinalText)
	cached := func(u map[string]any) float64 {
		n, _ := u["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
		return n
	}
	// Cached from 1,024 tokens on, in steps of 128; never more
	// than the prompt.
	c, prompt := cached(r.Second), r.Second["prompt_tokens"].(float64)
	if cached(r.First) != 0 || c < 1024 || int(c)%128 != 0 || c > prompt {
		t.Errorf("cached_tokens %v then %v (prompt %v): want 0, then at least 1024 in steps of 128", cached(r.First), c, prompt)
	}
	trips{path: "/v1/chat/completions", requests: 2}.expect(t, f)
}

func openaiAgents(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[struct {
		Calls       []any  `json:"calls"`
		PlainText   string `json:"plain_text"`
		StreamText  string `json:"stream_text"`
		StreamFinal string `json:"stream_final"`
	}](t, m.script(t, f, "openai-agents.mjs"))
	if len(r.Calls) != 2 {
		t.Errorf("the agent ran get_weather %d times (%v), want once per run, 2", len(r.Calls), r.Calls)
	}
	wantQuoted(t, "the plain run's final output", r.PlainText)
	// The text stream holds every turn's text, the tool turn's too.
	wantQuoted(t, "the streamed run's text stream", r.StreamText)
	wantQuoted(t, "the streamed run's final output", r.StreamFinal)
	trips{path: "/v1/responses", requests: 4, streamed: 2}.expect(t, f)
}

func openaiModels(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml")
	r := decodeReport[modelsReport](t, m.script(t, f, "openai-models.mjs"))
	r.want(t, f, "object", "model", "/v1/chat/completions")
}

// openaiFaults: requests 1 and 2 (the first turn) fail with 429 and 500,
// which the SDK retries; the 4th, streamed, is cut after 200 bytes.
func openaiFaults(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "weather.yaml",
		"--fault", "1=rate_limit,retry_after=50ms", "--fault", "2=server_error", "--fault", "4=cut_stream,after_bytes=200")
	r := decodeReport[faultReport](t, m.script(t, f, "openai-faults.mjs"))
	wantQuoted(t, "the answer after the retried first turn and the cut stream", r.FinalText)
	if r.StreamError == nil {
		t.Error("the stream cut after 200 bytes did not fail")
	}
	trips{path: "/v1/chat/completions", requests: 5, streamed: 1, failed: []int{429, 500}}.expect(t, f)
}
