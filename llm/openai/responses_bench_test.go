package openai_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/providertest"
)

// Per-turn cost of a Responses API call through deputy's provider against
// the fake server over loopback, beside the bare SDK making the same call
// from params built once, as overhead_bench_test.go measures Chat
// Completions. Both include the in-process fake server's own work.

func BenchmarkResponsesGenerate(b *testing.B) {
	for _, nonStreaming := range []bool{false, true} {
		name := map[bool]string{false: "stream", true: "plain"}[nonStreaming]
		b.Run(name, func(b *testing.B) {
			_, root := providertest.StartServer(b, fake.Options{Responder: providertest.BenchReply()})
			m, err := openai.New("fake-model", openai.Options{APIKey: "k", BaseURL: root + "/v1", NonStreaming: nonStreaming, Responses: true})
			if err != nil {
				b.Fatal(err)
			}
			req := providertest.BenchRequest()
			ctx := llm.WithAttemptObserver(context.Background(), func(llm.Attempt) {})
			b.ReportAllocs()
			providertest.MeasureCPU(b, func() {
				if _, err := m.Generate(ctx, req, nil); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// bareResponseParams is BenchRequest as Responses params, written by hand
// as an SDK user would, with the settings deputy sends (store false,
// encrypted reasoning, tools not strict).
func bareResponseParams(b *testing.B) responses.ResponseNewParams {
	req := providertest.BenchRequest()
	p := responses.ResponseNewParams{Model: req.Model, Instructions: param.NewOpt(req.System), MaxOutputTokens: param.NewOpt(int64(req.MaxTokens)),
		Store: param.NewOpt(false), Include: []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}}
	for _, t := range req.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
			b.Fatal(err)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: t.Name, Description: param.NewOpt(t.Description),
			Parameters: schema, Strict: param.NewOpt(false)}})
	}
	var items responses.ResponseInputParam
	for _, msg := range req.Messages {
		for _, bl := range msg.Content {
			switch bl.Type {
			case llm.TypeText:
				items = append(items, responses.ResponseInputItemParamOfMessage(bl.Text, responses.EasyInputMessageRole(msg.Role)))
			case llm.TypeToolUse:
				items = append(items, responses.ResponseInputItemParamOfFunctionCall(string(bl.Input), bl.ID, bl.Name))
			case llm.TypeToolResult:
				items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: param.NewOpt(bl.ToolUseID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(bl.Text)}}})
			}
		}
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	return p
}

func BenchmarkResponsesBareSDK(b *testing.B) {
	b.Run("stream", func(b *testing.B) {
		_, root := providertest.StartServer(b, fake.Options{Responder: providertest.BenchReply()})
		c := responses.NewResponseService(option.WithAPIKey("k"), option.WithBaseURL(root+"/v1"), option.WithMaxRetries(0))
		p := bareResponseParams(b)
		b.ReportAllocs()
		providertest.MeasureCPU(b, func() {
			s := c.NewStreaming(context.Background(), p)
			var final responses.Response
			for s.Next() {
				if ev := s.Current(); ev.Type == "response.completed" {
					final = ev.Response
				}
			}
			if err := s.Err(); err != nil || final.ID == "" {
				b.Fatal(err, final.ID)
			}
			s.Close()
		})
	})
	b.Run("plain", func(b *testing.B) {
		_, root := providertest.StartServer(b, fake.Options{Responder: providertest.BenchReply()})
		c := responses.NewResponseService(option.WithAPIKey("k"), option.WithBaseURL(root+"/v1"), option.WithMaxRetries(0))
		p := bareResponseParams(b)
		b.ReportAllocs()
		providertest.MeasureCPU(b, func() {
			if _, err := c.New(context.Background(), p); err != nil {
				b.Fatal(err)
			}
		})
	})
}
