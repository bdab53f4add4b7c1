package fake

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/deputy-run/deputy/llm"
)

// threadWeatherResponder calls get_weather until it has a result, then answers
// with it: a tool round trip.
func threadWeatherResponder() Responder {
	return respondFunc(func(r *llm.Request, _ RequestInfo) Reply {
		last := r.Messages[len(r.Messages)-1]
		for _, b := range last.Content {
			if b.Type == llm.TypeToolResult {
				return Reply{Content: []llm.Block{llm.Text("The weather is " + b.Text + ".")}}
			}
		}
		return Reply{Content: []llm.Block{llm.ToolUse("", "get_weather", json.RawMessage(`{"city":"Paris"}`))}}
	})
}

// TestAnthropicSDKThreadToolRoundTrip runs a tool round trip on the Go
// SDK's message thread, which sends the tool result alone with thread
// continue: the old fake ignored thread and refused the lone tool_result
// as unpaired.
func TestAnthropicSDKThreadToolRoundTrip(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{Responder: threadWeatherResponder()})
	c := anthClient(url)
	ctx := context.Background()
	thread := c.Beta.Messages.NewThread(anthropic.BetaMessageThreadCreateParams{
		Model: "claude-test", MaxTokens: 1024,
		System: []anthropic.BetaTextBlockParam{{Text: "Be brief."}},
		Tools: []anthropic.BetaToolUnionParam{{OfTool: &anthropic.BetaToolParam{
			Name: "get_weather", InputSchema: anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}},
		}}},
	})
	first, err := thread.Send(ctx, anthropic.BetaMessageThreadSendParams{
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Weather in Paris?"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Content) != 1 || first.Content[0].Type != "tool_use" {
		t.Fatalf("first reply: %s", first.RawJSON())
	}
	second, err := thread.Send(ctx, anthropic.BetaMessageThreadSendParams{
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaToolResultBlock(first.Content[0].ID, "sunny", false))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Content) != 1 || second.Content[0].Text != "The weather is sunny." {
		t.Fatalf("second reply: %s", second.RawJSON())
	}
	logged := s.Requests()
	if len(logged) != 2 {
		t.Fatalf("%d requests, want 2 (the SDK replayed a turn?)", len(logged))
	}
	var sent struct {
		Thread   threadParam       `json:"thread"`
		Messages []json.RawMessage `json:"messages"`
		System   json.RawMessage   `json:"system"`
	}
	if err := json.Unmarshal(logged[1].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Thread.Type != "continue" || sent.Thread.PreviousMessageID == nil || *sent.Thread.PreviousMessageID != first.ID || len(sent.Messages) != 1 || sent.System != nil {
		t.Fatalf("the SDK did not continue the thread with the new message alone: %s", logged[1].Body)
	}
	// What the Responder saw is the whole conversation, with the
	// thread's system prompt and tools.
	got := logged[1].Request
	if len(got.Messages) != 3 || got.System != "Be brief." || len(got.Tools) != 1 || got.Tools[0].Name != "get_weather" {
		t.Errorf("the held conversation was not laid in: system %q, %d tools, %d messages", got.System, len(got.Tools), len(got.Messages))
	}
}

// TestAnthropicThreadRejections answers the error codes the SDKs recover
// from, in error.details, with the API's statuses.
func TestAnthropicThreadRejections(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	post := func(body string) srvResp { return srvPost(t, url, "/v1/messages", body) }
	cont := func(id, model, msgs string) string {
		return `{"model":"` + model + `","max_tokens":50,"thread":{"type":"continue","previous_message_id":"` + id + `"},"messages":[` + msgs + `]}`
	}
	const user = `{"role":"user","content":"and then?"}`
	expect := func(r srvResp, status int, typ, code string) {
		t.Helper()
		m := srvJSON(t, r.body)
		if r.status != status || srvDig(m, "error", "type") != typ || srvDig(m, "error", "details", "error_code") != code {
			t.Errorf("want %d %s %s, got %d %s", status, typ, code, r.status, r.body)
		}
	}
	expect(post(cont("msg_01unknown", "m", user)), http.StatusNotFound, "not_found_error", "thread_not_found")

	r := post(`{"model":"m","max_tokens":50,"thread":{"type":"create"},"system":"Be brief.","messages":[{"role":"user","content":"hi"}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id, _ := srvJSON(t, r.body)["id"].(string)

	expect(post(cont(id, "other-model", user)), http.StatusBadRequest, "invalid_request_error", "thread_fingerprint_mismatch")
	changed := strings.Replace(cont(id, "m", user), `"messages"`, `"system":"Be verbose.","messages"`, 1)
	expect(post(changed), http.StatusBadRequest, "invalid_request_error", "thread_fingerprint_mismatch")
	// A continue the fake refused for its body does not use the response
	// up: it can still be continued, once.
	if r := post(cont(id, "m", `{"role":"user","content":"x","foo":1}`)); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "messages.2.foo: Extra inputs are not permitted") {
		t.Fatalf("bad continue: %d %s", r.status, r.body)
	}
	if r := post(cont(id, "m", user)); r.status != http.StatusOK {
		t.Fatalf("continue: %d %s", r.status, r.body)
	}
	expect(post(cont(id, "m", user)), http.StatusBadRequest, "invalid_request_error", "thread_already_continued")
}

// TestAnthropicThreadContinueInFlight refuses a second continue from a
// response while the first is still being answered, and frees the
// response if that first one fails.
func TestAnthropicThreadContinueInFlight(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	block := respondFunc(func(r *llm.Request, _ RequestInfo) Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Content[0].Text == "wait" {
			close(entered)
			<-release
			return Reply{Fault: &Fault{Kind: FaultServerError}}
		}
		return Reply{Content: []llm.Block{llm.Text("ok")}}
	})
	_, url := srvStart(t, Options{Responder: block})
	r := srvPost(t, url, "/v1/messages", `{"model":"m","max_tokens":50,"thread":{"type":"create"},"messages":[{"role":"user","content":"hi"}]}`)
	id, _ := srvJSON(t, r.body)["id"].(string)
	cont := func(text string) string {
		return `{"model":"m","max_tokens":50,"thread":{"type":"continue","previous_message_id":"` + id + `"},"messages":[{"role":"user","content":"` + text + `"}]}`
	}
	// The first continue runs in a goroutine of its own, which must not
	// call t.Fatal (FailNow ends only the goroutine it is called in): it
	// sends what it got, error included, back to the test.
	type answer struct {
		srvResp
		err error
	}
	first := make(chan answer, 1)
	go func() {
		res, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(cont("wait")))
		if err != nil {
			first <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		first <- answer{srvResp{status: res.StatusCode, header: res.Header, body: b}, err}
	}()
	select {
	case <-entered:
	case a := <-first:
		t.Fatalf("the first continue ended before its reply was held: %d %s %v", a.status, a.body, a.err)
	}
	r = srvPost(t, url, "/v1/messages", cont("now"))
	if code := srvDig(srvJSON(t, r.body), "error", "details", "error_code"); r.status != http.StatusBadRequest || code != "thread_continue_in_flight" {
		t.Errorf("second continue: %d %s", r.status, r.body)
	}
	close(release)
	if a := <-first; a.err != nil || a.status != http.StatusInternalServerError {
		t.Fatalf("first continue: %d %s %v", a.status, a.body, a.err)
	}
	if r := srvPost(t, url, "/v1/messages", cont("again")); r.status != http.StatusOK {
		t.Errorf("after the failed continue: %d %s", r.status, r.body)
	}
}
