package fake

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/deputy-run/deputy/llm"
)

// weatherSchema is a structured-output schema with what the API takes of
// JSON Schema: required properties, no others.
var weatherSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city": map[string]any{"type": "string"},
		"temp": map[string]any{"type": "integer", "minimum": -50, "maximum": 60},
	},
	"required":             []any{"city", "temp"},
	"additionalProperties": false,
}

// checkWeather fails unless answer is a JSON instance of weatherSchema.
func checkWeather(t *testing.T, answer string) {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(answer), &v); err != nil {
		t.Fatalf("answer is not JSON: %v: %q", err, answer)
	}
	_, ok1 := v["city"].(string)
	temp, ok2 := v["temp"].(float64)
	if !ok1 || !ok2 || len(v) != 2 || temp != float64(int(temp)) || temp < -50 || temp > 60 {
		t.Errorf("answer does not meet the schema: %s", answer)
	}
}

// TestAnthropicSDKStructuredOutput answers output_config.format with JSON
// valid against its schema, whole and streamed, and keeps a scripted text
// that already is.
func TestAnthropicSDKStructuredOutput(t *testing.T) {
	t.Parallel()
	params := func(text string) anthropic.MessageNewParams {
		p := anthSimpleParams(text)
		p.OutputConfig = anthropic.OutputConfigParam{Effort: anthropic.OutputConfigEffortHigh, Format: anthropic.JSONOutputFormatParam{Schema: weatherSchema}}
		return p
	}
	echo := respondFunc(func(r *llm.Request, _ RequestInfo) Reply {
		return Reply{Content: []llm.Block{llm.Text(r.Messages[0].Content[0].Text)}}
	})
	_, url := srvStart(t, Options{Responder: echo})
	c := anthClient(url)
	ctx := context.Background()

	msg, err := c.Messages.New(ctx, params("It is sunny in Paris."))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 {
		t.Fatalf("content: %s", msg.RawJSON())
	}
	checkWeather(t, msg.Content[0].Text)
	if int(msg.Usage.OutputTokens) != llm.EstimateTokens(msg.Content[0].Text) {
		t.Errorf("output tokens %d are not the JSON answer's %d", msg.Usage.OutputTokens, llm.EstimateTokens(msg.Content[0].Text))
	}

	valid := `{"city":"Oslo","temp":-3}`
	if msg, err = c.Messages.New(ctx, params(valid)); err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != valid {
		t.Errorf("a valid instance was replaced: %q", msg.Content[0].Text)
	}

	stream := c.Messages.NewStreaming(ctx, params("Streamed weather."))
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	checkWeather(t, acc.Content[0].Text)
}

// TestAnthropicOutputFormatRefusesBadSchema refuses a schema nothing can
// meet, at its path, on the deprecated output_format too.
func TestAnthropicOutputFormatRefusesBadSchema(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	body := `{"model":"m","max_tokens":50,"output_format":{"type":"json_schema","schema":{"type":"integer","minimum":5,"maximum":1}},"messages":[{"role":"user","content":"hi"}]}`
	r := srvPost(t, url, "/v1/messages", body)
	if msg, _ := srvDig(srvJSON(t, r.body), "error", "message").(string); r.status != 400 || !strings.HasPrefix(msg, "output_format.schema: ") {
		t.Errorf("%d %s", r.status, r.body)
	}
	ok := `{"model":"m","max_tokens":50,"output_format":{"type":"json_schema","schema":{"type":"integer"}},"messages":[{"role":"user","content":"hi"}]}`
	r = srvPost(t, url, "/v1/messages", ok)
	var n int
	if text, _ := srvDig(srvJSON(t, r.body), "content", 0, "text").(string); r.status != 200 || json.Unmarshal([]byte(text), &n) != nil {
		t.Errorf("output_format integer: %d %s", r.status, r.body)
	}
}

// TestAnthropicCountTokensTakesTheSameFields counts a Claude Code style
// request (system message, output_config, adaptive thinking, context
// management) as the input its answer reports.
func TestAnthropicCountTokensTakesTheSameFields(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	fields := `"model":"m","system":"You are terse.","thinking":{"type":"adaptive"},"output_config":{"effort":"low"},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},` +
		`"messages":[{"role":"user","content":"hello there"},{"role":"system","content":"answer in French","output_config":{"effort":"max"}}]`
	count := srvPost(t, url, "/v1/messages/count_tokens", "{"+fields+"}")
	if count.status != 200 {
		t.Fatalf("count_tokens: %d %s", count.status, count.body)
	}
	answer := srvPost(t, url, "/v1/messages", `{"max_tokens":50,`+fields+`}`)
	if answer.status != 200 {
		t.Fatalf("messages: %d %s", answer.status, answer.body)
	}
	n := srvDig(srvJSON(t, count.body), "input_tokens")
	want := float64(llm.EstimateTokens("You are terse.") + 4 + 4 + llm.EstimateTokens("hello there") + llm.EstimateTokens("answer in French"))
	if n != srvDig(srvJSON(t, answer.body), "usage", "input_tokens") || n != want {
		t.Errorf("count_tokens says %v, the answer's usage %v, the rule %v", n, srvDig(srvJSON(t, answer.body), "usage", "input_tokens"), want)
	}
}

// TestAnthropicThinkingDisplayOmitted sends thinking blocks without their
// text but with their signature when display is "omitted", whole and
// streamed, and still bills the thinking.
func TestAnthropicThinkingDisplayOmitted(t *testing.T) {
	t.Parallel()
	think := llm.Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"first I consider the question","signature":"sig-1"}`))
	_, url := srvStart(t, Options{Responder: replyWith(think, llm.Text("Done."))})
	for _, stream := range []bool{false, true} {
		body := `{"model":"m","max_tokens":500,"stream":` + strconv.FormatBool(stream) + `,"thinking":{"type":"adaptive","display":"omitted"},"messages":[{"role":"user","content":"hi"}]}`
		r := srvPost(t, url, "/v1/messages", body)
		if r.status != 200 || strings.Contains(string(r.body), "first I consider") || !strings.Contains(string(r.body), "sig-1") {
			t.Errorf("stream %v: %s", stream, r.body)
		}
		if stream {
			continue
		}
		out := srvDig(srvJSON(t, r.body), "usage", "output_tokens")
		if want := float64(llm.EstimateOutput([]llm.Block{think, llm.Text("Done.")})); out != want {
			t.Errorf("output tokens %v, want the whole thinking's %v", out, want)
		}
	}
}
