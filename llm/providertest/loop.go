package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
)

// Tool inputs whose bytes an SDK could easily change: spaces, escapes,
// HTML-ish characters, multi-byte runes, key order.
var (
	inputA = json.RawMessage(`{"city": "Paris", "note": "a<b>&c ✓ \"q\"", "z": 1, "a": 2}`)
	inputB = json.RawMessage(`{"path":"a.go"}`)
	inputC = json.RawMessage(`{ "path" : "b.go", "lines": [1, 2.50, -3e2] }`)
	inputD = json.RawMessage(`{}`)
)

var testTools = []llm.ToolSpec{
	{Name: "get_weather", Description: "Weather for a city.", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"note":{"type":"string"}},"required":["city"]}`)},
	{Name: "read_file", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"lines":{"type":"array"}},"required":["path"]}`)},
	{Name: "now", Description: "The time.", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
}

// loopReplies is a three-turn conversation: text and a tool call, three
// parallel tool calls, a final answer.
func loopReplies(withUsage bool) []fake.Reply {
	r := []fake.Reply{
		{Content: []llm.Block{llm.Text("Let me check <both> & more."), llm.ToolUse("toolu_A", "get_weather", inputA)}},
		{Content: []llm.Block{llm.ToolUse("toolu_B", "read_file", inputB), llm.ToolUse("toolu_C", "read_file", inputC), llm.ToolUse("toolu_D", "now", inputD)}},
		{Content: []llm.Block{llm.Text("All done: sunny, and both files read.")}},
	}
	if withUsage {
		r[0].Usage = &llm.Usage{InputTokens: 100, OutputTokens: 20, CacheWriteTokens: 50}
		r[1].Usage = &llm.Usage{InputTokens: 120, OutputTokens: 30, CacheReadTokens: 50, CacheWriteTokens: 10}
		r[2].Usage = &llm.Usage{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 160}
	}
	return r
}

// byTurn answers request k of a loop (1 user message, then 3, 5, ...) with
// replies[k].
func byTurn(replies []fake.Reply) Respond {
	return func(req *llm.Request, info fake.RequestInfo) fake.Reply {
		k := (len(req.Messages) - 1) / 2
		if k < 0 || k >= len(replies) {
			return fake.Reply{Content: []llm.Block{llm.Text(fmt.Sprintf("unexpected turn with %d messages", len(req.Messages)))}}
		}
		return replies[k]
	}
}

// toolResults answers every tool call of resp; the second result is an
// error.
func toolResults(resp *llm.Response) (llm.Message, bool) {
	uses := resp.Message().ToolUses()
	if len(uses) == 0 {
		return llm.Message{}, false
	}
	m := llm.Message{Role: llm.User}
	for i, u := range uses {
		m.Content = append(m.Content, llm.ToolResult(u.ID, "result of "+u.Name+" <ok> & fine", i == 1))
	}
	return m, true
}

// checkContent compares a response's blocks with the reply that made them.
func checkContent(t testing.TB, tg Target, m mode, got, want []llm.Block) {
	t.Helper()
	if !tg.Opaque {
		var w []llm.Block
		for _, b := range want {
			if b.Type == llm.TypeText || b.Type == llm.TypeToolUse {
				w = append(w, b)
			}
		}
		want = w
	}
	if len(got) != len(want) {
		t.Fatalf("%d blocks, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := &got[i], &want[i]
		if g.Type != w.Type {
			t.Errorf("block %d: type %q, want %q", i, g.Type, w.Type)
			continue
		}
		switch g.Type {
		case llm.TypeText:
			if g.Text != w.Text {
				t.Errorf("block %d: text %q, want %q", i, g.Text, w.Text)
			}
		case llm.TypeToolUse:
			if g.ID != w.ID || g.Name != w.Name || !sameInput(m, g.Input, w.Input) {
				t.Errorf("block %d: tool_use %s %s %s, want %s %s %s", i, g.ID, g.Name, g.Input, w.ID, w.Name, w.Input)
			}
		default:
			if !sameJSON(g.Raw, w.Raw) {
				t.Errorf("block %d: raw %s, want %s", i, g.Raw, w.Raw)
			}
		}
	}
}

// sameInput reports whether a response's tool input is the reply's. A
// stream carries the reply's bytes in fragments, and the provider must
// keep them exactly. The fake's non-streamed body compacts a tool input
// (encoding/json compacts a json.RawMessage), so there the compacted bytes
// are what the wire said.
func sameInput(m mode, got, want []byte) bool {
	if bytes.Equal(got, want) {
		return true
	}
	if !m.nonStreaming {
		return false
	}
	var c bytes.Buffer
	return json.Compact(&c, want) == nil && bytes.Equal(got, c.Bytes())
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func checkOneAttempt(t testing.TB, tg Target, atts []llm.Attempt) {
	t.Helper()
	if len(atts) != 1 {
		t.Fatalf("%d attempts, want 1: %+v", len(atts), atts)
	}
	a := atts[0]
	if a.N != 1 || a.Status != 200 || a.Reason != "" || a.Err != nil || a.Retry || a.Provider != tg.Name || a.Model != "fake-model" || a.RequestID == "" {
		t.Errorf("attempt %+v", a)
	}
}

// testToolLoop runs a three-turn tool loop (loopReplies), checking each
// response, then each request as the server received it.
func testToolLoop(t *testing.T, tg Target, m mode) {
	replies := loopReplies(true)
	srv, root := StartServer(t, fake.Options{APIKey: Key, Responder: byTurn(replies)})
	model := build(t, tg, m, root, fastPolicy(clock.NewInstant()))
	stored := runToolLoop(t, tg, m, model, replies)

	logged := srv.Requests()
	if len(logged) != len(replies) {
		t.Fatalf("%d requests logged, want %d", len(logged), len(replies))
	}
	for k, lr := range logged {
		checkLoopRequest(t, tg, m, k, lr, stored)
	}
}

// runToolLoop runs the loop's turns, each request carrying every
// parameter the wire must pass on, and checks each response against its
// reply. It returns the tool inputs as the transcript holds them, by
// tool call id.
func runToolLoop(t *testing.T, tg Target, m mode, model llm.Model, replies []fake.Reply) map[string]json.RawMessage {
	msgs := []llm.Message{llm.UserText("What's the weather? Also read two files.")}
	wantStop := []llm.StopReason{llm.StopToolUse, llm.StopToolUse, llm.StopEndTurn}
	stored := map[string]json.RawMessage{}
	temperature := 0.5
	for turn := range replies {
		var atts Attempts
		req := &llm.Request{Model: "fake-model", System: "You are a test <assistant>.", Messages: msgs, Tools: testTools, MaxTokens: 1000,
			Temperature: &temperature, StopSequences: loopStop(tg), ToolChoice: llm.ToolChoice{Type: "auto"}}
		resp, err := call(t, context.Background(), model, m, req, &atts)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		checkOneAttempt(t, tg, atts.All())
		checkContent(t, tg, m, resp.Content, replies[turn].Content)
		if resp.StopReason != wantStop[turn] {
			t.Errorf("turn %d: stop %q, want %q", turn, resp.StopReason, wantStop[turn])
		}
		if want := tg.UsageOf(*replies[turn].Usage); resp.Usage != want {
			t.Errorf("turn %d: usage %+v, want %+v", turn, resp.Usage, want)
		}
		if resp.ID == "" || resp.Model != "fake-model" {
			t.Errorf("turn %d: id %q model %q", turn, resp.ID, resp.Model)
		}
		for _, u := range resp.Message().ToolUses() {
			stored[u.ID] = u.Input
		}
		msgs = append(msgs, resp.Message())
		if res, ok := toolResults(resp); ok {
			msgs = append(msgs, res)
		}
	}
	return stored
}

// checkLoopRequest checks request k of the loop as the server received
// it: its parameters, streaming as the mode asks, its transcript's tool
// calls and results, and (where the provider places them) its cache
// breakpoints.
func checkLoopRequest(t *testing.T, tg Target, m mode, k int, lr fake.LoggedRequest, stored map[string]json.RawMessage) {
	if lr.Status != 200 || lr.Request == nil {
		t.Fatalf("request %d: status %d", k, lr.Status)
	}
	r := lr.Request
	if r.Model != "fake-model" || r.MaxTokens != 1000 || r.Temperature == nil || *r.Temperature != 0.5 ||
		!slices.Equal(r.StopSequences, loopStop(tg)) || r.ToolChoice.Type != "auto" ||
		r.System != "You are a test <assistant>." || len(r.Tools) != len(testTools) {
		t.Errorf("request %d: model %q max %d temp %v stop %q choice %+v system %q tools %d", k, r.Model, r.MaxTokens, r.Temperature, r.StopSequences, r.ToolChoice, r.System, len(r.Tools))
	}
	if lr.Stream == m.nonStreaming {
		t.Errorf("request %d: stream %v in mode %s", k, lr.Stream, m.name)
	}
	seen := checkWireTranscript(t, tg, k, lr, stored)
	if want := []int{0, 1, 4}[k]; seen != want {
		t.Errorf("request %d: %d tool calls in the transcript, want %d", k, seen, want)
	}
	if tg.Breakpoints {
		checkBreakpoints(t, k, lr.Body)
	}
}

// loopStop is the tool loop's stop sequences: none on a wire without them.
func loopStop(tg Target) []string {
	if tg.NoStopSequences {
		return nil
	}
	return []string{"\n\nHuman:"}
}

// checkWireTranscript checks that every tool call in request k's
// transcript goes back with the exact bytes stored (in the body itself,
// where inputs travel raw), and every result is the one sent. It returns
// the number of tool calls.
func checkWireTranscript(t *testing.T, tg Target, k int, lr fake.LoggedRequest, stored map[string]json.RawMessage) (seen int) {
	for _, msg := range lr.Request.Messages {
		for _, b := range msg.Content {
			switch b.Type {
			case llm.TypeToolUse:
				seen++
				if !bytes.Equal(b.Input, stored[b.ID]) {
					t.Errorf("request %d: tool_use %s input on the wire %s, stored %s", k, b.ID, b.Input, stored[b.ID])
				}
				if tg.RawInput && !bytes.Contains(lr.Body, stored[b.ID]) {
					t.Errorf("request %d: body lacks the exact bytes %s", k, stored[b.ID])
				}
			case llm.TypeToolResult:
				if !strings.HasPrefix(b.Text, "result of ") {
					t.Errorf("request %d: tool_result %q", k, b.Text)
				}
			}
		}
	}
	return seen
}

// wireBody is the part of a Messages request the breakpoint check reads.
type wireBody struct {
	Tools    []map[string]json.RawMessage `json:"tools"`
	System   []map[string]json.RawMessage `json:"system"`
	Messages []struct {
		Role    string                       `json:"role"`
		Content []map[string]json.RawMessage `json:"content"`
	} `json:"messages"`
}

// checkBreakpoints reads a logged Messages request: at most 4 markers, on
// the last tool, the system prompt's end, the newest message, and (from the
// second turn) the previous turn's newest message.
func checkBreakpoints(t testing.TB, k int, body []byte) {
	t.Helper()
	if n := bytes.Count(body, []byte(`"cache_control"`)); n > 4 {
		t.Errorf("request %d: %d cache_control markers, the API allows 4", k, n)
	}
	var b wireBody
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("request %d: %v", k, err)
	}
	has := func(m map[string]json.RawMessage) bool { _, ok := m["cache_control"]; return ok }
	want := 0
	if len(b.Tools) > 0 {
		want++
		if !has(b.Tools[len(b.Tools)-1]) {
			t.Errorf("request %d: last tool has no breakpoint", k)
		}
	}
	if len(b.System) > 0 {
		want++
		if !has(b.System[len(b.System)-1]) {
			t.Errorf("request %d: system prompt has no breakpoint", k)
		}
	}
	last := b.Messages[len(b.Messages)-1].Content
	want++
	if !has(last[len(last)-1]) {
		t.Errorf("request %d: newest message has no breakpoint", k)
	}
	if len(b.Messages) >= 3 {
		want++
		prev := b.Messages[len(b.Messages)-3].Content
		if !has(prev[len(prev)-1]) {
			t.Errorf("request %d: previous turn's newest message has no breakpoint", k)
		}
	}
	if n := bytes.Count(body, []byte(`"cache_control"`)); n != want {
		t.Errorf("request %d: %d markers, want %d", k, n, want)
	}
}

// testPromptCache runs the loop with the fake's cache simulator computing
// usage, and checks what each turn reads and writes.
func testPromptCache(t *testing.T, tg Target) {
	for _, ttl := range []time.Duration{0, time.Hour} {
		if ttl != 0 && !tg.Breakpoints {
			continue
		}
		t.Run(fmt.Sprintf("ttl=%v", ttl), func(t *testing.T) {
			t.Parallel()
			replies := loopReplies(false)
			srv, root := StartServer(t, fake.Options{APIKey: Key, Responder: byTurn(replies), MinCacheTokens: 64})
			model, err := tg.New(Config{RootURL: root, APIKey: Key, Policy: fastPolicy(clock.NewInstant()), CacheTTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			system := strings.Repeat("You are a careful assistant; follow the rules. ", 150) // ~1800 tokens
			msgs := []llm.Message{llm.UserText("What's the weather? Also read two files.")}
			var prev int64
			for turn := range replies {
				resp, err := model.Generate(context.Background(), &llm.Request{Model: "fake-model", System: system, Messages: msgs, Tools: testTools, MaxTokens: 1000}, nil)
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				u := resp.Usage
				prompt := u.Prompt()
				if prompt < 1500 {
					t.Fatalf("turn %d: prompt %d tokens, want the long system prompt counted", turn, prompt)
				}
				wantRead := int64(0)
				if turn > 0 {
					wantRead = tg.CacheRead(prev)
				}
				if u.CacheReadTokens != wantRead {
					t.Errorf("turn %d: cache read %d, want %d (previous prompt %d)", turn, u.CacheReadTokens, wantRead, prev)
				}
				if tg.CacheWrites {
					if u.CacheWriteTokens != prompt-prev || u.InputTokens != 0 {
						t.Errorf("turn %d: usage %+v, want %d written and no uncached input", turn, u, prompt-prev)
					}
				} else if u.CacheWriteTokens != 0 || u.InputTokens != prompt-wantRead {
					t.Errorf("turn %d: usage %+v", turn, u)
				}
				prev = prompt
				msgs = append(msgs, resp.Message())
				if res, ok := toolResults(resp); ok {
					msgs = append(msgs, res)
				}
			}
			if ttl == time.Hour {
				for k, lr := range srv.Requests() {
					n := bytes.Count(lr.Body, []byte(`"cache_control"`))
					if m := bytes.Count(lr.Body, []byte(`"ttl":"1h"`)); m != n || n == 0 {
						t.Errorf("request %d: %d of %d breakpoints have ttl 1h", k, m, n)
					}
				}
			}
		})
	}
}

// The thinking and redacted blocks carry tokens the fake made: its server
// refuses any other, as the Messages API does.
var (
	thinkingRaw = `{"type":"thinking","thinking":"The user wants <the time> & the date.\nI should call now.","signature":"` +
		fake.ThinkingSignature("The user wants <the time> & the date.\nI should call now.") + `"}`
	redactedRaw = `{"type":"redacted_thinking","data":"` + fake.RedactedThinkingData("redacted") + `"}`
)

// testThinking checks that thinking blocks survive the transcript: stored
// once, sent back byte for byte on every later turn.
func testThinking(t *testing.T, tg Target, m mode) {
	replies := []fake.Reply{
		{Content: []llm.Block{llm.Opaque("thinking", json.RawMessage(thinkingRaw)), llm.Opaque("redacted_thinking", json.RawMessage(redactedRaw)), llm.ToolUse("toolu_T", "now", inputD)}},
		{Content: []llm.Block{llm.Text("It is noon.")}},
		{Content: []llm.Block{llm.Text("Bye.")}},
	}
	opaque := []int{0, 1} // the opaque blocks of the first reply
	if tg.Reasoning {
		replies[0].Content = slices.Delete(replies[0].Content, 1, 2) // no redacted thinking there
		opaque = []int{0}
	}
	srv, root := StartServer(t, fake.Options{APIKey: Key, Responder: byTurn(replies)})
	model := build(t, tg, m, root, fastPolicy(clock.NewInstant()))
	msgs := []llm.Message{llm.UserText("What time is it?")}
	var stored []llm.Block
	for turn := range replies {
		resp, err := call(t, context.Background(), model, m, &llm.Request{Model: "fake-model", Messages: msgs, Tools: testTools, MaxTokens: 2000}, nil)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		want := replies[turn].Content
		if tg.Reasoning {
			want = asReasoning(t, resp.Content, want)
		}
		checkContent(t, tg, m, resp.Content, want)
		if turn == 0 {
			stored = resp.Content
		}
		msgs = append(msgs, resp.Message())
		if res, ok := toolResults(resp); ok {
			msgs = append(msgs, res)
		} else {
			msgs = append(msgs, llm.UserText("Thanks."))
		}
	}
	logged := srv.Requests()
	if !tg.Opaque {
		// The wire has no thinking blocks: none came back, and one in a
		// transcript (say, forked from an Anthropic run) is left out.
		msgs[1].Content = append([]llm.Block{llm.Opaque("thinking", json.RawMessage(thinkingRaw))}, msgs[1].Content...)
		if _, err := model.Generate(context.Background(), &llm.Request{Model: "fake-model", Messages: msgs, Tools: testTools}, nil); err != nil {
			t.Fatalf("transcript with an opaque block: %v", err)
		}
		last := srv.Requests()[len(logged)]
		if bytes.Contains(last.Body, []byte("thinking")) {
			t.Errorf("opaque block sent on a wire without one: %s", last.Body)
		}
		return
	}
	for _, i := range opaque {
		raw := stored[i].Raw
		var v any
		if err := json.Unmarshal(raw, &v); err != nil || !json.Valid(raw) {
			t.Fatalf("stored %s is not JSON: %s", stored[i].Type, raw)
		}
		for k := 1; k < len(logged); k++ {
			if !bytes.Contains(logged[k].Body, raw) {
				t.Errorf("request %d: body lacks the stored %s bytes %s", k, stored[i].Type, raw)
			}
			got := logged[k].Request.Messages[1].Content[i]
			if got.Type != stored[i].Type || !bytes.Equal(got.Raw, raw) {
				t.Errorf("request %d: block %s %s, stored %s", k, got.Type, got.Raw, raw)
			}
		}
	}
}

// asReasoning is want as a wire of reasoning items answers it: each
// thinking block must have come back as a reasoning item, with an id and
// the encrypted_content the suite asks for, and stands for itself in the
// blocks checkContent compares.
func asReasoning(t testing.TB, got, want []llm.Block) []llm.Block {
	t.Helper()
	out := slices.Clone(want)
	for i := range out {
		if out[i].Type != "thinking" {
			continue
		}
		var item struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			Encrypted string `json:"encrypted_content"`
		}
		if i >= len(got) || got[i].Type != "reasoning" || json.Unmarshal(got[i].Raw, &item) != nil ||
			item.Type != "reasoning" || item.ID == "" || item.Encrypted == "" {
			t.Errorf("block %d: want a reasoning item with an id and encrypted_content for the thinking block, got %+v", i, got)
			continue
		}
		out[i] = got[i]
	}
	return out
}
