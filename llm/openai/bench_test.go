package openai_test

import (
	"context"
	"encoding/json"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/providertest"
)

// Per-turn cost of a model call through deputy's provider against the fake
// server over loopback, beside the bare SDK making the same call from
// params built once. Both include the in-process fake server's own work.

func BenchmarkGenerate(b *testing.B) {
	for _, nonStreaming := range []bool{false, true} {
		name := map[bool]string{false: "stream", true: "plain"}[nonStreaming]
		b.Run(name, func(b *testing.B) {
			_, root := providertest.StartServer(b, fake.Options{Responder: providertest.BenchReply()})
			m, err := openai.New("fake-model", openai.Options{APIKey: "k", BaseURL: root + "/v1", NonStreaming: nonStreaming})
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

// bareParams is BenchRequest as SDK params, written by hand as an SDK user
// would.
func bareParams(b *testing.B) sdk.ChatCompletionNewParams {
	req := providertest.BenchRequest()
	p := sdk.ChatCompletionNewParams{Model: req.Model, MaxCompletionTokens: sdk.Int(int64(req.MaxTokens))}
	p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	for _, t := range req.Tools {
		var params shared.FunctionParameters
		if err := json.Unmarshal(t.InputSchema, &params); err != nil {
			b.Fatal(err)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: t.Name, Description: sdk.String(t.Description), Parameters: params}))
	}
	for _, msg := range req.Messages {
		if msg.Role == llm.Assistant {
			a := sdk.ChatCompletionAssistantMessageParam{}
			for _, bl := range msg.Content {
				switch bl.Type {
				case llm.TypeText:
					a.Content.OfString = sdk.String(bl.Text)
				case llm.TypeToolUse:
					a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID: bl.ID, Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: bl.Name, Arguments: string(bl.Input)}}})
				}
			}
			p.Messages = append(p.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
			continue
		}
		for _, bl := range msg.Content {
			switch bl.Type {
			case llm.TypeText:
				p.Messages = append(p.Messages, sdk.UserMessage(bl.Text))
			case llm.TypeToolResult:
				p.Messages = append(p.Messages, sdk.ToolMessage(bl.Text, bl.ToolUseID))
			}
		}
	}
	return p
}

func BenchmarkBareSDK(b *testing.B) {
	b.Run("stream", func(b *testing.B) {
		_, root := providertest.StartServer(b, fake.Options{Responder: providertest.BenchReply()})
		c := sdk.NewChatCompletionService(option.WithAPIKey("k"), option.WithBaseURL(root+"/v1"), option.WithMaxRetries(0))
		p := bareParams(b)
		p.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
		b.ReportAllocs()
		providertest.MeasureCPU(b, func() {
			s := c.NewStreaming(context.Background(), p)
			var acc sdk.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				b.Fatal(err)
			}
			s.Close()
		})
	})
	b.Run("plain", func(b *testing.B) {
		_, root := providertest.StartServer(b, fake.Options{Responder: providertest.BenchReply()})
		c := sdk.NewChatCompletionService(option.WithAPIKey("k"), option.WithBaseURL(root+"/v1"), option.WithMaxRetries(0))
		p := bareParams(b)
		b.ReportAllocs()
		providertest.MeasureCPU(b, func() {
			if _, err := c.New(context.Background(), p); err != nil {
				b.Fatal(err)
			}
		})
	})
}
