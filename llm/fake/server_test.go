package fake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// respondFunc adapts a function to Responder.
type respondFunc func(*llm.Request, RequestInfo) Reply

func (f respondFunc) Respond(r *llm.Request, info RequestInfo) Reply { return f(r, info) }

// replyWith returns a Responder that always answers content.
func replyWith(content ...llm.Block) Responder {
	return respondFunc(func(*llm.Request, RequestInfo) Reply { return Reply{Content: content} })
}

// srvStart serves a new Server over loopback HTTP for the test.
func srvStart(t testing.TB, opts Options) (*Server, string) {
	t.Helper()
	s := NewServer(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// srvResp is a raw HTTP answer.
type srvResp struct {
	status int
	header http.Header
	body   []byte
}

// srvPost posts body to base+path with optional header pairs.
func srvPost(t testing.TB, base, path, body string, kv ...string) srvResp {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return srvResp{status: res.StatusCode, header: res.Header, body: b}
}

// srvJSON decodes a response body into a generic value.
func srvJSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, b)
	}
	return v
}

// srvDig walks a decoded JSON value along keys and array indexes.
func srvDig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

const helloAnthropic = `{"model":"claude-test","max_tokens":256,"messages":[{"role":"user","content":"hi"}]}`
const helloOpenAI = `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`

func TestDefaultResponderGreets(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	r := srvPost(t, url, "/v1/messages", helloAnthropic)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if got := srvDig(srvJSON(t, r.body), "content", 0, "text"); got != "Hello from deputy's fake model." {
		t.Fatalf("text = %v", got)
	}
	o := srvPost(t, url, "/v1/chat/completions", helloOpenAI)
	if got := srvDig(srvJSON(t, o.body), "choices", 0, "message", "content"); got != "Hello from deputy's fake model." {
		t.Fatalf("openai text = %v (%s)", got, o.body)
	}
}

func TestRequestsLogDecodedRequestAndRedactsKeys(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{APIKey: "sk-secret-123"})
	srvPost(t, url, "/v1/messages", helloAnthropic, "x-api-key", "sk-secret-123", "anthropic-version", "2023-06-01")
	srvPost(t, url, "/v1/chat/completions", helloOpenAI, "Authorization", "Bearer sk-secret-123")
	srvPost(t, url, "/v1/messages", helloAnthropic, "Authorization", "Bearer wrong")
	log := s.Requests()
	if len(log) != 3 {
		t.Fatalf("logged %d requests, want 3", len(log))
	}
	for i, want := range []struct {
		p      Provider
		status int
		n      int
	}{{Anthropic, 200, 1}, {OpenAI, 200, 2}, {Anthropic, 401, 0}} {
		l := log[i]
		if l.Provider != want.p || l.Status != want.status || l.N != want.n {
			t.Errorf("request %d: provider %s status %d N %d, want %s %d %d", i, l.Provider, l.Status, l.N, want.p, want.status, want.n)
		}
		for k, vs := range l.Header {
			for _, v := range vs {
				if strings.Contains(v, "secret") || strings.Contains(v, "wrong") {
					t.Errorf("request %d header %s leaks a credential: %q", i, k, v)
				}
			}
		}
	}
	if log[0].Header.Get("x-api-key") != "REDACTED" || log[1].Header.Get("Authorization") != "Bearer REDACTED" {
		t.Errorf("redaction: %q %q", log[0].Header.Get("x-api-key"), log[1].Header.Get("Authorization"))
	}
	if log[0].Header.Get("anthropic-version") != "2023-06-01" {
		t.Errorf("anthropic-version not kept: %v", log[0].Header)
	}
	if log[0].Request == nil || log[0].Request.Messages[0].Text() != "hi" || log[0].Request.MaxTokens != 256 {
		t.Errorf("decoded request: %+v", log[0].Request)
	}
	if !bytes.Equal(log[1].Body, []byte(helloOpenAI)) {
		t.Errorf("raw body = %s", log[1].Body)
	}
	if log[2].Request != nil {
		t.Errorf("a refused request was decoded: %+v", log[2].Request)
	}
}

func TestListenServesAndCloses(t *testing.T) {
	t.Parallel()
	s := NewServer(Options{})
	url, closeFn, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("url = %q", url)
	}
	r := srvPost(t, url, "/v1/messages", helloAnthropic)
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	if err := closeFn(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := closeFn(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(helloAnthropic)); err == nil {
		t.Fatal("server still answers after close")
	}
	if _, _, err := s.Listen("256.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
		t.Fatalf("bad address: err = %v", err)
	}
}

// TestListenCloseAbortsWaitingStream checks that close does not hang on a
// handler waiting for a fake clock nobody advances.
func TestListenCloseAbortsWaitingStream(t *testing.T) {
	t.Parallel()
	fc := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := NewServer(Options{Clock: fc, FirstByte: time.Hour})
	url, closeFn, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		res, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(helloAnthropic))
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	waitTimers(t, fc, 1)
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("request succeeded although the server closed during its first-byte wait")
	}
	if n := fc.Pending(); n != 0 {
		t.Fatalf("%d timers left armed after close", n)
	}
}

func TestUnknownPathAndMethod(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	r := srvPost(t, url, "/v1/complete", `{}`)
	if r.status != 404 || srvDig(srvJSON(t, r.body), "error", "type") != "not_found_error" {
		t.Fatalf("404: %d %s", r.status, r.body)
	}
	o := srvPost(t, url, "/v1/chat/nothing", `{}`)
	if o.status != 404 || srvDig(srvJSON(t, o.body), "error", "type") != "invalid_request_error" {
		t.Fatalf("openai 404: %d %s", o.status, o.body)
	}
	res, err := http.Get(url + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 405 || res.Header.Get("Allow") != "POST" {
		t.Fatalf("GET: %d allow=%q", res.StatusCode, res.Header.Get("Allow"))
	}
}

func TestResponderPanicIsA500(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: respondFunc(func(*llm.Request, RequestInfo) Reply { panic("scenario bug") })})
	r := srvPost(t, url, "/v1/messages", helloAnthropic)
	if r.status != 500 || !strings.Contains(string(r.body), "scenario bug") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	o := srvPost(t, url, "/v1/chat/completions", helloOpenAI)
	if o.status != 500 || !strings.Contains(string(o.body), "scenario bug") {
		t.Fatalf("%d %s", o.status, o.body)
	}
}

func TestInvalidReplyIsA500(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		b    llm.Block
	}{
		{"tool input not an object", llm.ToolUse("", "x", json.RawMessage(`[1]`))},
		{"tool input not JSON", llm.ToolUse("", "x", json.RawMessage(`{"a":`))},
		{"tool without name", llm.ToolUse("", "", json.RawMessage(`{}`))},
		{"opaque raw not JSON", llm.Opaque("thinking", json.RawMessage(`nope`))},
		{"text not UTF-8", llm.Text("\xff")},
		{"no type", llm.Block{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, url := srvStart(t, Options{Responder: replyWith(c.b)})
			r := srvPost(t, url, "/v1/messages", helloAnthropic)
			if r.status != 500 || srvDig(srvJSON(t, r.body), "error", "type") != "api_error" {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
}

func TestStopSequenceAndMaxTokensCutUnpinnedReplies(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("alpha beta END gamma"), llm.ToolUse("", "t", json.RawMessage(`{}`)))})
	r := srvJSON(t, srvPost(t, url, "/v1/messages", `{"model":"m","max_tokens":100,"stop_sequences":["END","gamma"],"messages":[{"role":"user","content":"x"}]}`).body)
	if srvDig(r, "stop_reason") != "stop_sequence" || srvDig(r, "stop_sequence") != "END" || srvDig(r, "content", 0, "text") != "alpha beta " || len(srvDig(r, "content").([]any)) != 1 {
		t.Fatalf("stop sequence: %v", r)
	}
	// 2 tokens is 8 bytes of text, and the tool call no longer fits.
	r = srvJSON(t, srvPost(t, url, "/v1/messages", `{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"x"}]}`).body)
	if srvDig(r, "stop_reason") != "max_tokens" || srvDig(r, "content", 0, "text") != "alpha be" || srvDig(r, "usage", "output_tokens") != 2.0 {
		t.Fatalf("max tokens: %v", r)
	}
	o := srvJSON(t, srvPost(t, url, "/v1/chat/completions", `{"model":"m","max_completion_tokens":2,"messages":[{"role":"user","content":"x"}]}`).body)
	if srvDig(o, "choices", 0, "finish_reason") != "length" {
		t.Fatalf("openai max tokens: %v", o)
	}
}

func TestRequestLogIsBounded(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{MaxLogged: 3})
	for range 7 {
		srvPost(t, url, "/v1/messages", helloAnthropic)
	}
	log := s.Requests()
	if len(log) != 3 || log[0].N != 5 || log[1].N != 6 || log[2].N != 7 {
		t.Fatalf("kept %d: %+v", len(log), log)
	}
	none, url2 := srvStart(t, Options{MaxLogged: -1})
	if r := srvPost(t, url2, "/v1/messages", helloAnthropic); r.status != 200 || len(none.Requests()) != 0 {
		t.Fatalf("MaxLogged -1: status %d, %d logged", r.status, len(none.Requests()))
	}
}
