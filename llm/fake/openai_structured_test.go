package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/deputy-run/deputy/llm"
)

// thingSchema is a strict schema: every property required, no extras.
const thingSchema = `{"type":"object","properties":{"name":{"type":"string"},"count":{"type":"integer","minimum":2},"when":{"type":"string","format":"date"},"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"minItems":1},"note":{"type":["string","null"]}},"required":["name","count","when","tags","note"],"additionalProperties":false}`

type thing struct {
	Name  string   `json:"name"`
	Count int      `json:"count"`
	When  string   `json:"when"`
	Tags  []string `json:"tags"`
	Note  *string  `json:"note"`
}

func thingFormat(strict bool) openai.ChatCompletionNewParamsResponseFormatUnion {
	// Raw, so the schema goes out in its own key order (a map would be
	// sorted) and the answer's order can be checked.
	schema := json.RawMessage(thingSchema)
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "thing", Schema: schema, Strict: openai.Bool(strict)},
	}}
}

// TestOpenAISDKJSONSchemaAnswersJSON: a json_schema response format is
// answered with JSON valid against the schema, in the schema's key order,
// plain and streamed (the old fake answered the scripted text).
func TestOpenAISDKJSONSchemaAnswersJSON(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("Done."))})
	c := oaiClient(url)
	params := oaiSimpleParams("extract")
	params.ResponseFormat = thingFormat(true)
	res, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"Done.","count":2,"when":"2026-01-01","tags":["a"],"note":"text"}`
	if got := res.Choices[0].Message.Content; got != want {
		t.Errorf("content %s, want %s", got, want)
	}
	var th thing
	if err := json.Unmarshal([]byte(res.Choices[0].Message.Content), &th); err != nil || th.Count != 2 {
		t.Errorf("%v %+v", err, th)
	}
	if res.Choices[0].FinishReason != "stop" || !res.Choices[0].Message.JSON.Refusal.Valid() && res.Choices[0].Message.Refusal != "" {
		t.Errorf("choice: %s", res.Choices[0].RawJSON())
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != want {
		t.Errorf("streamed content %s, want %s", got, want)
	}
}

// TestOpenAIJSONSchemaKeepsValidText: scripted text that already is valid
// is the answer as it stands; a non-strict schema may leave properties
// optional.
func TestOpenAIJSONSchemaKeepsValidText(t *testing.T) {
	t.Parallel()
	text := `{"name": "box", "count": 7, "when": "2025-03-04", "tags": ["b"], "note": null}`
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text(text))})
	params := oaiSimpleParams("extract")
	params.ResponseFormat = thingFormat(true)
	c := oaiClient(url)
	res, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil || res.Choices[0].Message.Content != text {
		t.Fatalf("%v %q", err, res.Choices[0].Message.Content)
	}
	// Not strict: a required list that leaves properties optional and no
	// additionalProperties are fine. The text's valid values are kept.
	loose := `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"loose","schema":{"type":"object","properties":{"a":{"type":"integer"},"name":{"type":"string"},"count":{"type":"string"}},"required":["a","count"]}}}}`
	r := srvPost(t, url, "/v1/chat/completions", loose)
	if r.status != 200 || !strings.Contains(string(r.body), `"content":"{\"a\":0,\"name\":\"box\",\"count\":\"text\"}"`) {
		t.Errorf("non-strict: %d %s", r.status, r.body)
	}
}

// TestOpenAIJSONObject: json_object needs "json" in the prompt and is
// answered with a JSON object (the text wrapped, unless it is one).
func TestOpenAIJSONObject(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("Done."))})
	body := func(prompt string) string {
		return `{"model":"m","messages":[{"role":"user","content":"` + prompt + `"}],"response_format":{"type":"json_object"}}`
	}
	r := srvPost(t, url, "/v1/chat/completions", body("answer please"))
	m := srvJSON(t, r.body)
	if r.status != 400 || srvDig(m, "error", "param") != "messages" || !strings.HasPrefix(fmt.Sprint(srvDig(m, "error", "message")), "'messages' must contain the word 'json'") {
		t.Errorf("without json: %d %s", r.status, r.body)
	}
	r = srvPost(t, url, "/v1/chat/completions", body("answer in JSON"))
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got := srvDig(srvJSON(t, r.body), "choices"); !strings.Contains(string(r.body), `"content":"{\"text\":\"Done.\"}"`) {
		t.Errorf("answer: %v", got)
	}
}

// TestOpenAIStrictSchemaRefusals: strict mode's rules, each refused as the
// API refuses it: 400, param response_format, the rule and its context.
func TestOpenAIStrictSchemaRefusals(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	for _, c := range []struct{ name, schema, msg string }{
		{"no additionalProperties", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
			"In context=(), 'additionalProperties' is required to be supplied and to be false."},
		{"nested additionalProperties", `{"type":"object","properties":{"e":{"type":"object","properties":{},"required":[]}},"required":["e"],"additionalProperties":false}`,
			"In context=('properties', 'e'), 'additionalProperties' is required to be supplied and to be false."},
		{"optional property", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`,
			"In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'b'."},
		{"oneOf", `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"number"}]}},"required":["v"],"additionalProperties":false}`,
			"In context=('properties', 'v'), 'oneOf' is not permitted."},
		{"uri format", `{"type":"object","properties":{"u":{"type":"string","format":"uri"}},"required":["u"],"additionalProperties":false}`,
			"In context=('properties', 'u'), 'uri' is not a valid format."},
		{"items", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{}}}},"required":["l"],"additionalProperties":false}`,
			"In context=('properties', 'l', 'items'), 'additionalProperties' is required"},
		{"no type", `{"type":"object","properties":{"x":{"description":"?"}},"required":["x"],"additionalProperties":false}`,
			"In context=('properties', 'x'), schema must have a 'type' key."},
		{"root array", `{"type":"array","items":{"type":"string"}}`,
			`schema must be a JSON Schema of 'type: "object"', got 'type: "array"'.`},
	} {
		body := `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"t1","strict":true,"schema":` + c.schema + `}}}`
		r := srvPost(t, url, "/v1/chat/completions", body)
		m := srvJSON(t, r.body)
		msg := fmt.Sprint(srvDig(m, "error", "message"))
		if r.status != 400 || srvDig(m, "error", "param") != "response_format" || !strings.HasPrefix(msg, "Invalid schema for response_format 't1': "+c.msg) {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
}

// TestOpenAIStrictTools: a strict function's parameters are checked as a
// strict schema, and the arguments answered for it are valid against them
// even when the scenario's are not.
func TestOpenAIStrictTools(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.ToolUse("", "get_weather", json.RawMessage(`{"city":3}`)))})
	tool := func(params string) string {
		return `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"get_weather","strict":true,"parameters":` + params + `}}]}`
	}
	r := srvPost(t, url, "/v1/chat/completions", tool(`{"type":"object","properties":{"city":{"type":"string"}}}`))
	m := srvJSON(t, r.body)
	if r.status != 400 || srvDig(m, "error", "param") != "tools[0].function.parameters" || srvDig(m, "error", "code") != "invalid_function_parameters" ||
		!strings.HasPrefix(fmt.Sprint(srvDig(m, "error", "message")), "Invalid schema for function 'get_weather': In context=(), 'additionalProperties'") {
		t.Errorf("bad strict schema: %d %s", r.status, r.body)
	}
	r = srvPost(t, url, "/v1/chat/completions", tool(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`))
	if r.status != 200 || !strings.Contains(string(r.body), `"arguments":"{\"city\":\"text\"}"`) {
		t.Errorf("strict arguments: %d %s", r.status, r.body)
	}
}

// TestOpenAIStructuredRefusal: a refusal under a JSON format comes as
// message.refusal with content null and finish_reason stop.
func TestOpenAIStructuredRefusal(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: respondFunc(func(*llm.Request, RequestInfo) Reply {
		return Reply{Content: []llm.Block{llm.Text("I can't help with that.")}, StopReason: llm.StopRefusal}
	})})
	params := oaiSimpleParams("extract")
	params.ResponseFormat = thingFormat(true)
	c := oaiClient(url)
	res, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	msg := res.Choices[0].Message
	if msg.Refusal != "I can't help with that." || msg.JSON.Content.Raw() != "null" || res.Choices[0].FinishReason != "stop" {
		t.Errorf("refusal: %s", res.RawJSON())
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].Message.Refusal != "I can't help with that." || acc.Choices[0].Message.Content != "" {
		t.Errorf("streamed refusal: %v %+v", err, acc.Choices[0].Message)
	}
}

// TestOpenAIEchoedAssistantMessage replays, byte for byte, the request the
// official Node SDK (openai 6.49.0) sent when it appended the assistant
// message it had received (captured by TestOpenAINodeSDK): the old fake
// refused its own annotations: [] with "Unrecognized request argument
// supplied: annotations". The other fields an SDK echoes are accepted too.
func TestOpenAIEchoedAssistantMessage(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile("testdata/openai_node_echo.json")
	if err != nil {
		t.Fatal(err)
	}
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("ok"))})
	if r := srvPost(t, url, "/v1/chat/completions", string(body)); r.status != 200 {
		t.Fatalf("node echo: %d %s", r.status, r.body)
	}
	echoed := `{"role":"assistant","name":"bot","content":"Hi.","refusal":null,"annotations":[{"type":"url_citation","url_citation":{"start_index":0,"end_index":3,"title":"t","url":"https://example.com"}}],` +
		`"audio":{"id":"audio_1","data":"","expires_at":1,"transcript":"Hi."},"function_call":null,"parsed":null,` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}","parsed_arguments":{}}}]}`
	full := `{"model":"m","messages":[{"role":"user","name":"ann","content":"x"},` + echoed + `,{"role":"tool","tool_call_id":"call_1","content":"r"}]}`
	if r := srvPost(t, url, "/v1/chat/completions", full); r.status != 200 {
		t.Errorf("every echoed field: %d %s", r.status, r.body)
	}
}

// TestOpenAIGoSDKEchoesMessage: openai-go's ToParam of an answer goes back
// as the next request's assistant message and is accepted.
func TestOpenAIGoSDKEchoesMessage(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: weatherResponder()})
	c := oaiClient(url)
	params := oaiSimpleParams("weather?")
	res, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	params.Messages = append(params.Messages, res.Choices[0].Message.ToParam(),
		openai.ToolMessage("sunny", res.Choices[0].Message.ToolCalls[0].ID))
	res, err = c.Chat.Completions.New(context.Background(), params)
	if err != nil || res.Choices[0].Message.Content != "It is sunny." {
		t.Fatalf("%v %+v", err, res)
	}
}

// TestOpenAIUnknownParams: a field the API does not know is refused where
// it is: top-level as "Unrecognized request argument supplied", inside
// the body as "Unknown parameter: 'path'." with that path as param.
func TestOpenAIUnknownParams(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	user := `{"role":"user","content":"hi"}`
	for _, c := range []struct{ name, body, msg, param, code string }{
		{"top level", `{"model":"m","messages":[` + user + `],"temperatur":1}`, "Unrecognized request argument supplied: temperatur", "", ""},
		{"message", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"a","reasoning":"r"}]}`, "Unknown parameter: 'messages[1].reasoning'.", "messages[1].reasoning", "unknown_parameter"},
		{"content part", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`, "Unknown parameter: 'messages[0].content[0].cache_control'.", "messages[0].content[0].cache_control", "unknown_parameter"},
		{"tool call function", `{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}","extra":1}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`, "Unknown parameter: 'messages[1].tool_calls[0].function.extra'.", "messages[1].tool_calls[0].function.extra", "unknown_parameter"},
		{"response format", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{},"strictly":true}}}`, "Unknown parameter: 'response_format.json_schema.strictly'.", "response_format.json_schema.strictly", "unknown_parameter"},
		{"bad reasoning_effort", `{"model":"m","messages":[` + user + `],"reasoning_effort":"extreme"}`, "Invalid value: 'extreme'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high', 'xhigh', and 'max'.", "reasoning_effort", "invalid_value"},
		{"bad verbosity", `{"model":"m","messages":[` + user + `],"verbosity":"loud"}`, "Invalid value: 'loud'.", "verbosity", "invalid_value"},
		{"bad modality", `{"model":"m","messages":[` + user + `],"modalities":["text","video"]}`, "Invalid value: 'video'.", "modalities[1]", "invalid_value"},
		{"bad prediction", `{"model":"m","messages":[` + user + `],"prediction":{"type":"guess","content":"x"}}`, "Invalid value: 'guess'.", "prediction.type", "invalid_value"},
		{"store not a boolean", `{"model":"m","messages":[` + user + `],"store":"yes"}`, "Invalid type for 'store'", "store", "invalid_type"},
		{"response format type", `{"model":"m","messages":[` + user + `],"response_format":{"type":"yaml"}}`, "Invalid value: 'yaml'. Supported values are: 'text', 'json_object', and 'json_schema'.", "response_format.type", "invalid_value"},
		{"schema name", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"a b"}}}`, "Invalid 'response_format.json_schema.name': string does not match pattern.", "response_format.json_schema.name", "invalid_value"},
		{"no schema name", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "Missing required parameter: 'response_format.json_schema.name'.", "response_format.json_schema.name", "missing_required_parameter"},
	} {
		r := srvPost(t, url, "/v1/chat/completions", c.body)
		m := srvJSON(t, r.body)
		msg, _ := srvDig(m, "error", "message").(string)
		param, code := fmt.Sprint(srvDig(m, "error", "param")), fmt.Sprint(srvDig(m, "error", "code"))
		if c.param == "" {
			c.param = "<nil>"
		}
		if c.code == "" {
			c.code = "<nil>"
		}
		if r.status != 400 || !strings.HasPrefix(msg, c.msg) || param != c.param || code != c.code {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
}

// TestOpenAIAcceptedSettings: the options the API takes are accepted as
// it takes them, and service_tier is answered with the tier asked for.
func TestOpenAIAcceptedSettings(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("ok"))})
	params := oaiSimpleParams("hi")
	params.MaxCompletionTokens = openai.Int(100)
	params.ReasoningEffort = shared.ReasoningEffortLow
	params.ParallelToolCalls = openai.Bool(true)
	params.Store = openai.Bool(true)
	params.Metadata = shared.Metadata{"run": "r1"}
	params.ServiceTier = openai.ChatCompletionNewParamsServiceTierFlex
	params.PromptCacheKey = openai.String("k")
	params.Verbosity = openai.ChatCompletionNewParamsVerbosityLow
	params.Modalities = []string{"text"}
	params.Prediction = openai.ChatCompletionPredictionContentParam{Content: openai.ChatCompletionPredictionContentContentUnionParam{OfString: openai.String("ok")}}
	params.User = openai.String("u")
	params.SafetyIdentifier = openai.String("s")
	c := oaiClient(url)
	res, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServiceTier != "flex" || res.Choices[0].Message.Content != "ok" {
		t.Errorf("answer: %s", res.RawJSON())
	}
	params.ServiceTier = openai.ChatCompletionNewParamsServiceTierAuto
	if res, err = c.Chat.Completions.New(context.Background(), params); err != nil || res.ServiceTier != "default" {
		t.Errorf("auto: %v %s", err, res.RawJSON())
	}
}

// TestOpenAIJSONSchemaCutByMaxTokens: an answer that runs into
// max_completion_tokens stops mid-JSON with finish_reason length, as a
// real one does (openai-node's parse then throws LengthFinishReasonError).
func TestOpenAIJSONSchemaCutByMaxTokens(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text(strings.Repeat("word ", 40)))})
	body := `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"t","strict":true,"schema":` + thingSchema + `}}}`
	r := srvPost(t, url, "/v1/chat/completions", body)
	m := srvJSON(t, r.body)
	content, _ := srvDig(m, "choices", 0, "message", "content").(string)
	if r.status != 200 || srvDig(m, "choices", 0, "finish_reason") != "length" || content == "" || json.Valid([]byte(content)) || !strings.HasPrefix(content, `{"name":"`) {
		t.Errorf("%d %s", r.status, r.body)
	}
}

// TestOpenAIMetadataLimits: metadata holds at most 16 pairs, and values
// of at most 512 characters.
func TestOpenAIMetadataLimits(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	pairs := make([]string, 17)
	for i := range pairs {
		pairs[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	for _, c := range []struct{ meta, param, code string }{
		{"{" + strings.Join(pairs, ",") + "}", "metadata", "object_above_max_properties"},
		{`{"a":"` + strings.Repeat("x", 513) + `"}`, "metadata.a", "string_above_max_length"},
	} {
		r := srvPost(t, url, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"metadata":`+c.meta+`}`)
		m := srvJSON(t, r.body)
		if r.status != 400 || srvDig(m, "error", "param") != c.param || srvDig(m, "error", "code") != c.code {
			t.Errorf("%s: %d %s", c.param, r.status, r.body)
		}
	}
}
