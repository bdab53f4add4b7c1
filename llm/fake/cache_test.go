package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// filler returns ASCII text costing exactly n tokens (4 bytes each).
func filler(tag string, n int) string {
	b := []byte(strings.Repeat("abcd", n))
	copy(b, tag)
	return string(b)
}

// anthUsageOf is the cache-relevant part of an Anthropic usage object.
type anthUsageOf struct {
	Input, Read, Write, W5m, W1h int
}

func anthCacheUsage(t *testing.T, body []byte) anthUsageOf {
	t.Helper()
	var m struct {
		Usage struct {
			Input         int `json:"input_tokens"`
			Read          int `json:"cache_read_input_tokens"`
			Write         int `json:"cache_creation_input_tokens"`
			CacheCreation struct {
				W5m int `json:"ephemeral_5m_input_tokens"`
				W1h int `json:"ephemeral_1h_input_tokens"`
			} `json:"cache_creation"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	u := m.Usage
	if u.Write != u.CacheCreation.W5m+u.CacheCreation.W1h {
		t.Errorf("creation %d != 5m %d + 1h %d", u.Write, u.CacheCreation.W5m, u.CacheCreation.W1h)
	}
	return anthUsageOf{u.Input, u.Read, u.Write, u.CacheCreation.W5m, u.CacheCreation.W1h}
}

// cacheBody builds a Messages request with a system text (a breakpoint
// when ttl is not empty) and user messages.
func cacheBody(system, ttl string, msgs ...string) string {
	sys := map[string]any{"type": "text", "text": system}
	switch ttl {
	case "5m":
		sys["cache_control"] = map[string]any{"type": "ephemeral"}
	case "1h":
		sys["cache_control"] = map[string]any{"type": "ephemeral", "ttl": "1h"}
	}
	var ms []any
	for i, m := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		ms = append(ms, map[string]any{"role": role, "content": m})
	}
	b, _ := json.Marshal(map[string]any{"model": "claude-test", "max_tokens": 100, "system": []any{sys}, "messages": ms})
	return string(b)
}

func TestAnthropicCacheWriteThenRead(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	sys := filler("S", 1500)
	body := cacheBody(sys, "5m", "hi")
	first := anthCacheUsage(t, srvPost(t, url, "/v1/messages", body).body)
	if first != (anthUsageOf{Input: 9, Write: 1500, W5m: 1500}) {
		t.Fatalf("first: %+v", first)
	}
	second := anthCacheUsage(t, srvPost(t, url, "/v1/messages", body).body)
	if second != (anthUsageOf{Input: 9, Read: 1500}) {
		t.Fatalf("second: %+v", second)
	}
	// The split always adds up to count_tokens.
	ct := srvJSON(t, srvPost(t, url, "/v1/messages/count_tokens", strings.Replace(body, `"max_tokens":100,`, "", 1)).body)
	if ct["input_tokens"] != float64(second.Input+second.Read+second.Write) {
		t.Fatalf("count_tokens %v vs usage %+v", ct["input_tokens"], second)
	}
	// A different model has its own cache.
	other := anthCacheUsage(t, srvPost(t, url, "/v1/messages", strings.Replace(body, "claude-test", "claude-other", 1)).body)
	if other.Read != 0 || other.Write != 1500 {
		t.Fatalf("other model: %+v", other)
	}
}

func TestAnthropicCacheThroughSDK(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	c := anthClient(url)
	params := anthropic.MessageNewParams{
		Model: "claude-test", MaxTokens: 100,
		System:   []anthropic.TextBlockParam{{Text: filler("P", 2000), CacheControl: anthropic.CacheControlEphemeralParam{TTL: anthropic.CacheControlEphemeralTTLTTL1h}}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	}
	for i, want := range []anthropic.Usage{
		{InputTokens: 9, CacheCreationInputTokens: 2000, CacheCreation: anthropic.CacheCreation{Ephemeral1hInputTokens: 2000}},
		{InputTokens: 9, CacheReadInputTokens: 2000},
	} {
		stream := c.Messages.NewStreaming(context.Background(), params)
		var msg anthropic.Message
		for stream.Next() {
			_ = msg.Accumulate(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		_ = stream.Close()
		u := msg.Usage
		if u.InputTokens != want.InputTokens || u.CacheReadInputTokens != want.CacheReadInputTokens || u.CacheCreationInputTokens != want.CacheCreationInputTokens ||
			u.CacheCreation.Ephemeral1hInputTokens != want.CacheCreation.Ephemeral1hInputTokens || u.CacheCreation.Ephemeral5mInputTokens != 0 {
			t.Errorf("request %d: usage %s", i+1, u.RawJSON())
		}
	}
}

func TestAnthropicCacheBelowMinimum(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	body := cacheBody(filler("s", 1000), "5m", "hi") // 1009 tokens in all
	for i := range 2 {
		if u := anthCacheUsage(t, srvPost(t, url, "/v1/messages", body).body); u != (anthUsageOf{Input: 1009}) {
			t.Fatalf("request %d: %+v", i+1, u)
		}
	}
	_, url2 := srvStart(t, Options{MinCacheTokens: 2048})
	body = cacheBody(filler("s", 2000), "5m", "hi")
	srvPost(t, url2, "/v1/messages", body)
	if u := anthCacheUsage(t, srvPost(t, url2, "/v1/messages", body).body); u != (anthUsageOf{Input: 2009}) {
		t.Fatalf("custom minimum: %+v", u)
	}
}

func TestAnthropicCacheTTLOnTheClock(t *testing.T) {
	t.Parallel()
	fc := clock.NewFake(fakeClockStart)
	_, url := srvStart(t, Options{Clock: fc})
	body := cacheBody(filler("T", 1200), "5m", "hi")
	steps := []struct {
		advance time.Duration
		read    int
	}{
		{0, 0},
		{4 * time.Minute, 1200}, // hit, refreshed to +5m
		{4 * time.Minute, 1200}, // 8m after the write: alive only thanks to the refresh
		{5*time.Minute + time.Second, 0},
		{time.Minute, 1200}, // the miss wrote it again
	}
	for i, s := range steps {
		fc.Advance(s.advance)
		u := anthCacheUsage(t, srvPost(t, url, "/v1/messages", body).body)
		if u.Read != s.read || u.Read+u.Write != 1200 {
			t.Fatalf("step %d: %+v, want read %d", i, u, s.read)
		}
	}
	long := cacheBody(filler("H", 1200), "1h", "hi")
	if u := anthCacheUsage(t, srvPost(t, url, "/v1/messages", long).body); u.W1h != 1200 || u.W5m != 0 {
		t.Fatalf("1h write: %+v", u)
	}
	fc.Advance(59 * time.Minute)
	if u := anthCacheUsage(t, srvPost(t, url, "/v1/messages", long).body); u.Read != 1200 {
		t.Fatalf("1h entry after 59m: %+v", u)
	}
	fc.Advance(61 * time.Minute)
	if u := anthCacheUsage(t, srvPost(t, url, "/v1/messages", long).body); u.Read != 0 {
		t.Fatalf("1h entry after 61m idle: %+v", u)
	}
}

// TestAnthropicCacheParallelRequestsMiss sends two requests while the first
// one's response has not begun: both miss and both write; one sent after
// reads.
func TestAnthropicCacheParallelRequestsMiss(t *testing.T) {
	t.Parallel()
	fc := clock.NewFake(fakeClockStart)
	_, url := srvStart(t, Options{Clock: fc, FirstByte: time.Second})
	body := cacheBody(filler("P", 1100), "5m", "hi")
	results := make(chan anthUsageOf, 3)
	send := func() {
		res, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			results <- anthUsageOf{}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Error(err)
		}
		results <- anthCacheUsage(t, b)
	}
	go send()
	waitTimers(t, fc, 1)
	go send()
	waitTimers(t, fc, 2)
	fc.Advance(time.Second)
	for range 2 {
		if u := <-results; u.Read != 0 || u.Write != 1100 {
			t.Fatalf("parallel request: %+v", u)
		}
	}
	go send()
	waitTimers(t, fc, 1)
	fc.Advance(time.Second)
	if u := <-results; u.Read != 1100 || u.Write != 0 {
		t.Fatalf("later request: %+v", u)
	}
}

// msgsBody builds a conversation whose every message is a list of text
// blocks, with a breakpoint on the last block of the last message and on
// the system text.
func msgsBody(system string, msgs [][]string) string {
	var ms []any
	for i, blocks := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		var content []any
		for j, text := range blocks {
			b := map[string]any{"type": "text", "text": text}
			if i == len(msgs)-1 && j == len(blocks)-1 {
				b["cache_control"] = map[string]any{"type": "ephemeral"}
			}
			content = append(content, b)
		}
		ms = append(ms, map[string]any{"role": role, "content": content})
	}
	b, _ := json.Marshal(map[string]any{
		"model": "claude-test", "max_tokens": 100,
		"system":   []any{map[string]any{"type": "text", "text": system, "cache_control": map[string]any{"type": "ephemeral"}}},
		"messages": ms,
	})
	return string(b)
}

func TestAnthropicCacheGrowingConversationAndLookback(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	sys := filler("G", 1024)
	u1 := filler("u", 200) // 4+4+200 tokens
	a1 := filler("a", 100) // 4+4+100
	u2 := filler("v", 50)  // 4+4+50
	first := anthCacheUsage(t, srvPost(t, url, "/v1/messages", msgsBody(sys, [][]string{{u1}})).body)
	if first != (anthUsageOf{Write: 1024 + 208, W5m: 1024 + 208}) {
		t.Fatalf("first turn: %+v", first)
	}
	// The next turn's breakpoint is 2 blocks past the last one: the
	// lookback finds it, so only the new turns are written.
	second := anthCacheUsage(t, srvPost(t, url, "/v1/messages", msgsBody(sys, [][]string{{u1}, {a1}, {u2}})).body)
	if second != (anthUsageOf{Read: 1024 + 208, Write: 108 + 58, W5m: 108 + 58}) {
		t.Fatalf("second turn: %+v", second)
	}
	// With more than 20 blocks between, the message entry is out of
	// reach and only the system breakpoint hits.
	many := make([]string, 25)
	for i := range many {
		many[i] = fmt.Sprintf("blk %02d", i) // 2 tokens + 4 per block
	}
	third := anthCacheUsage(t, srvPost(t, url, "/v1/messages", msgsBody(sys, [][]string{{u1}, many, {u2}})).body)
	wantTotal := 1024 + 208 + 4 + 25*6 + 58
	if third.Read != 1024 || third.Read+third.Write+third.Input != wantTotal || third.Input != 0 {
		t.Fatalf("beyond lookback: %+v (total %d)", third, wantTotal)
	}
}

func TestAnthropicCacheAutomaticAndToolsInvalidate(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	body := func(desc string) string {
		b, _ := json.Marshal(map[string]any{
			"model": "claude-test", "max_tokens": 100,
			"cache_control": map[string]any{"type": "ephemeral"},
			"tools":         []any{map[string]any{"name": "t", "description": desc, "input_schema": map[string]any{"type": "object"}}},
			"system":        filler("A", 1100),
			"messages":      []any{map[string]any{"role": "user", "content": "hi"}},
		})
		return string(b)
	}
	total := 4 + 1 + llm.EstimateTokens("one") + llm.EstimateTokens(`{"type":"object"}`) + 1100 + 9
	if u := anthCacheUsage(t, srvPost(t, url, "/v1/messages", body("one")).body); u.Write != total || u.Input != 0 {
		t.Fatalf("automatic breakpoint write: %+v, total %d", u, total)
	}
	if u := anthCacheUsage(t, srvPost(t, url, "/v1/messages", body("one")).body); u.Read != total {
		t.Fatalf("automatic breakpoint read: %+v", u)
	}
	// Changing a tool definition changes every prefix after it.
	if u := anthCacheUsage(t, srvPost(t, url, "/v1/messages", body("two")).body); u.Read != 0 || u.Write != total {
		t.Fatalf("after a tool change: %+v", u)
	}
}

func TestAnthropicCacheMixedTTLSplit(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	b, _ := json.Marshal(map[string]any{
		"model": "claude-test", "max_tokens": 100,
		"system": []any{
			map[string]any{"type": "text", "text": filler("L", 1100), "cache_control": map[string]any{"type": "ephemeral", "ttl": "1h"}},
			map[string]any{"type": "text", "text": filler("S", 300), "cache_control": map[string]any{"type": "ephemeral", "ttl": "5m"}},
		},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}},
	})
	if u := anthCacheUsage(t, srvPost(t, url, "/v1/messages", string(b)).body); u != (anthUsageOf{Input: 9, Write: 1400, W1h: 1100, W5m: 300}) {
		t.Fatalf("%+v", u)
	}
}

// oaiCached returns prompt and cached tokens of a Chat Completions answer.
func oaiCached(t *testing.T, body []byte) (prompt, cached int) {
	t.Helper()
	m := srvJSON(t, body)
	p, _ := srvDig(m, "usage", "prompt_tokens").(float64)
	c, ok := srvDig(m, "usage", "prompt_tokens_details", "cached_tokens").(float64)
	if !ok {
		t.Fatalf("cached_tokens missing: %s", body)
	}
	return int(p), int(c)
}

func oaiBody(system string, users ...string) string {
	ms := []any{map[string]any{"role": "system", "content": system}}
	for i, u := range users {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		ms = append(ms, map[string]any{"role": role, "content": u})
	}
	b, _ := json.Marshal(map[string]any{"model": "gpt-test", "messages": ms})
	return string(b)
}

func TestOpenAIAutomaticCache(t *testing.T) {
	t.Parallel()
	fc := clock.NewFake(fakeClockStart)
	_, url := srvStart(t, Options{Clock: fc})
	small := oaiBody(filler("s", 900), "hi")
	for range 2 {
		if p, c := oaiCached(t, srvPost(t, url, "/v1/chat/completions", small).body); p != 909 || c != 0 {
			t.Fatalf("below 1024: prompt %d cached %d", p, c)
		}
	}
	big := oaiBody(filler("B", 1300), "hi") // 1309 tokens
	if p, c := oaiCached(t, srvPost(t, url, "/v1/chat/completions", big).body); p != 1309 || c != 0 {
		t.Fatalf("first: prompt %d cached %d", p, c)
	}
	if p, c := oaiCached(t, srvPost(t, url, "/v1/chat/completions", big).body); p != 1309 || c != 1280 {
		t.Fatalf("second: prompt %d cached %d, want 1280 (128-token steps)", p, c)
	}
	// A longer conversation reuses the earlier prompt as its prefix.
	longer := oaiBody(filler("B", 1300), "hi", filler("r", 300), "more")
	if p, c := oaiCached(t, srvPost(t, url, "/v1/chat/completions", longer).body); p != 1309+308+9 || c != 1280 {
		t.Fatalf("longer: prompt %d cached %d", p, c)
	}
	if p, c := oaiCached(t, srvPost(t, url, "/v1/chat/completions", longer).body); c != p/128*128 || c%128 != 0 {
		t.Fatalf("longer again: prompt %d cached %d", p, c)
	}
	fc.Advance(6 * time.Minute)
	if _, c := oaiCached(t, srvPost(t, url, "/v1/chat/completions", big).body); c != 0 {
		t.Fatalf("after expiry: cached %d", c)
	}
}

// TestReplyUsageOverridesSimulator checks a Responder's fixed usage wins on
// both wires.
func TestReplyUsageOverridesSimulator(t *testing.T) {
	t.Parallel()
	resp := respondFunc(func(*llm.Request, RequestInfo) Reply {
		return Reply{Content: []llm.Block{llm.Text("x")}, Usage: &llm.Usage{InputTokens: 11, OutputTokens: 22, CacheReadTokens: 33, CacheWriteTokens: 44}}
	})
	_, url := srvStart(t, Options{Responder: resp})
	if u := anthCacheUsage(t, srvPost(t, url, "/v1/messages", helloAnthropic).body); u != (anthUsageOf{Input: 11, Read: 33, Write: 44, W5m: 44}) {
		t.Fatalf("anthropic: %+v", u)
	}
	m := srvJSON(t, srvPost(t, url, "/v1/chat/completions", helloOpenAI).body)
	if srvDig(m, "usage", "prompt_tokens") != 88.0 || srvDig(m, "usage", "completion_tokens") != 22.0 || srvDig(m, "usage", "prompt_tokens_details", "cached_tokens") != 33.0 {
		t.Fatalf("openai: %v", m["usage"])
	}
}
