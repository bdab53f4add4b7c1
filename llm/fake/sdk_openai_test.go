package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/deputy-run/deputy/llm"
)

// The OpenAI client's base URL includes /v1; its paths are relative.
func oaiClient(url string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(url + "/v1/"), option.WithAPIKey("test-key"),
	}, opts...)...)
}

func oaiSimpleParams(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}

func TestOpenAISDKNew(t *testing.T) {
	t.Parallel()
	compact := json.RawMessage(`{"city":"Paris"}`)
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("Checking <now> & then."), llm.ToolUse("", "get_weather", compact), llm.ToolUse("", "get_time", toolInput))})
	c := oaiClient(url)
	res, err := c.Chat.Completions.New(context.Background(), oaiSimpleParams("weather?"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.ID, "chatcmpl-") || res.Object != "chat.completion" || res.Model != "gpt-test" || res.Created == 0 {
		t.Errorf("envelope: %q %q %q %d", res.ID, res.Object, res.Model, res.Created)
	}
	ch := res.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "Checking <now> & then." || ch.Message.Role != "assistant" {
		t.Errorf("choice: %+v", ch)
	}
	calls := ch.Message.ToolCalls
	if len(calls) != 2 {
		t.Fatalf("%d tool calls", len(calls))
	}
	if calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != string(compact) || !strings.HasPrefix(calls[0].ID, "call_") || calls[0].Type != "function" {
		t.Errorf("tool call 0: %+v", calls[0])
	}
	if calls[1].Function.Arguments != string(toolInput) || calls[1].ID == calls[0].ID {
		t.Errorf("tool call 1 arguments %q", calls[1].Function.Arguments)
	}
	u := res.Usage
	wantIn := int64(4 + 4 + llm.EstimateTokens("weather?"))
	if u.PromptTokens != wantIn || u.TotalTokens != u.PromptTokens+u.CompletionTokens || !u.PromptTokensDetails.JSON.CachedTokens.Valid() || u.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("usage: %s", u.RawJSON())
	}
}

func TestOpenAISDKStreamingAccumulates(t *testing.T) {
	t.Parallel()
	text := "Streaming ✓ text with ünïcode — 日本語, cut at rune boundaries."
	for _, maxDelta := range []int{1, 4, 16, 1000} {
		_, url := srvStart(t, Options{MaxDelta: maxDelta, Seed: uint64(maxDelta) + 7, Responder: replyWith(
			llm.Text(text), llm.ToolUse("", "search", toolInput), llm.ToolUse("", "read", json.RawMessage(`{"f":"a.go"}`)))})
		c := oaiClient(url)
		params := oaiSimpleParams("go")
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := c.Chat.Completions.NewStreaming(context.Background(), params)
		var acc openai.ChatCompletionAccumulator
		var chunks []openai.ChatCompletionChunk
		for stream.Next() {
			ch := stream.Current()
			chunks = append(chunks, ch)
			if !acc.AddChunk(ch) {
				t.Fatalf("maxDelta %d: accumulator refused chunk %s", maxDelta, ch.RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("maxDelta %d: %v", maxDelta, err)
		}
		_ = stream.Close()
		if len(acc.Choices) != 1 {
			t.Fatalf("maxDelta %d: %d choices", maxDelta, len(acc.Choices))
		}
		m := acc.Choices[0].Message
		if m.Content != text || acc.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("maxDelta %d: content %q finish %q", maxDelta, m.Content, acc.Choices[0].FinishReason)
		}
		if len(m.ToolCalls) != 2 || m.ToolCalls[0].Function.Name != "search" || m.ToolCalls[0].Function.Arguments != string(toolInput) ||
			m.ToolCalls[1].Function.Arguments != `{"f":"a.go"}` || !strings.HasPrefix(m.ToolCalls[1].ID, "call_") {
			t.Errorf("maxDelta %d: tool calls %+v", maxDelta, m.ToolCalls)
		}
		// id and name travel once per call, in its first fragment.
		ids := 0
		for _, ch := range chunks {
			for _, c := range ch.Choices {
				for _, tc := range c.Delta.ToolCalls {
					if tc.ID != "" {
						ids++
						if tc.Function.Name == "" || tc.Function.Arguments != "" {
							t.Errorf("maxDelta %d: first fragment %s", maxDelta, ch.RawJSON())
						}
					} else if tc.Function.Name != "" {
						t.Errorf("maxDelta %d: name repeated: %s", maxDelta, ch.RawJSON())
					}
				}
			}
		}
		if ids != 2 {
			t.Errorf("maxDelta %d: %d ids sent, want 2", maxDelta, ids)
		}
		last := chunks[len(chunks)-1]
		if len(last.Choices) != 0 || !last.JSON.Usage.Valid() || last.Usage.CompletionTokens != acc.Usage.CompletionTokens {
			t.Errorf("maxDelta %d: usage chunk %s", maxDelta, last.RawJSON())
		}
		wantOut := int64(llm.EstimateTokens(text) + llm.EstimateTokens("search") + llm.EstimateTokens(string(toolInput)) +
			llm.EstimateTokens("read") + llm.EstimateTokens(`{"f":"a.go"}`))
		if acc.Usage.CompletionTokens != wantOut || acc.Usage.PromptTokens != 9 {
			t.Errorf("maxDelta %d: usage %+v, want completion %d", maxDelta, acc.Usage, wantOut)
		}
	}
}

func TestOpenAISDKStreamWithoutUsageOption(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	c := oaiClient(url)
	stream := c.Chat.Completions.NewStreaming(context.Background(), oaiSimpleParams("hi"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		ch := stream.Current()
		if ch.JSON.Usage.Valid() {
			t.Errorf("usage sent without include_usage: %s", ch.RawJSON())
		}
		acc.AddChunk(ch)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	_ = stream.Close()
	if acc.Choices[0].Message.Content != "Hello from deputy's fake model." || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("%+v", acc.Choices[0])
	}
}

func TestOpenAISDKFinishReasons(t *testing.T) {
	t.Parallel()
	for r, want := range map[llm.StopReason]string{llm.StopEndTurn: "stop", llm.StopToolUse: "tool_calls", llm.StopMaxTokens: "length", llm.StopSequence: "stop"} {
		_, url := srvStart(t, Options{Responder: respondFunc(func(*llm.Request, RequestInfo) Reply {
			return Reply{Content: []llm.Block{llm.Text("x")}, StopReason: r}
		})})
		c := oaiClient(url)
		res, err := c.Chat.Completions.New(context.Background(), oaiSimpleParams("x"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].FinishReason != want {
			t.Errorf("%s: finish %q, want %q", r, res.Choices[0].FinishReason, want)
		}
	}
}

// TestOpenAISDKFullRequestDecodes maps a rich Chat Completions request to
// llm.Request.
func TestOpenAISDKFullRequestDecodes(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{})
	c := oaiClient(url)
	asst := openai.ChatCompletionAssistantMessageParam{
		Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String("Searching.")},
		ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{
			{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_a", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "search", Arguments: string(toolInput)}}},
			{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_b", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "read", Arguments: `{}`}}},
		},
	}
	params := openai.ChatCompletionNewParams{
		Model: "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Be terse."),
			openai.DeveloperMessage("Follow the rules."),
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("look"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,iVBORw0KGgo="}),
			}),
			{OfAssistant: &asst},
			openai.ToolMessage("3 hits", "call_a"),
			openai.ToolMessage("file body", "call_b"),
			openai.UserMessage("and?"),
		},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "search", Description: openai.String("Search."), Parameters: shared.FunctionParameters{"type": "object"},
		})},
		ToolChoice:          openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		ParallelToolCalls:   openai.Bool(false),
		MaxCompletionTokens: openai.Int(500),
		Temperature:         openai.Float(0.2),
		Seed:                openai.Int(42),
		User:                openai.String("u-1"),
		Stop:                openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END"}},
		ResponseFormat:      openai.ChatCompletionNewParamsResponseFormatUnion{OfText: &shared.ResponseFormatTextParam{}},
	}
	if _, err := c.Chat.Completions.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	l := s.Requests()[0]
	if l.Header.Get("Authorization") != "Bearer REDACTED" {
		t.Errorf("authorization: %q", l.Header.Get("Authorization"))
	}
	r := l.Request
	if r.System != "Be terse.\nFollow the rules." || r.MaxTokens != 500 || r.Temperature == nil || *r.Temperature != 0.2 || !reflect.DeepEqual(r.StopSequences, []string{"END"}) {
		t.Errorf("request: %+v", r)
	}
	if r.ToolChoice != (llm.ToolChoice{Type: "any", DisableParallel: true}) {
		t.Errorf("tool choice: %+v", r.ToolChoice)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "search" || string(r.Tools[0].InputSchema) != `{"type":"object"}` {
		t.Errorf("tools: %+v", r.Tools)
	}
	if len(r.Messages) != 3 {
		t.Fatalf("messages: %+v", r.Messages)
	}
	if m := r.Messages[0]; m.Role != llm.User || len(m.Content) != 2 || m.Content[0].Text != "look" || m.Content[1].Type != "image_url" {
		t.Errorf("user: %+v", m)
	}
	a := r.Messages[1]
	if a.Role != llm.Assistant || len(a.Content) != 3 || a.Content[0].Text != "Searching." ||
		a.Content[1].ID != "call_a" || !bytes.Equal(a.Content[1].Input, toolInput) || a.Content[2].Name != "read" {
		t.Errorf("assistant: %+v", a)
	}
	// Tool messages and the user message after them form one user turn.
	u := r.Messages[2]
	if u.Role != llm.User || len(u.Content) != 3 || !reflect.DeepEqual(u.Content[0], llm.ToolResult("call_a", "3 hits", false)) ||
		u.Content[1].ToolUseID != "call_b" || u.Content[2].Text != "and?" {
		t.Errorf("tool results: %+v", u)
	}
}

func TestOpenAISDKRetriesAfterOne429(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{Faults: map[int]Fault{1: {Kind: FaultRateLimit}}})
	c := oaiClient(url)
	res, err := c.Chat.Completions.New(context.Background(), oaiSimpleParams("hi"))
	if err != nil {
		t.Fatalf("the SDK's retry did not succeed: %v", err)
	}
	if res.Choices[0].Message.Content == "" {
		t.Fatal("empty answer")
	}
	if log := s.Requests(); len(log) != 2 || log[0].Status != 429 || log[1].Status != 200 {
		t.Fatalf("log: %+v", log)
	}
}

func TestOpenAISDKSeesFaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind   FaultKind
		status int
		typ    string
		code   string
	}{
		{FaultRateLimit, 429, "requests", "rate_limit_exceeded"},
		{FaultOverloaded, 503, "server_error", ""},
		{FaultServerError, 500, "server_error", ""},
		{FaultErrorEvent, 503, "server_error", ""}, // no stream: the status a client sees instead
	} {
		_, url := srvStart(t, Options{Faults: map[int]Fault{1: {Kind: c.kind, RetryAfter: 2_000_000_000}}})
		cl := oaiClient(url, option.WithMaxRetries(0))
		_, err := cl.Chat.Completions.New(context.Background(), oaiSimpleParams("hi"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("%s: %T %v", c.kind, err, err)
		}
		if apiErr.StatusCode != c.status || apiErr.Type != c.typ || apiErr.Code != c.code || apiErr.Message == "" {
			t.Errorf("%s: status %d type %q code %q message %q", c.kind, apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message)
		}
		if c.kind == FaultRateLimit && (apiErr.Response.Header.Get("retry-after") != "2" || apiErr.Response.Header.Get("retry-after-ms") != "2000") {
			t.Errorf("retry headers: %v", apiErr.Response.Header)
		}
		if !strings.HasPrefix(apiErr.Response.Header.Get("x-request-id"), "req_") {
			t.Errorf("%s: x-request-id %q", c.kind, apiErr.Response.Header.Get("x-request-id"))
		}
	}
}

func TestOpenAISDKStreamFaults(t *testing.T) {
	t.Parallel()
	reply := replyWith(llm.Text(strings.Repeat("streamed words ", 30)), llm.ToolUse("", "t", toolInput))
	t.Run("error frame", func(t *testing.T) {
		t.Parallel()
		_, url := srvStart(t, Options{Responder: reply, Faults: map[int]Fault{1: {Kind: FaultErrorEvent, AfterBytes: 900}}})
		c := oaiClient(url, option.WithMaxRetries(0))
		stream := c.Chat.Completions.NewStreaming(context.Background(), oaiSimpleParams("hi"))
		n := 0
		for stream.Next() {
			n++
		}
		if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "overloaded") || n < 2 {
			t.Fatalf("after %d chunks: %v", n, err)
		}
		_ = stream.Close()
	})
	t.Run("cut", func(t *testing.T) {
		t.Parallel()
		_, url := srvStart(t, Options{Responder: reply, Faults: map[int]Fault{1: {Kind: FaultCutStream, AfterBytes: 1000}}})
		c := oaiClient(url, option.WithMaxRetries(0))
		stream := c.Chat.Completions.NewStreaming(context.Background(), oaiSimpleParams("hi"))
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if stream.Err() == nil {
			t.Fatal("a cut stream ended without an error")
		}
		if len(acc.Choices) == 1 && acc.Choices[0].FinishReason != "" {
			t.Fatalf("cut stream finished: %q", acc.Choices[0].FinishReason)
		}
		_ = stream.Close()
	})
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		_, url := srvStart(t, Options{Responder: reply, Faults: map[int]Fault{1: {Kind: FaultMalformedJSON, AfterBytes: 400}, 2: {Kind: FaultMalformedJSON}}})
		c := oaiClient(url, option.WithMaxRetries(0))
		stream := c.Chat.Completions.NewStreaming(context.Background(), oaiSimpleParams("hi"))
		for stream.Next() {
		}
		if stream.Err() == nil {
			t.Fatal("malformed frame decoded")
		}
		_ = stream.Close()
		if _, err := c.Chat.Completions.New(context.Background(), oaiSimpleParams("hi")); err == nil {
			t.Fatal("malformed body decoded")
		}
	})
}

func TestOpenAISDKReportsCachedTokens(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	c := oaiClient(url)
	params := openai.ChatCompletionNewParams{
		Model: "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(filler("C", 2000)),
			openai.UserMessage("hi"),
		},
	}
	for i, want := range []int64{0, 1920} { // 2009 tokens, in 128-token steps
		res, err := c.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if u := res.Usage; u.PromptTokens != 2009 || u.PromptTokensDetails.CachedTokens != want {
			t.Errorf("request %d: prompt %d cached %d, want 2009 and %d", i+1, u.PromptTokens, u.PromptTokensDetails.CachedTokens, want)
		}
	}
}
