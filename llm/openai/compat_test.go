package openai_test

import (
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
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/providertest"
	"github.com/deputy-run/deputy/llm/retry"
)

// These tests play servers the fake does not imitate: Ollama's dialect of
// the streaming protocol, and error answers with particular headers.

// sseHandler answers every request with the given data frames, then
// [DONE] unless done is false.
func sseHandler(frames []string, done bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, f := range frames {
			fmt.Fprintf(w, "data: %s\n\n", f)
		}
		if done {
			fmt.Fprint(w, "data: [DONE]\n\n")
		}
	}
}

func chunk(delta string, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen3","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + fr + `}]}`
}

const ollamaUsage = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen3","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":12,"total_tokens":62}}`

func newModel(t *testing.T, url string, p *retry.Policy) *openai.Model {
	t.Helper()
	if p == nil {
		d := retry.Default()
		d.BaseDelay, d.StallTimeout, d.Clock = 0, 0, clock.NewInstant()
		p = &d
	}
	m, err := openai.New("qwen3", openai.Options{APIKey: "k", BaseURL: url + "/v1", Retry: p, Provider: "ollama", LegacyMaxTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func generate(t *testing.T, m llm.Model) (*llm.Response, []llm.Delta, []llm.Attempt, error) {
	t.Helper()
	var atts providertest.Attempts
	var deltas []llm.Delta
	resp, err := m.Generate(atts.Context(context.Background()), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, MaxTokens: 100},
		func(d llm.Delta) { deltas = append(deltas, d) })
	return resp, deltas, atts.All(), err
}

func TestOllamaQuirks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		frames []string
		want   []llm.Block
	}{
		{
			// Whole arguments in one chunk, with index; finish_reason "stop"
			// despite the tool calls; no prompt_tokens_details.
			name: "whole arguments",
			frames: []string{
				chunk(`{"role":"assistant","content":"Let me look."}`, ""),
				chunk(`{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}]}`, ""),
				chunk(`{"role":"assistant","content":"","tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"b.go\"}"}}]}`, ""),
				chunk(`{"role":"assistant","content":""}`, "stop"),
				ollamaUsage,
			},
			want: []llm.Block{llm.Text("Let me look."), llm.ToolUse("call_a", "read_file", json.RawMessage(`{"path":"a.go"}`)), llm.ToolUse("call_b", "read_file", json.RawMessage(`{"path": "b.go"}`))},
		},
		{
			// Old versions: no index at all. A fragment continues the call
			// in progress unless it brings a new id.
			name: "missing index",
			frames: []string{
				chunk(`{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"pa"}}]}`, ""),
				chunk(`{"tool_calls":[{"function":{"arguments":"th\":\"a.go\"}"}}]}`, ""),
				chunk(`{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"now","arguments":"{}"}}]}`, ""),
				chunk(`{"tool_calls":[{"id":"call_c","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"c.go\"}"}}]}`, ""),
				chunk(`{}`, "tool_calls"),
				ollamaUsage,
			},
			want: []llm.Block{llm.ToolUse("call_a", "read_file", json.RawMessage(`{"path":"a.go"}`)), llm.ToolUse("call_b", "now", json.RawMessage(`{}`)), llm.ToolUse("call_c", "read_file", json.RawMessage(`{"path":"c.go"}`))},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(sseHandler(c.frames, true))
			defer srv.Close()
			resp, deltas, _, err := generate(t, newModel(t, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Content) != len(c.want) {
				t.Fatalf("content %+v, want %+v", resp.Content, c.want)
			}
			for i, w := range c.want {
				g := resp.Content[i]
				if g.Type != w.Type || g.Text != w.Text || g.ID != w.ID || g.Name != w.Name || string(g.Input) != string(w.Input) {
					t.Errorf("block %d = %+v, want %+v", i, g, w)
				}
			}
			if resp.StopReason != llm.StopToolUse {
				t.Errorf("stop %q", resp.StopReason)
			}
			if resp.Usage != (llm.Usage{InputTokens: 50, OutputTokens: 12}) {
				t.Errorf("usage %+v", resp.Usage)
			}
			// The deltas rebuild the same blocks.
			rebuilt := map[int]string{}
			for _, d := range deltas {
				rebuilt[d.Index] += d.Text
			}
			for i, w := range c.want {
				if w.Type == llm.TypeToolUse && rebuilt[i] != string(w.Input) {
					t.Errorf("block %d: deltas %q, want %s", i, rebuilt[i], w.Input)
				}
			}
		})
	}
}

// scripted answers request n with handlers[n] (the last one repeats), and
// records the request bodies.
type scripted struct {
	mu       sync.Mutex
	n        int
	handlers []http.HandlerFunc
	bodies   []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	h := s.handlers[min(s.n, len(s.handlers)-1)]
	s.n++
	s.bodies = append(s.bodies, string(b))
	s.mu.Unlock()
	h(w, r)
}

func errorHandler(status int, headers map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

var okStream = sseHandler([]string{chunk(`{"role":"assistant","content":"ok"}`, ""), chunk(`{}`, "stop"), ollamaUsage}, true)

func TestRetryHeadersAndErrorKinds(t *testing.T) {
	t.Parallel()
	clk := clock.NewInstant()
	date := clk.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name     string
		first    http.HandlerFunc
		attempts int
		reason   string
		wait     time.Duration
		errHas   string // for a call that fails
	}{
		{"insufficient quota is final", errorHandler(429, nil, `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`),
			1, retry.ReasonFatal, 0, "ollama: 429 insufficient_quota: You exceeded your current quota."},
		{"rate limit with retry-after-ms", errorHandler(429, map[string]string{"retry-after-ms": "1500", "retry-after": "9"}, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`),
			2, retry.ReasonRateLimit, 1500 * time.Millisecond, ""},
		{"retry-after as a date", errorHandler(503, map[string]string{"retry-after": date}, `{"error":{"message":"busy","type":"server_error"}}`),
			2, retry.ReasonOverloaded, 5 * time.Second, ""},
		{"x-should-retry false wins", errorHandler(500, map[string]string{"x-should-retry": "false"}, `{"error":{"message":"broken","type":"server_error"}}`),
			1, retry.ReasonServerError, 0, "ollama: 500 server_error: broken"},
		{"x-should-retry true wins", errorHandler(400, map[string]string{"x-should-retry": "true"}, `{"error":{"message":"try again","type":"invalid_request_error"}}`),
			2, retry.ReasonServerAsked, 0, ""},
		{"proxy page", errorHandler(502, nil, "<html>\n<body>Bad gateway</body>\n</html>"),
			2, retry.ReasonServerError, 0, ""},
		{"error inside the stream", sseHandler([]string{chunk(`{"role":"assistant","content":"par"}`, ""), `{"error":{"message":"The server had an error","type":"server_error","code":null}}`}, false),
			2, retry.ReasonErrorEvent, 0, ""},
		{"stream ends without finish", sseHandler([]string{chunk(`{"role":"assistant","content":"par"}`, "")}, false),
			2, retry.ReasonStreamCut, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := &scripted{handlers: []http.HandlerFunc{c.first, okStream}}
			srv := httptest.NewServer(s)
			defer srv.Close()
			clk := clock.NewInstant()
			p := retry.Default()
			p.BaseDelay, p.StallTimeout, p.Clock = 0, 0, clk
			resp, _, atts, err := generate(t, newModel(t, srv.URL, &p))
			if len(atts) != c.attempts {
				t.Fatalf("%d attempts, want %d: %+v (err %v)", len(atts), c.attempts, atts, err)
			}
			if atts[0].Reason != c.reason || atts[0].Wait != c.wait {
				t.Errorf("first attempt %+v, want reason %s wait %v", atts[0], c.reason, c.wait)
			}
			if c.errHas != "" {
				var ae *llm.APIError
				if err == nil || !errors.As(err, &ae) || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("err = %v, want %q", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message().Text() != "ok" {
				t.Errorf("response %+v", resp)
			}
			if strings.Contains(atts[0].Error, "\n") {
				t.Errorf("error %q spans lines", atts[0].Error)
			}
		})
	}
}

func TestRequestShape(t *testing.T) {
	t.Parallel()
	s := &scripted{handlers: []http.HandlerFunc{okStream}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	m := newModel(t, srv.URL, nil)
	temp := 0.25
	req := &llm.Request{
		System: "sys", MaxTokens: 77, Temperature: &temp, StopSequences: []string{"END"},
		Tools:      []llm.ToolSpec{{Name: "now", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}},
		ToolChoice: llm.ToolChoice{Type: "any", DisableParallel: true},
		Messages: []llm.Message{
			llm.UserText("a"),
			{Role: llm.Assistant, Content: []llm.Block{llm.Opaque("thinking", json.RawMessage(`{"type":"thinking"}`)), llm.Text("b"), llm.ToolUse("call_1", "now", nil)}},
			{Role: llm.User, Content: []llm.Block{llm.ToolResult("call_1", "noon", false), llm.Text("c"), llm.Text("d")}},
		},
	}
	if _, err := m.Generate(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Model         string            `json:"model"`
		MaxTokens     int               `json:"max_tokens"`
		Temperature   float64           `json:"temperature"`
		Stop          []string          `json:"stop"`
		ToolChoice    string            `json:"tool_choice"`
		Parallel      *bool             `json:"parallel_tool_calls"`
		Stream        bool              `json:"stream"`
		StreamOptions map[string]bool   `json:"stream_options"`
		Messages      []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(s.bodies[0]), &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "qwen3" || body.MaxTokens != 77 || body.Temperature != 0.25 || body.Stop[0] != "END" || body.ToolChoice != "required" ||
		body.Parallel == nil || *body.Parallel || !body.Stream || !body.StreamOptions["include_usage"] {
		t.Errorf("body %s", s.bodies[0])
	}
	want := []string{
		`{"content":"sys","role":"system"}`,
		`{"content":"a","role":"user"}`,
		`{"content":"b","tool_calls":[{"id":"call_1","function":{"arguments":"{}","name":"now"},"type":"function"}],"role":"assistant"}`,
		`{"content":"noon","tool_call_id":"call_1","role":"tool"}`,
		`{"content":[{"text":"c","type":"text"},{"text":"d","type":"text"}],"role":"user"}`,
	}
	if len(body.Messages) != len(want) {
		t.Fatalf("messages %s", body.Messages)
	}
	for i, w := range want {
		if string(body.Messages[i]) != w {
			t.Errorf("message %d = %s\nwant %s", i, body.Messages[i], w)
		}
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	m := newModel(t, "http://127.0.0.1:1", nil)
	for name, req := range map[string]*llm.Request{
		"bad input":      {Messages: []llm.Message{{Role: llm.Assistant, Content: []llm.Block{llm.ToolUse("c", "now", json.RawMessage(`{"a":`))}}}},
		"bad role":       {Messages: []llm.Message{{Role: "system", Content: []llm.Block{llm.Text("x")}}}},
		"bad schema":     {Tools: []llm.ToolSpec{{Name: "x", InputSchema: json.RawMessage(`[1]`)}}, Messages: []llm.Message{llm.UserText("x")}},
		"no tool name":   {Tools: []llm.ToolSpec{{}}, Messages: []llm.Message{llm.UserText("x")}},
		"bad choice":     {ToolChoice: llm.ToolChoice{Type: "maybe"}, Messages: []llm.Message{llm.UserText("x")}},
		"result as bot":  {Messages: []llm.Message{{Role: llm.Assistant, Content: []llm.Block{llm.ToolResult("c", "x", false)}}}},
		"call from user": {Messages: []llm.Message{{Role: llm.User, Content: []llm.Block{llm.ToolUse("c", "now", nil)}}}},
	} {
		_, err := m.Generate(context.Background(), req, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "ollama: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := m.Generate(context.Background(), nil, nil); err == nil {
		t.Error("nil request accepted")
	}
	if _, err := openai.New("m", openai.Options{}); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("no key: %v", err)
	}
}
