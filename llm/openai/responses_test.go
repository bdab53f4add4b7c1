package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/retry"
)

// A reasoning item as the API sends it, with what an encoder could change:
// an escape (\u00e9), HTML-ish characters, a slash, base64's + / =.
const reasoningItem = `{"id":"rs_01","type":"reasoning","summary":[{"type":"summary_text","text":"Think <first> & caf\u00e9 / then \"call\""}],"encrypted_content":"gAAAAB+/xyz=="}`

// wireResponse is a whole response: reasoning, a message, a function call.
func wireResponse(status, incomplete string) string {
	inc := "null"
	if incomplete != "" {
		inc = `{"reason":"` + incomplete + `"}`
	}
	return `{"id":"resp_1","object":"response","created_at":1,"status":"` + status + `","model":"gpt-5","incomplete_details":` + inc + `,"error":null,` +
		`"output":[` + reasoningItem + `,` +
		`{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Let me <check>.","annotations":[]}]},` +
		`{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"now","arguments":"{\"tz\": \"UTC\",  \"a\":1}"}],` +
		`"usage":{"input_tokens":3000,"input_tokens_details":{"cached_tokens":2048},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":3040}}`
}

// sseEvents streams wireResponse as the API's typed events.
func sseEvents(full string) string {
	var b strings.Builder
	ev := func(typ, body string) { fmt.Fprintf(&b, "event: %s\ndata: {\"type\":%q,%s}\n\n", typ, typ, body) }
	ev("response.created", `"sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-5","output":[]}`)
	ev("response.output_item.added", `"output_index":0,"item":{"id":"rs_01","type":"reasoning","summary":[]}`)
	ev("response.reasoning_summary_text.delta", `"output_index":0,"item_id":"rs_01","summary_index":0,"delta":"Think <first>"`)
	ev("response.output_item.done", `"output_index":0,"item":`+reasoningItem)
	ev("response.output_item.added", `"output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","status":"in_progress","content":[]}`)
	ev("response.output_text.delta", `"output_index":1,"item_id":"msg_1","content_index":0,"delta":"Let me "`)
	ev("response.output_text.delta", `"output_index":1,"item_id":"msg_1","content_index":0,"delta":"<check>."`)
	ev("response.output_item.added", `"output_index":2,"item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"now","arguments":""}`)
	ev("response.function_call_arguments.delta", `"output_index":2,"item_id":"fc_1","delta":"{\"tz\": \"UTC\","`)
	ev("response.function_call_arguments.delta", `"output_index":2,"item_id":"fc_1","delta":"  \"a\":1}"`)
	ev("response.completed", `"sequence_number":9,"response":`+full)
	return b.String()
}

// responsesServer answers POST /v1/responses with answer(n, body) for the
// n-th request (from 0) and keeps the bodies.
type responsesServer struct {
	mu     sync.Mutex
	bodies [][]byte
	answer func(n int, w http.ResponseWriter, stream bool)
}

func (s *responsesServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	if r.URL.Path != "/v1/responses" {
		http.Error(w, `{"error":{"message":"wrong path","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	var p struct{ Stream bool }
	_ = json.Unmarshal(body, &p)
	w.Header().Set("x-request-id", fmt.Sprintf("req_%d", n))
	s.answer(n, w, p.Stream)
}

func (s *responsesServer) body(n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[n]
}

// answerWith writes full: indented JSON (as the API writes a plain
// answer), or as events.
func answerWith(full string) func(int, http.ResponseWriter, bool) {
	return func(_ int, w http.ResponseWriter, stream bool) {
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, sseEvents(full))
			return
		}
		var b bytes.Buffer
		_ = json.Indent(&b, []byte(full), "", "  ")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b.Bytes())
	}
}

func newResponsesModel(t *testing.T, h http.Handler, nonStreaming bool, opts ...func(*openai.Options)) *openai.Model {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	p := retry.Default()
	p.BaseDelay, p.StallTimeout, p.Clock = 0, 0, clock.NewInstant()
	o := openai.Options{APIKey: "k", BaseURL: srv.URL + "/v1", Retry: &p, NonStreaming: nonStreaming, Responses: true}
	for _, f := range opts {
		f(&o)
	}
	m, err := openai.New("gpt-5", o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The reasoning item is stored as its JSON, compact, and goes back in the
// next request as exactly those bytes; the call, its result and the text
// go back as the items the wire expects, in transcript order. The stored
// bytes are pinned: any byte changed on the way in or out fails.
func TestResponsesReasoningRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name         string
		nonStreaming bool
		stream       bool
	}{{"plain", true, false}, {"stream", false, true}, {"buffered", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := &responsesServer{answer: answerWith(wireResponse("completed", ""))}
			m := newResponsesModel(t, srv, c.nonStreaming)
			var deltas []llm.Delta
			var cb func(llm.Delta)
			if c.stream {
				cb = func(d llm.Delta) { deltas = append(deltas, d) }
			}
			msgs := []llm.Message{llm.UserText("What time is it?")}
			resp, err := m.Generate(context.Background(), &llm.Request{System: "Be brief.", Messages: msgs, Tools: []llm.ToolSpec{{Name: "now",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"tz":{"type":"string"}}}`)}}, MaxTokens: 500}, cb)
			if err != nil {
				t.Fatal(err)
			}
			checkFirstTurn(t, resp)
			if c.stream {
				checkDeltas(t, deltas)
			}
			msgs = append(msgs, resp.Message(), llm.Message{Role: llm.User, Content: []llm.Block{llm.ToolResult("call_1", "12:00 <UTC>", false)}})
			if _, err := m.Generate(context.Background(), &llm.Request{Messages: msgs, MaxTokens: 500}, nil); err != nil {
				t.Fatal(err)
			}
			checkSecondRequest(t, srv.body(1))
		})
	}
}

func checkFirstTurn(t *testing.T, resp *llm.Response) {
	t.Helper()
	if len(resp.Content) != 3 {
		t.Fatalf("blocks %+v", resp.Content)
	}
	if r := resp.Content[0]; r.Type != "reasoning" || string(r.Raw) != reasoningItem {
		t.Errorf("reasoning block %s %s, want the item's bytes %s", r.Type, r.Raw, reasoningItem)
	}
	if tx := resp.Content[1]; tx.Type != llm.TypeText || tx.Text != "Let me <check>." {
		t.Errorf("text block %+v", tx)
	}
	if tu := resp.Content[2]; tu.Type != llm.TypeToolUse || tu.ID != "call_1" || tu.Name != "now" || string(tu.Input) != `{"tz": "UTC",  "a":1}` {
		t.Errorf("tool_use block %+v (input %s)", tu, tu.Input)
	}
	if resp.StopReason != llm.StopToolUse || resp.ID != "resp_1" || resp.Model != "gpt-5" {
		t.Errorf("stop %q id %q model %q", resp.StopReason, resp.ID, resp.Model)
	}
	if want := (llm.Usage{InputTokens: 952, CacheReadTokens: 2048, OutputTokens: 40}); resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
}

// checkDeltas: each delta's Index is its block's position.
func checkDeltas(t *testing.T, ds []llm.Delta) {
	t.Helper()
	text := map[int]string{}
	for _, d := range ds {
		text[d.Index] += d.Text
		if d.Index == 2 && d.Type == llm.TypeToolUse && d.ID != "" && (d.ID != "call_1" || d.Name != "now") {
			t.Errorf("first tool delta %+v", d)
		}
	}
	if text[0] != "Think <first>" || text[1] != "Let me <check>." || text[2] != `{"tz": "UTC",  "a":1}` {
		t.Errorf("streamed %v", text)
	}
}

// checkSecondRequest reads the request after the tool call.
func checkSecondRequest(t *testing.T, body []byte) {
	t.Helper()
	if !bytes.Contains(body, []byte(reasoningItem)) {
		t.Errorf("body lacks the stored reasoning bytes:\n%s", body)
	}
	var p struct {
		Store   *bool             `json:"store"`
		Include []string          `json:"include"`
		Input   []json.RawMessage `json:"input"`
		Stop    json.RawMessage   `json:"stop"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Store == nil || *p.Store || len(p.Include) != 1 || p.Include[0] != "reasoning.encrypted_content" {
		t.Errorf("store %v include %v: want false and the encrypted reasoning", p.Store, p.Include)
	}
	want := []string{
		`{"content":"What time is it?","role":"user","type":"message"}`,
		reasoningItem,
		`{"content":"Let me <check>.","role":"assistant","type":"message"}`,
		`{"arguments":"{\"tz\": \"UTC\",  \"a\":1}","call_id":"call_1","name":"now","type":"function_call"}`,
		`{"output":"12:00 <UTC>","call_id":"call_1","type":"function_call_output"}`,
	}
	if len(p.Input) != len(want) {
		t.Fatalf("input %s", body)
	}
	for i, w := range want {
		if string(p.Input[i]) != w {
			t.Errorf("input %d: %s, want %s", i, p.Input[i], w)
		}
	}
}

// The first request carries every parameter the wire has for deputy's.
func TestResponsesRequestParameters(t *testing.T) {
	t.Parallel()
	srv := &responsesServer{answer: answerWith(wireResponse("completed", ""))}
	m := newResponsesModel(t, srv, true)
	temp := 0.25
	_, err := m.Generate(context.Background(), &llm.Request{System: "Be brief.", Messages: []llm.Message{{Role: llm.User, Content: []llm.Block{llm.Text("a"), llm.Text("b")}}},
		Tools:      []llm.ToolSpec{{Name: "now", Description: "The time.", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}},
		ToolChoice: llm.ToolChoice{Type: "tool", Name: "now", DisableParallel: true}, MaxTokens: 77, Temperature: &temp}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := string(srv.body(0))
	for _, w := range []string{`"instructions":"Be brief."`, `"max_output_tokens":77`, `"temperature":0.25`, `"parallel_tool_calls":false`,
		`"tool_choice":{"name":"now","type":"function"}`, `"tools":[{"strict":false,"parameters":{"properties":{},"type":"object"},"name":"now","description":"The time.","type":"function"}]`,
		`"input":[{"content":[{"text":"a","type":"input_text"},{"text":"b","type":"input_text"}],"role":"user","type":"message"}]`, `"model":"gpt-5"`, `"store":false`} {
		if !strings.Contains(body, w) {
			t.Errorf("body lacks %s:\n%s", w, body)
		}
	}
	if strings.Contains(body, `"stream"`) {
		t.Errorf("plain call asked for a stream: %s", body)
	}
	// Below the API's floor of 16, the floor is asked for.
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("a")}, MaxTokens: 5}, nil); err != nil {
		t.Fatal(err)
	}
	if body := string(srv.body(1)); !strings.Contains(body, `"max_output_tokens":16`) {
		t.Errorf("max_tokens 5 sent as %s", body)
	}
}

// Requests the wire cannot carry are refused before anything is sent, and
// models that do not reason are not asked for encrypted reasoning (they
// answer 400).
func TestResponsesRefusalsAndNonReasoningModels(t *testing.T) {
	t.Parallel()
	srv := &responsesServer{answer: answerWith(wireResponse("completed", ""))}
	m := newResponsesModel(t, srv, true)
	_, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, StopSequences: []string{"END"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "openai: stop sequences") || !strings.Contains(err.Error(), "no stop parameter") {
		t.Errorf("stop sequences: %v", err)
	}
	bad := llm.Message{Role: llm.Assistant, Content: []llm.Block{llm.Opaque("reasoning", nil)}}
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi"), bad}}, nil); err == nil ||
		!strings.Contains(err.Error(), "message 1: block 0: reasoning block has no raw JSON") {
		t.Errorf("empty reasoning block: %v", err)
	}
	// An Anthropic thinking block has no item on this wire: left out.
	think := llm.Message{Role: llm.Assistant, Content: []llm.Block{llm.Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"x","signature":"s"}`)), llm.Text("ok")}}
	for _, model := range []string{"gpt-4.1", "gpt-4o-mini", "ft:gpt-4o:acme::1", "gpt-5-chat-latest", "o3"} {
		if _, err := m.Generate(context.Background(), &llm.Request{Model: model, Messages: []llm.Message{llm.UserText("hi"), think, llm.UserText("and?")}}, nil); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
	}
	if len(srv.bodies) != 5 {
		t.Fatalf("%d requests sent, want 5", len(srv.bodies))
	}
	for i, wantInclude := range []bool{false, false, false, false, true} {
		b := srv.body(i)
		if got := bytes.Contains(b, []byte(`"include":["reasoning.encrypted_content"]`)); got != wantInclude {
			t.Errorf("request %d: include %v, want %v: %s", i, got, wantInclude, b)
		}
		if bytes.Contains(b, []byte("thinking")) {
			t.Errorf("request %d: an Anthropic thinking block was sent: %s", i, b)
		}
	}
}

// status and incomplete_details map onto deputy's stop reasons.
func TestResponsesStopReasons(t *testing.T) {
	t.Parallel()
	refusal := `{"id":"r","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[{"id":"m","type":"message","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":"I can't help with that."}]}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`
	for _, c := range []struct {
		body string
		want llm.StopReason
	}{
		{wireResponse("completed", ""), llm.StopToolUse},
		{wireResponse("incomplete", "max_output_tokens"), llm.StopMaxTokens},
		{wireResponse("incomplete", "content_filter"), llm.StopRefusal},
		{wireResponse("incomplete", "steered"), "steered"},
		{refusal, llm.StopRefusal},
	} {
		for _, nonStreaming := range []bool{true, false} {
			m := newResponsesModel(t, &responsesServer{answer: answerWith(c.body)}, nonStreaming)
			resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StopReason != c.want {
				t.Errorf("plain %v: stop %q, want %q", nonStreaming, resp.StopReason, c.want)
			}
		}
	}
}

// Failures inside a 200 stream: an error event and a failed response are
// API errors, retried when their code says the server failed; a stream
// that ends before its terminal event is cut, and retried.
func TestResponsesStreamFailures(t *testing.T) {
	t.Parallel()
	full := wireResponse("completed", "")
	failed := `{"id":"resp_1","object":"response","created_at":1,"status":"failed","model":"gpt-5","output":[],"error":{"code":"server_error","message":"The model had an error."}}`
	for _, c := range []struct {
		name, first, reason string
	}{
		{"error event", "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"Something broke.\",\"param\":null,\"sequence_number\":1}\n\n", retry.ReasonErrorEvent},
		{"failed", "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":" + failed + "}\n\n", retry.ReasonErrorEvent},
		{"cut", strings.SplitAfter(sseEvents(full), "\n\n")[3], retry.ReasonStreamCut},
		{"event after the end", sseEvents(full) + "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":1,\"delta\":\"more\"}\n\n", retry.ReasonMalformed},
		{"bad output_index", "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":-1,\"delta\":\"x\"}\n\n", retry.ReasonMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := &responsesServer{answer: func(n int, w http.ResponseWriter, stream bool) {
				w.Header().Set("Content-Type", "text/event-stream")
				if n == 0 {
					_, _ = io.WriteString(w, c.first)
					return
				}
				_, _ = io.WriteString(w, sseEvents(full))
			}}
			m := newResponsesModel(t, srv, false)
			var atts []llm.Attempt
			ctx := llm.WithAttemptObserver(context.Background(), func(a llm.Attempt) { atts = append(atts, a) })
			resp, err := m.Generate(ctx, &llm.Request{Messages: []llm.Message{llm.UserText("hi")}}, func(llm.Delta) {})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Content) != 3 || len(atts) != 2 || atts[0].Reason != c.reason || !atts[0].Retry || atts[0].Status != 200 || atts[1].Err != nil {
				t.Errorf("content %d blocks, attempts %+v", len(resp.Content), atts)
			}
			if c.reason == retry.ReasonErrorEvent {
				var ae *llm.APIError
				if !errors.As(atts[0].Err, &ae) || ae.Type != "server_error" || ae.RequestID != "req_0" || !strings.HasPrefix(ae.Error(), "openai: 200 server_error: ") {
					t.Errorf("attempt error %v", atts[0].Err)
				}
			}
		})
	}
}
