package fake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	anthssestream "github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	oaissestream "github.com/openai/openai-go/v3/packages/ssestream"
)

func TestSSEWriterFrames(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := newSSEWriter(&b)
	for _, ev := range []sseEvent{
		{"message_start", `{"type":"message_start"}`},
		{"", "[DONE]"},
		{"multi", "line one\nline two\r\nline three\rend"},
		{"empty", ""},
		{"trailing", "x\n"},
	} {
		if err := w.event(ev.Name, []byte(ev.Data)); err != nil {
			t.Fatal(err)
		}
	}
	want := "event: message_start\ndata: {\"type\":\"message_start\"}\n\n" +
		"data: [DONE]\n\n" +
		"event: multi\ndata: line one\ndata: line two\ndata: line three\ndata: end\n\n" +
		"event: empty\ndata: \n\n" +
		"event: trailing\ndata: x\ndata: \n\n"
	if b.String() != want {
		t.Fatalf("frames:\n%q\nwant\n%q", b.String(), want)
	}
	evs, err := parseSSE(&b)
	if err != nil {
		t.Fatal(err)
	}
	wantEvs := []sseEvent{
		{"message_start", `{"type":"message_start"}`},
		{"", "[DONE]"},
		{"multi", "line one\nline two\nline three\nend"},
		{"empty", ""},
		{"trailing", "x\n"},
	}
	if len(evs) != len(wantEvs) {
		t.Fatalf("parsed %d events: %+v", len(evs), evs)
	}
	for i := range evs {
		if evs[i] != wantEvs[i] {
			t.Errorf("event %d: %+v, want %+v", i, evs[i], wantEvs[i])
		}
	}
	if err := w.event("bad\nname", nil); err == nil {
		t.Error("an event name with a line break was written")
	}
}

func TestParseSSEFollowsTheStandard(t *testing.T) {
	t.Parallel()
	in := ": a comment\r\n" +
		"event:ping\r\ndata:{\"type\": \"ping\"}\r\n\r\n" + // no space after the colon, CRLF
		"id: 7\rretry: 10\revent: x\rdata: a\rdata:  b\r\r" + // lone CRs, a kept second space
		"event: no-data\n\n" + // no data: not dispatched
		"data\n\n" + // a field with no colon is a data line with an empty value
		"event: unterminated\ndata: lost"
	evs, err := parseSSE(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []sseEvent{{"ping", `{"type": "ping"}`}, {"x", "a\n b"}, {"", ""}}
	if len(evs) != len(want) {
		t.Fatalf("%+v", evs)
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, evs[i], want[i])
		}
	}
}

// normalizeLines is what a data value becomes after an SSE round trip:
// every line break is a \n.
func normalizeLines(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// sdkDecoders are the official SDKs' SSE decoders, which are what reads
// the fake's streams in production. Each returns the events of a whole
// stream with the data's final \n (both SDKs keep one per data line)
// removed.
var sdkDecoders = []struct {
	name   string
	decode func(body []byte) ([]sseEvent, error)
}{
	{"anthropic-sdk-go", func(body []byte) ([]sseEvent, error) {
		d := anthssestream.NewDecoder(sseResponse(body))
		var out []sseEvent
		for d.Next() {
			ev := d.Event()
			out = append(out, sseEvent{Name: ev.Type, Data: strings.TrimSuffix(string(ev.Data), "\n")})
		}
		return out, d.Err()
	}},
	{"openai-go", func(body []byte) ([]sseEvent, error) {
		d := oaissestream.NewDecoder(sseResponse(body))
		var out []sseEvent
		for d.Next() {
			ev := d.Event()
			out = append(out, sseEvent{Name: ev.Type, Data: strings.TrimSuffix(string(ev.Data), "\n")})
		}
		return out, d.Err()
	}},
}

// sseResponse wraps a stream body the way an SDK receives it.
func sseResponse(body []byte) *http.Response {
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(bytes.NewReader(body))}
}

// FuzzSSERoundTrip writes fuzzed events with the fake's writer and reads
// them back with both SDKs' decoders, so the writer is checked against the
// parsers its streams really meet, not against the fake's own test parser.
// Data gives every line break back as \n; an event name with a line break
// is refused. Empty data must arrive too: the OpenAI decoder drops an event
// with no data line, so the writer always writes one.
func FuzzSSERoundTrip(f *testing.F) {
	f.Add("message_start", []byte(`{"type":"message_start"}`), "", []byte("[DONE]"))
	f.Add("", []byte("a\nb\r\nc\rd"), "x:y", []byte(""))
	f.Add(" spaced", []byte(" leading space\n"), "error", []byte("\r\r\n\n"))
	f.Add("ünï", []byte("\xff\xfe"), ":comment-like", []byte("data: nested"))
	f.Add("", []byte(""), "", []byte("\n"))
	f.Fuzz(func(t *testing.T, name1 string, data1 []byte, name2 string, data2 []byte) {
		var b bytes.Buffer
		w := newSSEWriter(&b)
		var want []sseEvent
		for _, ev := range []struct {
			name string
			data []byte
		}{{name1, data1}, {name2, data2}} {
			err := w.event(ev.name, ev.data)
			if strings.ContainsAny(ev.name, "\r\n") {
				if err == nil {
					t.Fatalf("name %q with a line break was written", ev.name)
				}
				continue
			}
			if err != nil {
				t.Fatalf("write %q: %v", ev.name, err)
			}
			want = append(want, sseEvent{Name: ev.name, Data: normalizeLines(string(ev.data))})
		}
		for _, d := range sdkDecoders {
			got, err := d.decode(b.Bytes())
			if err != nil {
				t.Fatalf("%s: %v", d.name, err)
			}
			if len(got) != len(want) {
				t.Fatalf("%s decoded %d events, wrote %d: %+v\nstream %q", d.name, len(got), len(want), got, b.Bytes())
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: event %d: got %+v, want %+v\nstream %q", d.name, i, got[i], want[i], b.Bytes())
				}
			}
		}
	})
}

// fuzzServer answers every fuzzed request; one is enough, it is safe for
// concurrent use.
var fuzzServer = NewServer(Options{MaxDelta: 7, MaxLogged: -1})

// checkAnswer asserts the property every answer must have: a 200 whose
// body is well-formed for the wire, or a 4xx carrying a JSON error in the
// provider's shape.
func checkAnswer(t *testing.T, p Provider, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.Bytes()
	switch {
	case rec.Code == http.StatusOK:
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			evs, err := parseSSE(bytes.NewReader(body))
			if err != nil || len(evs) == 0 {
				t.Fatalf("stream: %v, %d events", err, len(evs))
			}
			for _, ev := range evs {
				if ev.Data != "[DONE]" && !json.Valid([]byte(ev.Data)) {
					t.Fatalf("event data is not JSON: %q", ev.Data)
				}
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("200 body is not JSON: %q", body)
		}
	case rec.Code >= 400 && rec.Code < 500:
		var e map[string]any
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("%d body is not JSON: %q", rec.Code, body)
		}
		msg, _ := srvDig(e, "error", "message").(string)
		typ, _ := srvDig(e, "error", "type").(string)
		if msg == "" || typ == "" || (p == Anthropic && e["type"] != "error") {
			t.Fatalf("%d error body has the wrong shape: %s", rec.Code, body)
		}
	default:
		t.Fatalf("status %d: %s", rec.Code, body)
	}
}

// fuzzResponsesSeeds are Responses bodies reaching what responses_decode.go
// and responses_items.go read: function and custom tool calls and their
// outputs, reasoning with encrypted_content, item_reference, namespace
// tools and additional_tools (Codex CLI's code mode), instructions,
// developer messages and text.format.
var fuzzResponsesSeeds = []string{
	`{"model":"gpt-5","input":"hello"}`,
	`{"model":"gpt-5","stream":true,"input":"w","tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}],"tool_choice":"required"}`,
	`{"model":"gpt-5","input":[{"role":"user","content":[{"type":"input_text","text":"go"}]},{"type":"function_call","call_id":"call_1","name":"lookup","arguments":"{\"q\":1}"},{"type":"function_call_output","call_id":"call_1","output":"done"}],"text":{"format":{"type":"json_schema","name":"out","strict":true,"schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}}}}`,
	`{"model":"gpt-5","input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"encrypted_content":"gAAAAB-seed"},{"type":"item_reference","id":"msg_seed"}],"reasoning":{"effort":"minimal","summary":"auto"},"include":["reasoning.encrypted_content"],"max_output_tokens":16}`,
	`{"model":"gpt-5","store":false,"input":[{"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":"*** Begin Patch"},{"type":"custom_tool_call_output","call_id":"c2","output":"ok"}],"tools":[{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}},{"type":"namespace","name":"fs","tools":[{"type":"function","name":"read","parameters":{"type":"object"}}]}]}`,
	`{"model":"gpt-5","stream":true,"instructions":"terse","input":[{"type":"additional_tools","tools":[{"type":"function","name":"extra","parameters":{"type":"object"}}]},{"role":"developer","content":"say json"},{"role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]},{"role":"user","content":"json please"}],"text":{"format":{"type":"json_object"}}}`,
	`{"model":"gpt-5","previous_response_id":"resp_missing","input":"again"}`,
}

// fuzzMessagesSeeds reach the Messages fields the fuzz target's first seeds
// predate: role-system messages (with tool_addition), threads,
// output_config and output_format, context_management and adaptive
// thinking.
var fuzzMessagesSeeds = []string{
	`{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"q"},{"role":"system","content":[{"type":"text","text":"mid"},{"type":"tool_addition","tool":{"name":"t","input_schema":{"type":"object"}}}]},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_9","name":"t","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"r"}]}],"tools":[{"name":"t","input_schema":{"type":"object"}}],"thinking":{"type":"adaptive","display":"omitted"},"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]}}`,
	`{"model":"claude-test","max_tokens":64,"stream":true,"thread":{"type":"create"},"system":"s","messages":[{"role":"user","content":"q"}],"output_config":{"effort":"low","format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}}}`,
	`{"model":"claude-test","max_tokens":64,"thread":{"type":"continue","previous_message_id":"msg_seed"},"messages":[{"role":"user","content":"more"}]}`,
	`{"model":"claude-test","max_tokens":64,"output_format":{"type":"json_schema","schema":{"type":"object"}},"messages":[{"role":"user","content":"q"}]}`,
}

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range fuzzResponsesSeeds {
		f.Add("/v1/responses", []byte(s))
	}
	for _, s := range fuzzMessagesSeeds {
		f.Add("/v1/messages", []byte(s))
	}
	for _, s := range []string{
		helloAnthropic, anthStreamBody, helloOpenAI, oaiStreamBody, "", "null", "[]", `{"model":`, "\xff",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}]}`,
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{"}}]},{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"r"}]}]}`,
		`{"model":"m","max_tokens":0,"stop_sequences":[""],"messages":[{"role":"user","content":""}]}`,
		`{"model":"m","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":1024},"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"q"}]}`,
	} {
		for _, path := range []string{"/v1/messages", "/v1/chat/completions", "/v1/messages/count_tokens", "/v1/responses"} {
			f.Add(path, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		p := Anthropic
		switch path {
		case "/v1/messages", "/v1/messages/count_tokens":
		case "/v1/chat/completions", "/v1/responses":
			p = OpenAI
		default:
			path = "/v1/messages"
		}
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		rec := httptest.NewRecorder()
		fuzzServer.ServeHTTP(rec, req)
		checkAnswer(t, p, rec)
	})
}
