package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/deputy-run/deputy/llm"
)

// These tests decode the server's output with the official Go SDK's own
// types over real HTTP: if the fake drifts from what the SDK parses, they
// fail.

func anthClient(url string, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithBaseURL(url), option.WithAPIKey("test-key"),
	}, opts...)...)
}

// toolInput is a tool input whose bytes an SDK or a fake could easily
// change: spaces, escapes, HTML-ish characters and multi-byte runes.
var toolInput = json.RawMessage(`{"path": "dir/naïve ✓.go", "query": "a \"quoted\" <b>&amp;</b>", "n": [1, 2.5, -3e2], "nested": {"ok": true, "none": null}}`)

func anthSimpleParams(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

func TestAnthropicSDKNew(t *testing.T) {
	t.Parallel()
	compact := json.RawMessage(`{"city":"Paris","days":[1,2]}`)
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("Let me look <that> up & see."), llm.ToolUse("toolu_01fixed", "get_weather", compact))})
	c := anthClient(url)
	msg, err := c.Messages.New(context.Background(), anthSimpleParams("weather?"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg.ID, "msg_01") || msg.Type != "message" || msg.Role != "assistant" || msg.Model != "claude-test" {
		t.Errorf("envelope: id %q type %q role %q model %q", msg.ID, msg.Type, msg.Role, msg.Model)
	}
	if len(msg.Content) != 2 {
		t.Fatalf("content: %d blocks", len(msg.Content))
	}
	if msg.Content[0].Type != "text" || msg.Content[0].Text != "Let me look <that> up & see." {
		t.Errorf("text block: %+v", msg.Content[0])
	}
	tu := msg.Content[1]
	if tu.Type != "tool_use" || tu.ID != "toolu_01fixed" || tu.Name != "get_weather" || !bytes.Equal(tu.Input, compact) {
		t.Errorf("tool_use block: type %q id %q name %q input %s", tu.Type, tu.ID, tu.Name, tu.Input)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || msg.StopSequence != "" {
		t.Errorf("stop: %q %q", msg.StopReason, msg.StopSequence)
	}
	// Usage follows the one counting rule: 4 (message) + 4 (block) +
	// EstimateTokens("weather?") in; text + tool name + tool input out.
	wantIn := int64(4 + 4 + llm.EstimateTokens("weather?"))
	wantOut := int64(llm.EstimateTokens("Let me look <that> up & see.") + llm.EstimateTokens("get_weather") + llm.EstimateTokens(string(compact)))
	u := msg.Usage
	if u.InputTokens != wantIn || u.OutputTokens != wantOut || u.CacheReadInputTokens != 0 || u.CacheCreationInputTokens != 0 {
		t.Errorf("usage: %+v, want in %d out %d", u, wantIn, wantOut)
	}
	if !u.JSON.CacheCreation.Valid() || !u.JSON.ServiceTier.Valid() || u.ServiceTier != "standard" {
		t.Errorf("usage lacks cache_creation or service_tier: %s", u.RawJSON())
	}
}

func TestAnthropicSDKStreamingAccumulates(t *testing.T) {
	t.Parallel()
	text := "Ünïcödé ✓ text, long enough to be cut into many deltas at rune boundaries — 日本語も。"
	for _, maxDelta := range []int{1, 3, 16, 1000} {
		_, url := srvStart(t, Options{MaxDelta: maxDelta, Seed: uint64(maxDelta),
			Responder: replyWith(
				llm.Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"I should call the tool.","signature":"c2lnbmF0dXJl"}`)),
				llm.Text(text),
				llm.ToolUse("", "search", toolInput),
				llm.ToolUse("", "read", json.RawMessage(`{}`)),
			)})
		c := anthClient(url)
		stream := c.Messages.NewStreaming(context.Background(), anthSimpleParams("go"))
		var msg anthropic.Message
		var types []string
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			if err := msg.Accumulate(ev); err != nil {
				t.Fatalf("maxDelta %d: accumulate %s: %v", maxDelta, ev.Type, err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("maxDelta %d: stream: %v", maxDelta, err)
		}
		_ = stream.Close()
		if types[0] != "message_start" || types[len(types)-1] != "message_stop" || types[len(types)-2] != "message_delta" {
			t.Errorf("maxDelta %d: event order %v", maxDelta, types)
		}
		if len(msg.Content) != 4 {
			t.Fatalf("maxDelta %d: %d blocks", maxDelta, len(msg.Content))
		}
		if b := msg.Content[0]; b.Type != "thinking" || b.Thinking != "I should call the tool." || b.Signature != "c2lnbmF0dXJl" {
			t.Errorf("maxDelta %d: thinking block %+v", maxDelta, b)
		}
		if msg.Content[1].Text != text {
			t.Errorf("maxDelta %d: text %q", maxDelta, msg.Content[1].Text)
		}
		// The input reassembled from fragments is the responder's bytes,
		// spaces and escapes included.
		if b := msg.Content[2]; b.Name != "search" || !strings.HasPrefix(b.ID, "toolu_01") || !bytes.Equal(b.Input, toolInput) {
			t.Errorf("maxDelta %d: tool_use %q %q input %s", maxDelta, b.Name, b.ID, b.Input)
		}
		if b := msg.Content[3]; b.Name != "read" || string(b.Input) != "{}" || b.ID == msg.Content[2].ID {
			t.Errorf("maxDelta %d: second tool_use %q %q input %s", maxDelta, b.Name, b.ID, b.Input)
		}
		if msg.StopReason != anthropic.StopReasonToolUse {
			t.Errorf("maxDelta %d: stop %q", maxDelta, msg.StopReason)
		}
		wantOut := int64(llm.EstimateOutput([]llm.Block{
			llm.Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"I should call the tool.","signature":"c2lnbmF0dXJl"}`)),
			llm.Text(text), llm.ToolUse("", "search", toolInput), llm.ToolUse("", "read", json.RawMessage(`{}`)),
		}))
		if msg.Usage.OutputTokens != wantOut || msg.Usage.InputTokens != int64(4+4+1) {
			t.Errorf("maxDelta %d: usage %+v, want out %d", maxDelta, msg.Usage, wantOut)
		}
	}
}

func TestAnthropicSDKStopReasons(t *testing.T) {
	t.Parallel()
	for _, r := range []llm.StopReason{llm.StopEndTurn, llm.StopMaxTokens, llm.StopSequence, llm.StopPauseTurn, llm.StopRefusal} {
		_, url := srvStart(t, Options{Responder: respondFunc(func(*llm.Request, RequestInfo) Reply {
			return Reply{Content: []llm.Block{llm.Text("x")}, StopReason: r}
		})})
		c := anthClient(url)
		msg, err := c.Messages.New(context.Background(), anthSimpleParams("x"))
		if err != nil {
			t.Fatal(err)
		}
		stream := c.Messages.NewStreaming(context.Background(), anthSimpleParams("x"))
		var acc anthropic.Message
		for stream.Next() {
			_ = acc.Accumulate(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		_ = stream.Close()
		if string(msg.StopReason) != string(r) || string(acc.StopReason) != string(r) {
			t.Errorf("stop %q: JSON %q stream %q", r, msg.StopReason, acc.StopReason)
		}
	}
}

// TestAnthropicSDKFullRequestDecodes sends a request using most of what
// the SDK can express and checks how the server decoded it.
func TestAnthropicSDKFullRequestDecodes(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{})
	c := anthClient(url, option.WithHeader("anthropic-beta", "prompt-caching-2024-07-31,interleaved-thinking-2025-05-14"))
	params := anthropic.MessageNewParams{
		Model:         "claude-test",
		MaxTokens:     4096,
		StopSequences: []string{"\n\nHuman:"},
		Metadata:      anthropic.MetadataParam{UserID: anthropic.String("user-123")},
		ServiceTier:   anthropic.MessageNewParamsServiceTierStandardOnly,
		Thinking:      anthropic.ThinkingConfigParamOfEnabled(2048),
		ToolChoice:    anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: anthropic.Bool(true)}},
		System: []anthropic.TextBlockParam{
			{Text: "You are terse."},
			{Text: "Project rules.", CacheControl: anthropic.CacheControlEphemeralParam{TTL: anthropic.CacheControlEphemeralTTLTTL1h}},
		},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:         "search",
			Description:  anthropic.String("Search the code."),
			InputSchema:  anthropic.ToolInputSchemaParam{Properties: map[string]any{"q": map[string]any{"type": "string"}}, Required: []string{"q"}},
			CacheControl: anthropic.NewCacheControlEphemeralParam(),
		}}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("find it"), anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo=")),
			anthropic.NewAssistantMessage(
				anthropic.NewThinkingBlock(ThinkingSignature("Let me search."), "Let me search."),
				anthropic.NewRedactedThinkingBlock(RedactedThinkingData("redacted")),
				anthropic.NewToolUseBlock("toolu_01a", toolInput, "search"),
			),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_01a", "found 3", false), anthropic.NewTextBlock("and?")),
		},
	}
	if _, err := c.Messages.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	log := s.Requests()
	if len(log) != 1 {
		t.Fatalf("%d requests", len(log))
	}
	l := log[0]
	if l.Header.Get("anthropic-version") == "" || !strings.Contains(l.Header.Get("anthropic-beta"), "prompt-caching") {
		t.Errorf("headers: version %q beta %q", l.Header.Get("anthropic-version"), l.Header.Get("anthropic-beta"))
	}
	if l.Header.Get("Authorization") != "Bearer REDACTED" {
		t.Errorf("authorization: %q", l.Header.Get("Authorization"))
	}
	r := l.Request
	if r.Model != "claude-test" || r.MaxTokens != 4096 || r.System != "You are terse.\nProject rules." || len(r.StopSequences) != 1 {
		t.Errorf("request: %+v", r)
	}
	if r.ToolChoice != (llm.ToolChoice{Type: "auto", DisableParallel: true}) {
		t.Errorf("tool choice: %+v", r.ToolChoice)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "search" || r.Tools[0].Description != "Search the code." || !json.Valid(r.Tools[0].InputSchema) {
		t.Errorf("tools: %+v", r.Tools)
	}
	if len(r.Messages) != 3 {
		t.Fatalf("messages: %d", len(r.Messages))
	}
	if m := r.Messages[0]; len(m.Content) != 2 || m.Content[1].Type != "image" || !json.Valid(m.Content[1].Raw) {
		t.Errorf("user message: %+v", m)
	}
	a := r.Messages[1]
	if len(a.Content) != 3 || a.Content[0].Type != "thinking" || a.Content[1].Type != "redacted_thinking" || a.Content[2].Type != llm.TypeToolUse {
		t.Fatalf("assistant message: %+v", a)
	}
	if !bytes.Contains(l.Body, a.Content[0].Raw) || !bytes.Contains(l.Body, a.Content[1].Raw) {
		t.Errorf("opaque blocks are not the body's bytes: %s / %s", a.Content[0].Raw, a.Content[1].Raw)
	}
	// tool_use input is the exact bytes from the body.
	if in := a.Content[2].Input; !bytes.Contains(l.Body, []byte(`"input":`+string(in))) || !jsonEqual(in, toolInput) {
		t.Errorf("tool input %s not the body's bytes", in)
	}
	if u := r.Messages[2]; !reflect.DeepEqual(u.Content[0], llm.ToolResult("toolu_01a", "found 3", false)) || u.Content[1].Text != "and?" {
		t.Errorf("tool result message: %+v", u)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func TestAnthropicSDKCountTokens(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	c := anthClient(url)
	req := &llm.Request{
		System:   "Be brief.",
		Tools:    []llm.ToolSpec{{Name: "search", Description: "Search.", InputSchema: json.RawMessage(`{"properties":{"q":{"type":"string"}},"type":"object"}`)}},
		Messages: []llm.Message{llm.UserText("count me, please")},
	}
	res, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:  "claude-test",
		System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String(req.System)},
		Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name: "search", Description: anthropic.String("Search."),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"q": map[string]any{"type": "string"}}},
		}}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count me, please"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	// With one system text the rule is exactly llm.EstimateRequest.
	if want := int64(llm.EstimateRequest(req)); res.InputTokens != want {
		t.Fatalf("count_tokens = %d, want %d", res.InputTokens, want)
	}
	// And it is what a generation request reports as input.
	msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "claude-test", MaxTokens: 100,
		System: []anthropic.TextBlockParam{{Text: req.System}},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name: "search", Description: anthropic.String("Search."),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"q": map[string]any{"type": "string"}}},
		}}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count me, please"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Usage.InputTokens != res.InputTokens {
		t.Fatalf("usage input %d != count_tokens %d", msg.Usage.InputTokens, res.InputTokens)
	}
}

func TestAnthropicSDKRetriesAfterOne429(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{Faults: map[int]Fault{1: {Kind: FaultRateLimit}}})
	c := anthClient(url)
	msg, err := c.Messages.New(context.Background(), anthSimpleParams("hi"))
	if err != nil {
		t.Fatalf("the SDK's retry did not succeed: %v", err)
	}
	if msg.Content[0].Text != "Hello from deputy's fake model." {
		t.Fatalf("content: %+v", msg.Content)
	}
	log := s.Requests()
	if len(log) != 2 || log[0].Status != 429 || log[1].Status != 200 || log[0].Fault == nil || log[1].N != 2 {
		t.Fatalf("log: %+v", log)
	}
}

func TestAnthropicSDKSeesFaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind   FaultKind
		status int
		typ    string
	}{
		{FaultRateLimit, 429, "rate_limit_error"},
		{FaultOverloaded, 529, "overloaded_error"},
		{FaultServerError, 500, "api_error"},
	} {
		_, url := srvStart(t, Options{Faults: map[int]Fault{1: {Kind: c.kind, RetryAfter: 7_500_000_000}, 2: {Kind: c.kind}}})
		cl := anthClient(url, option.WithMaxRetries(0))
		_, err := cl.Messages.New(context.Background(), anthSimpleParams("hi"))
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("%s: error %T %v", c.kind, err, err)
		}
		if apiErr.StatusCode != c.status || string(apiErr.Type()) != c.typ || !strings.HasPrefix(apiErr.RequestID, "req_011C") {
			t.Errorf("%s: status %d type %q request id %q", c.kind, apiErr.StatusCode, apiErr.Type(), apiErr.RequestID)
		}
		if c.kind == FaultRateLimit {
			h := apiErr.Response.Header
			if h.Get("retry-after") != "8" || h.Get("retry-after-ms") != "7500" {
				t.Errorf("retry headers: %q %q", h.Get("retry-after"), h.Get("retry-after-ms"))
			}
		}
		// The streaming call sees the same status before any event.
		stream := cl.Messages.NewStreaming(context.Background(), anthSimpleParams("hi"))
		for stream.Next() {
			t.Errorf("%s: event despite the fault", c.kind)
		}
		if !errors.As(stream.Err(), &apiErr) || apiErr.StatusCode != c.status {
			t.Errorf("%s: stream error %v", c.kind, stream.Err())
		}
		_ = stream.Close()
	}
}

func TestAnthropicSDKStreamFaults(t *testing.T) {
	t.Parallel()
	reply := replyWith(llm.Text(strings.Repeat("streaming text ", 40)), llm.ToolUse("", "t", toolInput))
	t.Run("error event", func(t *testing.T) {
		t.Parallel()
		_, url := srvStart(t, Options{Responder: reply, Faults: map[int]Fault{1: {Kind: FaultErrorEvent, AfterBytes: 600}}})
		c := anthClient(url, option.WithMaxRetries(0))
		stream := c.Messages.NewStreaming(context.Background(), anthSimpleParams("hi"))
		n := 0
		for stream.Next() {
			n++
		}
		var apiErr *anthropic.Error
		if !errors.As(stream.Err(), &apiErr) || string(apiErr.Type()) != "overloaded_error" {
			t.Fatalf("stream error = %v", stream.Err())
		}
		if n < 2 {
			t.Fatalf("only %d events before the error event", n)
		}
		_ = stream.Close()
	})
	t.Run("cut", func(t *testing.T) {
		t.Parallel()
		_, url := srvStart(t, Options{Responder: reply, Faults: map[int]Fault{1: {Kind: FaultCutStream, AfterBytes: 700}}})
		c := anthClient(url, option.WithMaxRetries(0))
		stream := c.Messages.NewStreaming(context.Background(), anthSimpleParams("hi"))
		var msg anthropic.Message
		for stream.Next() {
			_ = msg.Accumulate(stream.Current())
		}
		if stream.Err() == nil {
			t.Fatal("a cut stream ended without an error")
		}
		if msg.StopReason != "" {
			t.Fatalf("cut stream reached message_delta: %q", msg.StopReason)
		}
		_ = stream.Close()
	})
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		_, url := srvStart(t, Options{Responder: reply, Faults: map[int]Fault{1: {Kind: FaultMalformedJSON, AfterBytes: 300}, 2: {Kind: FaultMalformedJSON}}})
		cl := anthClient(url, option.WithMaxRetries(0))
		stream := cl.Messages.NewStreaming(context.Background(), anthSimpleParams("hi"))
		for stream.Next() {
		}
		var syn *json.SyntaxError
		if err := stream.Err(); err == nil || (!errors.As(err, &syn) && !strings.Contains(err.Error(), "JSON")) {
			t.Fatalf("stream error = %v", err)
		}
		_ = stream.Close()
		if _, err := cl.Messages.New(context.Background(), anthSimpleParams("hi")); err == nil {
			t.Fatal("a malformed JSON body decoded")
		}
	})
}

// TestAnthropicSDKBetaClaudeCodeOptions streams a request with what Claude
// Code sets, built with the Go SDK's beta types: a system message with a
// per-turn effort, adaptive thinking, context management, effort.
func TestAnthropicSDKBetaClaudeCodeOptions(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{Responder: replyWith(llm.Text("Bonjour."))})
	c := anthClient(url)
	params := anthropic.BetaMessageNewParams{
		Model: "claude-opus-5-5", MaxTokens: 128000,
		System: []anthropic.BetaTextBlockParam{{Text: "You are terse."}},
		Messages: []anthropic.BetaMessageParam{
			anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("hello")),
			anthropic.NewBetaSystemMessage(anthropic.BetaSystemMessageOutputConfigParam{Effort: anthropic.BetaSystemMessageOutputConfigEffortMedium},
				anthropic.BetaSystemMessageParamContentUnion{OfText: &anthropic.BetaTextBlockParam{Text: "Answer in French."}}),
		},
		Thinking: anthropic.BetaThinkingConfigParamUnion{OfAdaptive: &anthropic.BetaThinkingConfigAdaptiveParam{Display: anthropic.BetaThinkingConfigAdaptiveDisplayOmitted}},
		ContextManagement: anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{
			{OfClearThinking20251015: &anthropic.BetaClearThinking20251015EditParam{}},
		}},
		OutputConfig: anthropic.BetaOutputConfigParam{Effort: anthropic.BetaOutputConfigEffortMedium},
		Betas:        []anthropic.AnthropicBeta{"context-management-2025-06-27", "per-turn-control-2026-07-01", "effort-2025-11-24"},
	}
	stream := c.Beta.Messages.NewStreaming(context.Background(), params)
	var msg anthropic.BetaMessage
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Bonjour." || msg.StopReason != anthropic.BetaStopReasonEndTurn {
		t.Errorf("answer: %+v", msg.Content)
	}
	if !msg.JSON.ContextManagement.Valid() || msg.ContextManagement.AppliedEdits == nil {
		t.Errorf("no context_management in the answer")
	}
	if got := s.Requests()[0].Request.System; got != "You are terse.\nAnswer in French." {
		t.Errorf("System: %q", got)
	}
	n, err := c.Beta.Messages.CountTokens(context.Background(), anthropic.BetaMessageCountTokensParams{
		Model: params.Model, Messages: params.Messages, Thinking: params.Thinking,
		ContextManagement: params.ContextManagement, OutputConfig: params.OutputConfig,
		System: anthropic.BetaMessageCountTokensParamsSystemUnion{OfBetaTextBlockArray: params.System},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != msg.Usage.InputTokens {
		t.Errorf("count_tokens %d, the answer's input %d", n.InputTokens, msg.Usage.InputTokens)
	}
}

// TestAnthropicSDKThreadStreaming continues a thread whose turns stream:
// the answer is kept once its stream has ended.
func TestAnthropicSDKThreadStreaming(t *testing.T) {
	t.Parallel()
	count := respondFunc(func(r *llm.Request, _ RequestInfo) Reply {
		return Reply{Content: []llm.Block{llm.Text("turn with " + strconv.Itoa(len(r.Messages)) + " messages")}}
	})
	s, url := srvStart(t, Options{Responder: count})
	c := anthClient(url)
	thread := c.Beta.Messages.NewThread(anthropic.BetaMessageThreadCreateParams{Model: "claude-test", MaxTokens: 1024})
	send := func(text string) string {
		t.Helper()
		st := thread.SendStreaming(context.Background(), anthropic.BetaMessageThreadSendParams{
			Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))},
		})
		defer st.Close()
		var msg anthropic.BetaMessage
		for st.Next() {
			if err := msg.Accumulate(st.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Err(); err != nil || len(msg.Content) != 1 {
			t.Fatalf("turn %q: %v %s", text, err, msg.RawJSON())
		}
		return msg.Content[0].Text
	}
	if got := send("one"); got != "turn with 1 messages" {
		t.Errorf("turn 1: %q", got)
	}
	if got := send("two"); got != "turn with 3 messages" {
		t.Errorf("turn 2: %q", got)
	}
	var second struct {
		Thread   threadParam       `json:"thread"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(s.Requests()[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	if second.Thread.Type != "continue" || len(second.Messages) != 1 {
		t.Errorf("turn 2 was not a continue with its message alone: %s", s.Requests()[1].Body)
	}
}

// TestAnthropicThreadKeepsNoCutAnswer keeps nothing of an answer whose
// stream a fault cut: the API holds the whole reply or none of it, so a
// continue from it is a thread_not_found.
func TestAnthropicThreadKeepsNoCutAnswer(t *testing.T) {
	t.Parallel()
	cut := Reply{Content: []llm.Block{llm.Text("an answer long enough to be cut after its start")}, Fault: &Fault{Kind: FaultErrorEvent, AfterBytes: 600}}
	_, url := srvStart(t, Options{Responder: respondFunc(func(*llm.Request, RequestInfo) Reply { return cut })})
	r := srvPost(t, url, "/v1/messages", `{"model":"m","max_tokens":50,"stream":true,"thread":{"type":"create"},"messages":[{"role":"user","content":"hi"}]}`)
	_, rest, ok := strings.Cut(string(r.body), `"id":"`)
	id, _, _ := strings.Cut(rest, `"`)
	if !ok || !strings.HasPrefix(id, "msg_") || !strings.Contains(string(r.body), "event: error") {
		t.Fatalf("stream: %s", r.body)
	}
	r = srvPost(t, url, "/v1/messages", `{"model":"m","max_tokens":50,"thread":{"type":"continue","previous_message_id":"`+id+`"},"messages":[{"role":"user","content":"more"}]}`)
	if code := srvDig(srvJSON(t, r.body), "error", "details", "error_code"); r.status != http.StatusNotFound || code != "thread_not_found" {
		t.Errorf("continue from a cut answer: %d %s", r.status, r.body)
	}
}
