package openai_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/retry"
)

// A non-streamed answer's headers come only when it is whole, so one that
// takes longer than the stall timeout is a long answer, not a stall: it
// must not be cut and retried.
func TestSlowPlainAnswerIsNotAStall(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	defer srv.Close()
	p := retry.Default()
	p.MaxAttempts, p.BaseDelay, p.StallTimeout = 2, 0, 50*time.Millisecond
	m, err := openai.New("m", openai.Options{APIKey: "k", BaseURL: srv.URL + "/v1", Retry: &p, NonStreaming: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, MaxTokens: 100}, nil)
	if err != nil {
		t.Fatalf("slow plain answer: %v", err)
	}
	if calls.Load() != 1 || resp.Message().Text() != "done" {
		t.Errorf("calls %d, text %q; want one call answering done", calls.Load(), resp.Message().Text())
	}
}
