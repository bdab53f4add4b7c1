package anthropic

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/retry"
)

// The usage of an answer that wrote both caches, as the Messages API
// reports it: cache_creation_input_tokens is the whole write, and
// cache_creation splits it by lifetime (llm-wire.md, "usage").
const cacheUsage = `{"input_tokens":12,"output_tokens":7,"cache_read_input_tokens":900,` +
	`"cache_creation_input_tokens":300,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200}}`

// A streamed answer carries the split in message_start only; message_delta
// restates the cumulative totals.
var cacheStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"usage\":" +
	strings.Replace(cacheUsage, `"output_tokens":7`, `"output_tokens":1`, 1) + "}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"done\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":12,\"output_tokens\":7,\"cache_read_input_tokens\":900,\"cache_creation_input_tokens\":300}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// One-hour cache writes reach llm.Usage apart, streamed or not, so cost
// can charge them at their own rate.
func TestUsageSplitsOneHourCacheWrites(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, cacheStream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",`+
			`"content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":`+cacheUsage+`}`)
	}))
	t.Cleanup(srv.Close)
	want := llm.Usage{InputTokens: 12, OutputTokens: 7, CacheReadTokens: 900, CacheWriteTokens: 300, CacheWrite1hTokens: 200}
	for _, plain := range []bool{false, true} {
		p := retry.Default()
		p.MaxAttempts = 1
		m := newTestModel(t, Options{BaseURL: srv.URL, Retry: &p, NonStreaming: plain})
		resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, MaxTokens: 100}, nil)
		if err != nil {
			t.Fatalf("plain %v: %v", plain, err)
		}
		if resp.Usage != want {
			t.Errorf("plain %v: usage %+v, want %+v", plain, resp.Usage, want)
		}
	}
}
