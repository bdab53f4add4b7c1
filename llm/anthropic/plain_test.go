package anthropic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/retry"
)

const plainAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`

const streamedAnswer = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"done\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// plainServer answers after delay, streamed or not as the request asks,
// counting the requests and the streamed ones.
func plainServer(t *testing.T, delay time.Duration, calls, streamed *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(b, &req)
		time.Sleep(delay)
		if req.Stream {
			streamed.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, streamedAnswer)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, plainAnswer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A non-streamed answer's headers come only when it is whole, so one that
// takes longer than the stall timeout is a long answer, not a stall.
func TestSlowPlainAnswerIsNotAStall(t *testing.T) {
	t.Parallel()
	var calls, streamed atomic.Int32
	url := plainServer(t, 300*time.Millisecond, &calls, &streamed)
	p := retry.Default()
	p.MaxAttempts, p.BaseDelay, p.StallTimeout = 2, 0, 50*time.Millisecond
	m := newTestModel(t, Options{BaseURL: url, Retry: &p, NonStreaming: true})
	resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, MaxTokens: 100}, nil)
	if err != nil {
		t.Fatalf("slow plain answer: %v", err)
	}
	if calls.Load() != 1 || streamed.Load() != 0 || resp.Message().Text() != "done" {
		t.Errorf("calls %d (streamed %d), text %q; want one plain call answering done", calls.Load(), streamed.Load(), resp.Message().Text())
	}
}

// The SDK refuses a plain call whose max_tokens could outlast its timeout;
// NonStreaming then streams anyway.
func TestLargeMaxTokensStreamsAnyway(t *testing.T) {
	t.Parallel()
	var calls, streamed atomic.Int32
	url := plainServer(t, 0, &calls, &streamed)
	p := retry.Default()
	p.MaxAttempts, p.BaseDelay = 1, 0
	m := newTestModel(t, Options{BaseURL: url, Retry: &p, NonStreaming: true})
	resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, MaxTokens: 64000}, nil)
	if err != nil {
		t.Fatalf("max_tokens 64000 without a callback: %v", err)
	}
	if streamed.Load() != 1 || resp.Message().Text() != "done" {
		t.Errorf("calls %d (streamed %d), text %q; want one streamed call answering done", calls.Load(), streamed.Load(), resp.Message().Text())
	}
}
