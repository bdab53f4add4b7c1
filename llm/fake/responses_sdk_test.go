package fake

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/deputy-run/deputy/llm"
)

// The Responses API over real HTTP, checked with openai-go v3's responses
// client: what it sends decodes, what the fake answers decodes into its
// types with the fields a client reads.

func respParams(input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt(input)},
	}
}

// respWeatherTool is a function tool in the Responses API's flat shape.
func respWeatherTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name:       "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		Strict:     param.NewOpt(false),
	}}
}

func TestResponsesSDKNew(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{"city":"Paris"}`)
	srv, url := srvStart(t, Options{Responder: replyWith(llm.Text("Checking <now> & then."), llm.ToolUse("", "get_weather", args))})
	c := oaiClient(url)
	params := respParams("weather?")
	params.Instructions = param.NewOpt("Be brief.")
	params.Tools = []responses.ToolUnionParam{respWeatherTool()}
	res, err := c.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.ID, "resp_") || res.Object != "response" || res.Status != "completed" || res.Model != "gpt-test" || res.CreatedAt == 0 {
		t.Errorf("envelope: %q %q %q %q %v", res.ID, res.Object, res.Status, res.Model, res.CreatedAt)
	}
	if res.OutputText() != "Checking <now> & then." || len(res.Output) != 2 {
		t.Fatalf("output %q, %d items: %s", res.OutputText(), len(res.Output), res.RawJSON())
	}
	msg, call := res.Output[0], res.Output[1].AsFunctionCall()
	if msg.Type != "message" || !strings.HasPrefix(msg.ID, "msg_") || msg.Role != "assistant" || msg.Status != "completed" {
		t.Errorf("message item: %s", msg.RawJSON())
	}
	if call.Type != "function_call" || call.Name != "get_weather" || call.Arguments != string(args) || !strings.HasPrefix(call.CallID, "call_") || !strings.HasPrefix(call.ID, "fc_") {
		t.Errorf("function_call item: %s", call.RawJSON())
	}
	if res.Instructions.OfString != "Be brief." || len(res.Tools) != 1 || res.Tools[0].Name != "get_weather" {
		t.Errorf("echo: instructions %q, tools %s", res.Instructions.OfString, res.JSON.Tools.Raw())
	}
	u := res.Usage
	if u.InputTokens == 0 || u.OutputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens || !u.InputTokensDetails.JSON.CachedTokens.Valid() || !u.OutputTokensDetails.JSON.ReasoningTokens.Valid() {
		t.Errorf("usage: %s", u.RawJSON())
	}
	req := srv.Requests()[0].Request
	if req.System != "Be brief." || len(req.Messages) != 1 || req.Messages[0].Text() != "weather?" || len(req.Tools) != 1 || req.Tools[0].Name != "get_weather" {
		t.Errorf("decoded request: %+v", req)
	}
}

// respCollect streams params, checking sequence numbers, feeding every
// event to the SDK's accumulator, and returns the event types and the
// accumulator's reconstructed response.
func respCollect(t *testing.T, c openai.Client, params responses.ResponseNewParams) ([]string, *responses.Response, responses.ResponseAccumulatorSnapshot) {
	t.Helper()
	stream := c.Responses.NewStreaming(context.Background(), params)
	defer stream.Close()
	var acc responses.ResponseAccumulator
	var types []string
	for stream.Next() {
		ev := stream.Current()
		if int(ev.SequenceNumber) != len(types) {
			t.Fatalf("event %d (%s) has sequence_number %d", len(types), ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		var wsEv responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &wsEv); err != nil {
			t.Fatalf("event %s: %v", ev.Type, err)
		}
		if err := acc.AddEvent(wsEv); err != nil {
			t.Fatalf("accumulator refused %s: %v\n%s", ev.Type, err, ev.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	final, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatalf("accumulated: %v", err)
	}
	return types, final, acc.Snapshot()
}

func TestResponsesSDKStreamingAccumulates(t *testing.T) {
	t.Parallel()
	text := "Streaming ✓ text with ünïcode — 日本語, cut at rune boundaries."
	for _, maxDelta := range []int{1, 5, 1000} {
		_, url := srvStart(t, Options{MaxDelta: maxDelta, Seed: uint64(maxDelta), Responder: replyWith(
			llm.Text(text), llm.ToolUse("", "search", toolInput), llm.ToolUse("", "read", json.RawMessage(`{"f":"a.go"}`)))})
		params := respParams("go")
		params.Tools = []responses.ToolUnionParam{respWeatherTool()}
		types, final, snap := respCollect(t, oaiClient(url), params)
		if types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
			t.Errorf("max %d: events %v", maxDelta, types)
		}
		if snap.TerminalEvent != "response.completed" || snap.OutputText() != text || len(snap.Output) != 3 {
			t.Fatalf("max %d: snapshot %+v", maxDelta, snap)
		}
		if snap.Output[1].Arguments != string(toolInput) || snap.Output[1].Name != "search" || snap.Output[2].Arguments != `{"f":"a.go"}` {
			t.Errorf("max %d: arguments %q %q", maxDelta, snap.Output[1].Arguments, snap.Output[2].Arguments)
		}
		if final.Status != "completed" || final.OutputText() != text || final.Usage.OutputTokens == 0 {
			t.Errorf("max %d: final %s", maxDelta, final.RawJSON())
		}
		for _, want := range []string{"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done",
			"response.content_part.done", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done"} {
			if !slices.Contains(types, want) {
				t.Errorf("max %d: no %s in %v", maxDelta, want, types)
			}
		}
	}
}

// TestResponsesSDKFunctionCallRoundTrip sends the function call back with
// its output, as a client running the tool does, and checks what the
// Responder saw: the call as a tool_use, the output as its tool_result.
func TestResponsesSDKFunctionCallRoundTrip(t *testing.T) {
	t.Parallel()
	srv, url := srvStart(t, Options{Responder: respondFunc(func(r *llm.Request, _ RequestInfo) Reply {
		if len(r.Messages) == 1 {
			return Reply{Content: []llm.Block{llm.ToolUse("", "get_weather", json.RawMessage(`{"city":"Oslo"}`))}}
		}
		last := r.Messages[len(r.Messages)-1].Content[0]
		return Reply{Content: []llm.Block{llm.Text("It is " + last.Text + ".")}}
	})})
	c := oaiClient(url)
	for _, stream := range []bool{false, true} {
		params := respParams("weather in Oslo?")
		params.Tools = []responses.ToolUnionParam{respWeatherTool()}
		var first *responses.Response
		var err error
		if stream {
			_, first, _ = respCollect(t, c, params)
		} else if first, err = c.Responses.New(context.Background(), params); err != nil {
			t.Fatal(err)
		}
		call := first.Output[0].AsFunctionCall()
		input := responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("weather in Oslo?", responses.EasyInputMessageRoleUser),
			{OfFunctionCall: ptr(call.ToParam())},
			responses.ResponseInputItemParamOfFunctionCallOutput("sunny"),
		}
		input[2].OfFunctionCallOutput.CallID = param.NewOpt(call.CallID)
		next := responses.ResponseNewParams{Model: "gpt-test", Tools: params.Tools, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
		var second *responses.Response
		if stream {
			_, second, _ = respCollect(t, c, next)
		} else if second, err = c.Responses.New(context.Background(), next); err != nil {
			t.Fatal(err)
		}
		if second.OutputText() != "It is sunny." {
			t.Errorf("stream %v: second answer %q", stream, second.OutputText())
		}
	}
	logged := srv.Requests()
	req := logged[len(logged)-1].Request
	if len(req.Messages) != 3 || req.Messages[1].Role != llm.Assistant || req.Messages[1].Content[0].Type != llm.TypeToolUse ||
		req.Messages[2].Content[0].Type != llm.TypeToolResult || req.Messages[2].Content[0].ToolUseID != req.Messages[1].Content[0].ID {
		t.Errorf("decoded round trip: %+v", req.Messages)
	}
}

func ptr[T any](v T) *T { return &v }

// TestResponsesSDKCustomToolCall: a call to a custom (free-form) tool is a
// custom_tool_call item whose input is the call's text, streamed as
// custom_tool_call_input events; sent back with its
// custom_tool_call_output it reaches the Responder as a tool_use and its
// tool_result.
func TestResponsesSDKCustomToolCall(t *testing.T) {
	t.Parallel()
	patch := "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
	srv, url := srvStart(t, Options{Responder: respondFunc(func(r *llm.Request, _ RequestInfo) Reply {
		if len(r.Messages) == 1 {
			return Reply{Content: []llm.Block{llm.ToolCall("", "apply_patch", []byte(patch))}}
		}
		return Reply{Content: []llm.Block{llm.Text("patched")}}
	})})
	c := oaiClient(url)
	params := respParams("add a.txt")
	params.Tools = []responses.ToolUnionParam{{OfCustom: &responses.CustomToolParam{Name: "apply_patch"}}}
	for _, stream := range []bool{false, true} {
		var res *responses.Response
		var err error
		var types []string
		if stream {
			var snap responses.ResponseAccumulatorSnapshot
			types, res, snap = respCollect(t, c, params)
			if snap.Output[0].Input != patch || !slices.Contains(types, "response.custom_tool_call_input.delta") || !slices.Contains(types, "response.custom_tool_call_input.done") {
				t.Errorf("streamed custom call: %+v, events %v", snap.Output, types)
			}
		} else if res, err = c.Responses.New(context.Background(), params); err != nil {
			t.Fatal(err)
		}
		call := res.Output[0].AsCustomToolCall()
		if call.Type != "custom_tool_call" || call.Name != "apply_patch" || call.Input != patch || !strings.HasPrefix(call.ID, "ctc_") || !strings.HasPrefix(call.CallID, "call_") {
			t.Fatalf("stream %v: %s", stream, res.Output[0].RawJSON())
		}
		back := responses.ResponseNewParams{Model: "gpt-test", Tools: params.Tools, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("add a.txt", responses.EasyInputMessageRoleUser),
			{OfCustomToolCall: ptr(call.ToParam())},
			{OfCustomToolCallOutput: &responses.ResponseCustomToolCallOutputParam{CallID: call.CallID, Output: responses.ResponseCustomToolCallOutputOutputUnionParam{OfString: param.NewOpt("Done!")}}},
		}}}
		second, err := c.Responses.New(context.Background(), back)
		if err != nil || second.OutputText() != "patched" {
			t.Fatalf("stream %v: %v %q", stream, err, second.OutputText())
		}
		logged := srv.Requests()
		msgs := logged[len(logged)-1].Request.Messages
		if use, res := msgs[1].Content[0], msgs[2].Content[0]; use.Type != llm.TypeToolUse || use.Arguments() != patch || res.ToolUseID != call.CallID || res.Text != "Done!" {
			t.Errorf("stream %v: decoded %+v", stream, msgs)
		}
	}
}
