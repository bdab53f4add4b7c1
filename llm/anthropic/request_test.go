package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"pgregory.net/rapid"

	"github.com/deputy-run/deputy/llm"
)

func newTestModel(t testing.TB, opts Options) *Model {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = "k"
	}
	m, err := New("claude-test", opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// body encodes a request as the SDK would send it.
func body(t interface{ Fatal(...any) }, m *Model, req *llm.Request) []byte {
	p, err := m.params(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParamsOnTheWire(t *testing.T) {
	t.Parallel()
	input := json.RawMessage(`{"q": "a<b> & \"c\"", "z": 1,  "a": [1, 2.50]}`)
	thinking := canonical(`{"type":"thinking", "thinking":"if a<b && c>d\u2028then", "signature":"c2ln"}`)
	req := &llm.Request{
		System:     "be brief",
		Tools:      []llm.ToolSpec{{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "b", Description: "B.", InputSchema: json.RawMessage(`{"type": "object", "properties": {}}`)}},
		ToolChoice: llm.ToolChoice{Type: "tool", Name: "b", DisableParallel: true},
		MaxTokens:  5000,
		Messages: []llm.Message{
			llm.UserText("hi"),
			{Role: llm.Assistant, Content: []llm.Block{llm.Opaque("thinking", thinking), llm.ToolUse("t1", "b", input), llm.ToolUse("t2", "a", nil)}},
			{Role: llm.User, Content: []llm.Block{llm.ToolResult("t1", "", false), llm.ToolResult("t2", "boom", true)}},
		},
	}
	m := newTestModel(t, Options{ThinkingBudget: 2048, CacheTTL: CacheTTL1h})
	b := body(t, m, req)
	for _, want := range []string{
		string(input),    // the model's bytes, not re-encoded
		string(thinking), // the stored form
		`"input":{}`,
		`{"tool_use_id":"t1","type":"tool_result"}`, // no empty text
		`"is_error":true`,
		`"tool_choice":{"name":"b","disable_parallel_tool_use":true,"type":"tool"}`,
		`"thinking":{"budget_tokens":2048,"type":"enabled"}`,
		`"max_tokens":5000`,
		`"model":"claude-test"`,
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("body lacks %s\n%s", want, b)
		}
	}
	if n := bytes.Count(b, []byte(`"cache_control"`)); n != 4 {
		t.Errorf("%d breakpoints, want 4: %s", n, b)
	}
	if !json.Valid(b) {
		t.Errorf("body is not JSON: %s", b)
	}
	// The canonical form is what the SDK's encoder writes for it.
	if !bytes.Contains(b, []byte(`a\u003cb \u0026\u0026 c\u003ed\u2028then`)) {
		t.Errorf("thinking not in the encoder's form: %s", b)
	}
}

func TestParamsErrors(t *testing.T) {
	t.Parallel()
	m := newTestModel(t, Options{})
	cases := map[string]*llm.Request{
		"bad input":   {Messages: []llm.Message{{Role: llm.Assistant, Content: []llm.Block{llm.ToolUse("c", "now", json.RawMessage(`{"a":`))}}}},
		"bad role":    {Messages: []llm.Message{{Role: "system", Content: []llm.Block{llm.Text("x")}}}},
		"no raw":      {Messages: []llm.Message{{Role: llm.Assistant, Content: []llm.Block{{Type: "thinking"}}}}},
		"bad schema":  {Tools: []llm.ToolSpec{{Name: "x", InputSchema: json.RawMessage(`{`)}}},
		"no name":     {Tools: []llm.ToolSpec{{}}},
		"bad choice":  {ToolChoice: llm.ToolChoice{Type: "maybe"}},
		"choice name": {ToolChoice: llm.ToolChoice{Type: "tool"}},
	}
	for name, req := range cases {
		if _, err := m.params(req); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, o := range []Options{{}, {APIKey: "k", CacheTTL: time.Minute}, {APIKey: "k", BaseURL: "api.anthropic.com"}, {APIKey: "k", ThinkingBudget: 1, AdaptiveThinking: true}} {
		if _, err := New("m", o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// The stored form of an opaque block is a fixed point of the SDK's encoder:
// whatever the text, the bytes stored are the bytes sent.
func TestCanonicalIsTheWireForm(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringOf(rapid.SampledFrom([]rune("ab <>&\"\\\n\t\u2028\u2029é✓日"))).Draw(t, "text")
		enc, _ := json.Marshal(text)
		raw := fmt.Sprintf(`{ "type" : "thinking",  "thinking": %s, "signature": "s/ig+=" }`, enc)
		c := canonical(raw)
		if !bytes.Equal(canonical(string(c)), c) {
			t.Fatalf("canonical is not idempotent: %s", c)
		}
		var a, b any
		if json.Unmarshal([]byte(raw), &a) != nil || json.Unmarshal(c, &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("canonical changed the value: %s -> %s", raw, c)
		}
		msg := sdk.MessageParam{OfAssistant: &sdk.AssistantMessageParam{Content: []sdk.ContentBlockParamUnion{mustBlock(t, llm.Opaque("thinking", c))}}}
		out, err := msg.MarshalJSON()
		if err != nil || !bytes.Contains(out, c) {
			t.Fatalf("wire %s does not hold stored %s (%v)", out, c, err)
		}
	})
}

func mustBlock(t *rapid.T, b llm.Block) sdk.ContentBlockParamUnion {
	u, err := block(&b)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Whatever the transcript, deputy places at most four breakpoints, never
// on a thinking block, and always where the cache needs them.
func TestBreakpointsProperty(t *testing.T) {
	t.Parallel()
	m := newTestModel(t, Options{})
	rapid.Check(t, func(t *rapid.T) {
		req := &llm.Request{}
		for i := range rapid.IntRange(0, 3).Draw(t, "tools") {
			req.Tools = append(req.Tools, llm.ToolSpec{Name: fmt.Sprintf("t%d", i)})
		}
		if rapid.Bool().Draw(t, "system") {
			req.System = "sys"
		}
		n := rapid.IntRange(1, 9).Draw(t, "messages")
		for i := range n {
			role := llm.User
			if i%2 == 1 {
				role = llm.Assistant
			}
			msg := llm.Message{Role: role}
			for j := range rapid.IntRange(1, 4).Draw(t, "blocks") {
				kinds := []string{"text", "empty"}
				if role == llm.Assistant {
					kinds = append(kinds, "tool_use", "thinking")
				} else {
					kinds = append(kinds, "tool_result")
				}
				switch rapid.SampledFrom(kinds).Draw(t, "kind") {
				case "text":
					msg.Content = append(msg.Content, llm.Text("x"))
				case "empty":
					msg.Content = append(msg.Content, llm.Text(""))
				case "tool_use":
					msg.Content = append(msg.Content, llm.ToolUse(fmt.Sprintf("u%d_%d", i, j), "t0", json.RawMessage(`{}`)))
				case "tool_result":
					msg.Content = append(msg.Content, llm.ToolResult("u", "r", false))
				case "thinking":
					msg.Content = append(msg.Content, llm.Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"t","signature":"s"}`)))
				}
			}
			req.Messages = append(req.Messages, msg)
		}
		b := body(t, m, req)
		var w struct {
			Tools    []map[string]json.RawMessage `json:"tools"`
			System   []map[string]json.RawMessage `json:"system"`
			Messages []struct {
				Content []map[string]json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatal(err)
		}
		total := bytes.Count(b, []byte(`"cache_control"`))
		if total > MaxBreakpoints {
			t.Fatalf("%d breakpoints: %s", total, b)
		}
		has := func(blk map[string]json.RawMessage) bool { _, ok := blk["cache_control"]; return ok }
		if len(w.Tools) > 0 && !has(w.Tools[len(w.Tools)-1]) {
			t.Fatalf("last tool unmarked: %s", b)
		}
		if len(w.System) > 0 && !has(w.System[0]) {
			t.Fatalf("system unmarked: %s", b)
		}
		markable := func(blk map[string]json.RawMessage) bool {
			var typ, text string
			_ = json.Unmarshal(blk["type"], &typ)
			_ = json.Unmarshal(blk["text"], &text)
			return typ == "tool_use" || typ == "tool_result" || (typ == "text" && text != "")
		}
		// lastMarkable is the block of message i that should carry a
		// breakpoint, or -1.
		lastMarkable := func(i int) int {
			c := w.Messages[i].Content
			for j := len(c) - 1; j >= 0; j-- {
				if markable(c[j]) {
					return j
				}
			}
			return -1
		}
		want := map[[2]int]bool{}
		if j := lastMarkable(n - 1); j >= 0 {
			want[[2]int{n - 1, j}] = true
		}
		// Roles alternate from a user message: the previous request ended
		// two messages back, or one back before an assistant prefill.
		wantPrev := n - 3
		if n%2 == 0 {
			wantPrev = n - 2
		}
		if prev := previousTurnEnd(req.Messages); prev != max(wantPrev, -1) {
			t.Fatalf("previous turn end %d with %d messages, want %d", prev, n, wantPrev)
		} else if prev >= 0 {
			if j := lastMarkable(prev); j >= 0 {
				want[[2]int{prev, j}] = true
			}
		}
		for i, msg := range w.Messages {
			for j, blk := range msg.Content {
				if has(blk) != want[[2]int{i, j}] {
					t.Fatalf("message %d block %d: marked %v, want %v: %s", i, j, has(blk), want[[2]int{i, j}], b)
				}
				if has(blk) && strings.Contains(string(blk["type"]), "thinking") {
					t.Fatalf("thinking block marked: %s", b)
				}
			}
		}
	})
}

func TestNoCache(t *testing.T) {
	t.Parallel()
	m := newTestModel(t, Options{NoCache: true})
	b := body(t, m, &llm.Request{System: "s", Tools: []llm.ToolSpec{{Name: "a"}}, Messages: []llm.Message{llm.UserText("x")}})
	if bytes.Contains(b, []byte("cache_control")) {
		t.Errorf("breakpoints with NoCache: %s", b)
	}
}
