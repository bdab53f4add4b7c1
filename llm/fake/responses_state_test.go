package fake

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/deputy-run/deputy/llm"
)

// previous_response_id with store, GET and DELETE, json_schema answers and
// reasoning items, over real HTTP with openai-go's responses client.

// TestResponsesSDKPreviousResponseContinues continues a stored response
// with only the function call's output: the Responder sees the stored
// input and output first, and the continued response is stored in turn.
func TestResponsesSDKPreviousResponseContinues(t *testing.T) {
	t.Parallel()
	var seen [][]llm.Message
	_, url := srvStart(t, Options{Responder: respondFunc(func(r *llm.Request, _ RequestInfo) Reply {
		seen = append(seen, r.Messages)
		if len(r.Messages) == 1 {
			return Reply{Content: []llm.Block{llm.ToolUse("", "get_weather", json.RawMessage(`{"city":"Oslo"}`))}}
		}
		return Reply{Content: []llm.Block{llm.Text("done after " + r.Messages[len(r.Messages)-1].Content[0].Text)}}
	})})
	c := oaiClient(url)
	ctx := context.Background()
	first, err := c.Responses.New(ctx, respParams("weather?"))
	if err != nil {
		t.Fatal(err)
	}
	call := first.Output[0].AsFunctionCall()
	out := responses.ResponseInputItemParamOfFunctionCallOutput("rain")
	out.OfFunctionCallOutput.CallID = param.NewOpt(call.CallID)
	next := responses.ResponseNewParams{Model: "gpt-test", PreviousResponseID: param.NewOpt(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}}
	second, err := c.Responses.New(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "done after rain" || second.PreviousResponseID != first.ID {
		t.Fatalf("continued: %q, previous %q", second.OutputText(), second.PreviousResponseID)
	}
	msgs := seen[1]
	if len(msgs) != 3 || msgs[0].Text() != "weather?" || msgs[1].Content[0].ID != call.CallID || msgs[2].Content[0].ToolUseID != call.CallID {
		t.Errorf("continued prompt: %+v", msgs)
	}
	// A third turn from the second sees the whole chain.
	third, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-test", PreviousResponseID: param.NewOpt(second.ID), Input: respParams("thanks").Input})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(seen[2]); n != 5 || seen[2][3].Text() != "done after rain" || third.Status != "completed" {
		t.Errorf("chain of %d messages: %+v", n, seen[2])
	}

	// An item_reference to the stored call stands for the call itself.
	ref := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
		{OfItemReference: &responses.ResponseInputItemItemReferenceParam{ID: call.ID}}, out,
	}
	if _, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: ref}}); err != nil {
		t.Fatalf("item_reference: %v", err)
	}
	if msgs := seen[3]; len(msgs) != 3 || msgs[1].Content[0].Type != llm.TypeToolUse || msgs[1].Content[0].ID != call.CallID {
		t.Errorf("item_reference resolved to %+v", msgs)
	}
	ref[1].OfItemReference.ID = "fc_nope"
	var refErr *openai.Error
	if _, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: ref}}); !errors.As(err, &refErr) || refErr.StatusCode != 400 || refErr.Param != "input" {
		t.Errorf("unknown item_reference: %v", err)
	}

	got, err := c.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != first.ID || got.Output[0].AsFunctionCall().CallID != call.CallID {
		t.Fatalf("GET: %v %+v", err, got)
	}
	if err := c.Responses.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if _, err := c.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("GET after DELETE: %v", err)
	}
	if _, err := c.Responses.New(ctx, next); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "previous_response_id" || apiErr.Code != "previous_response_not_found" {
		t.Fatalf("continuing a deleted response: %v", err)
	}
}

// TestResponsesSDKListsInputItems: a stored response's input items, each
// with an id (given one when the client sent none), newest first by
// default, paged by the SDK's auto-pager.
func TestResponsesSDKListsInputItems(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	c := oaiClient(url)
	ctx := context.Background()
	var input responses.ResponseInputParam
	for _, text := range []string{"one", "two", "three"} {
		input = append(input, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
	}
	res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	pager := c.Responses.InputItems.ListAutoPaging(ctx, res.ID, responses.InputItemListParams{Limit: param.NewOpt(int64(2))})
	for pager.Next() {
		it := pager.Current()
		if !strings.HasPrefix(it.ID, "msg_") {
			t.Errorf("item without an id: %s", it.RawJSON())
		}
		texts = append(texts, it.Content.OfInputItemContentList[0].Text)
	}
	if err := pager.Err(); err != nil || strings.Join(texts, " ") != "three two one" {
		t.Fatalf("%v: %q", err, texts)
	}
	page, err := c.Responses.InputItems.List(ctx, res.ID, responses.InputItemListParams{Order: responses.InputItemListParamsOrderAsc})
	if err != nil || len(page.Data) != 3 || page.Data[0].Content.OfInputItemContentList[0].Text != "one" || page.HasMore {
		t.Fatalf("asc: %v %+v", err, page)
	}
	var apiErr *openai.Error
	if _, err := c.Responses.InputItems.List(ctx, "resp_nope", responses.InputItemListParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("unknown response: %v", err)
	}
}

// TestResponsesStoreFalseKeepsNothing: store: false answers but keeps
// nothing to continue from or GET.
func TestResponsesStoreFalseKeepsNothing(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	c := oaiClient(url)
	params := respParams("hi")
	params.Store = param.NewOpt(false)
	res, err := c.Responses.New(context.Background(), params)
	if err != nil || !strings.Contains(res.RawJSON(), `"store":false`) {
		t.Fatalf("%v: %s", err, res.RawJSON())
	}
	var apiErr *openai.Error
	if _, err := c.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("GET of an unstored response: %v", err)
	}
}

func TestResponsesStoreIsBounded(t *testing.T) {
	t.Parallel()
	st := newRespStore()
	for i := range maxStoredResponses + 10 {
		st.put(string(rune('a'+i%26))+strings.Repeat("x", i), nil, nil, []byte("{}"))
	}
	if len(st.byID) != maxStoredResponses {
		t.Fatalf("%d stored", len(st.byID))
	}
	if _, ok := st.get("a"); ok {
		t.Error("the oldest was kept")
	}
	big := make([]byte, maxStoredBytes/2+1)
	st.put("big1", nil, nil, big)
	st.put("big2", nil, nil, big)
	if _, ok := st.get("big1"); ok || st.bytes > maxStoredBytes {
		t.Errorf("over the byte bound: %d bytes", st.bytes)
	}
}

// TestResponsesStoreIsPerServer: a response stored on one server is not
// another's, and deleting many keeps the eviction order small.
func TestResponsesStoreIsPerServer(t *testing.T) {
	t.Parallel()
	a, b := NewServer(Options{}), NewServer(Options{})
	a.responseStore().put("resp_1", nil, nil, []byte("{}"))
	if _, ok := b.responseStore().get("resp_1"); ok {
		t.Fatal("servers share a store")
	}
	st := a.responseStore()
	for i := range 500 {
		id := "r" + strings.Repeat("x", i)
		st.put(id, nil, nil, []byte("{}"))
		st.remove(id)
	}
	if len(st.order) > 2*len(st.byID)+64 {
		t.Errorf("order holds %d ids for %d responses", len(st.order), len(st.byID))
	}
}

func TestResponsesSDKJSONSchema(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("Paris is sunny"))})
	c := oaiClient(url)
	params := respParams("weather?")
	params.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
		Name:   "weather",
		Strict: param.NewOpt(true),
		Schema: map[string]any{"type": "object", "additionalProperties": false, "required": []string{"city", "temp"},
			"properties": map[string]any{"city": map[string]any{"type": "string"}, "temp": map[string]any{"type": "integer"}}},
	}}}
	for _, stream := range []bool{false, true} {
		var res *responses.Response
		var err error
		if stream {
			_, res, _ = respCollect(t, c, params)
		} else if res, err = c.Responses.New(context.Background(), params); err != nil {
			t.Fatal(err)
		}
		var v struct {
			City *string `json:"city"`
			Temp *int    `json:"temp"`
		}
		if err := json.Unmarshal([]byte(res.OutputText()), &v); err != nil || v.City == nil || v.Temp == nil {
			t.Errorf("stream %v: %q is not an instance (%v)", stream, res.OutputText(), err)
		}
	}
	params.Text.Format.OfJSONSchema.Schema = map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"$ref": "https://example.com/s.json"}}}
	var apiErr *openai.Error
	if _, err := c.Responses.New(context.Background(), params); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "text.format.schema" {
		t.Fatalf("unusable schema: %v", err)
	}
}

// TestResponsesSDKReasoningRoundTrip: a scenario's thinking block becomes
// a reasoning item with its summary (asked for) and encrypted_content
// (included); sent back unchanged it reaches the Responder opaque and
// byte-identical, and a changed one is refused.
func TestResponsesSDKReasoningRoundTrip(t *testing.T) {
	t.Parallel()
	thinking := "The user wants the weather; call the tool."
	srv, url := srvStart(t, Options{Responder: respondFunc(func(r *llm.Request, _ RequestInfo) Reply {
		if len(r.Messages) == 1 {
			return Reply{Content: []llm.Block{llm.Opaque("thinking", thinkingBlock(thinking)), llm.ToolUse("", "get_weather", json.RawMessage(`{}`))}}
		}
		return Reply{Content: []llm.Block{llm.Text("ok")}}
	})})
	c := oaiClient(url)
	params := respParams("weather?")
	params.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffortLow, Summary: shared.ReasoningSummaryAuto}
	params.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	for _, stream := range []bool{false, true} {
		var res *responses.Response
		var err error
		var types []string
		if stream {
			types, res, _ = respCollect(t, c, params)
		} else if res, err = c.Responses.New(context.Background(), params); err != nil {
			t.Fatal(err)
		}
		rs := res.Output[0].AsReasoning()
		if rs.Type != "reasoning" || !strings.HasPrefix(rs.ID, "rs_") || len(rs.Summary) != 1 || rs.Summary[0].Text != thinking || rs.EncryptedContent == "" {
			t.Fatalf("stream %v: reasoning item %s", stream, rs.RawJSON())
		}
		if res.Usage.OutputTokensDetails.ReasoningTokens == 0 {
			t.Errorf("stream %v: no reasoning tokens: %s", stream, res.Usage.RawJSON())
		}
		for _, want := range []string{"response.reasoning_summary_part.added", "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done", "response.reasoning_summary_part.done"} {
			if stream && !strings.Contains(strings.Join(types, " "), want) {
				t.Errorf("no %s in %v", want, types)
			}
		}
		call := res.Output[1].AsFunctionCall()
		out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
		out.OfFunctionCallOutput.CallID = param.NewOpt(call.CallID)
		back := responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
			{OfReasoning: ptr(rs.ToParam())}, {OfFunctionCall: ptr(call.ToParam())}, out,
		}}}
		if _, err := c.Responses.New(context.Background(), back); err != nil {
			t.Fatalf("stream %v: sending the reasoning back: %v", stream, err)
		}
		logged := srv.Requests()
		last := logged[len(logged)-1]
		if !strings.Contains(string(last.Body), `"encrypted_content":"`+rs.EncryptedContent+`"`) {
			t.Errorf("stream %v: the client changed encrypted_content", stream)
		}
		blk := last.Request.Messages[1].Content[0]
		if blk.Type != "reasoning" || !strings.Contains(string(blk.Raw), rs.EncryptedContent) {
			t.Errorf("stream %v: the Responder saw %+v", stream, blk)
		}
		if text, ok := openReasoning(rs.EncryptedContent); !ok || text != thinking {
			t.Errorf("stream %v: token opens to %q %v", stream, text, ok)
		}
		// ToParam sends the item's raw JSON; a tampered one is built anew.
		tampered := responses.ResponseInputItemParamOfReasoning(rs.ID, []responses.ResponseReasoningItemSummaryParam{{Text: thinking}})
		tampered.OfReasoning.EncryptedContent = param.NewOpt(rs.EncryptedContent[:len(rs.EncryptedContent)-2] + "AA")
		back.Input.OfInputItemList[1] = tampered
		var apiErr *openai.Error
		if _, err := c.Responses.New(context.Background(), back); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "invalid_encrypted_content" {
			t.Errorf("stream %v: tampered content: %v", stream, err)
		}
	}
}

// TestResponsesReasoningWithoutAsking: without reasoning.summary and the
// include, the reasoning item is there but empty, as the API sends it.
func TestResponsesReasoningWithoutAsking(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Opaque("thinking", thinkingBlock("secret")), llm.Text("hi"))})
	c := oaiClient(url)
	res, err := c.Responses.New(context.Background(), respParams("x"))
	if err != nil {
		t.Fatal(err)
	}
	rs := res.Output[0].AsReasoning()
	if rs.Type != "reasoning" || len(rs.Summary) != 0 || rs.JSON.EncryptedContent.Valid() || strings.Contains(res.RawJSON(), "secret") {
		t.Errorf("reasoning item %s", rs.RawJSON())
	}
}

// TestResponsesSDKReportsCachedTokens: the second of two identical long
// prompts reads the prefix the first wrote, in 128-token steps.
func TestResponsesSDKReportsCachedTokens(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	c := oaiClient(url)
	params := respParams(strings.Repeat("a long and stable prompt ", 400))
	params.Instructions = param.NewOpt("You are terse.")
	var cached []int64
	for range 2 {
		res, err := c.Responses.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		cached = append(cached, res.Usage.InputTokensDetails.CachedTokens)
		if res.Usage.InputTokens < 1024 {
			t.Fatalf("prompt of %d tokens is too short to cache", res.Usage.InputTokens)
		}
	}
	if cached[0] != 0 || cached[1] == 0 || cached[1]%128 != 0 {
		t.Errorf("cached tokens %v", cached)
	}
	// A continuation's prompt starts with the stored one, so it reads it.
	first, err := c.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	next := respParams("and then?")
	next.Instructions, next.PreviousResponseID = params.Instructions, param.NewOpt(first.ID)
	res, err := c.Responses.New(context.Background(), next)
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Usage; u.InputTokensDetails.CachedTokens < cached[1] || u.InputTokens <= first.Usage.InputTokens {
		t.Errorf("continuation usage %s after %s", u.RawJSON(), first.Usage.RawJSON())
	}
}
