package anthropic_test

import (
	"context"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/anthropic"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/providertest"
)

// Per-turn cost of a model call through deputy's provider (translation,
// breakpoints, retry wrapper, attempt report, stall watchdog) against the
// fake server over loopback, beside the bare SDK making the same call from
// params built once. Both include the in-process fake server's own work.

func BenchmarkGenerate(b *testing.B) {
	for _, nonStreaming := range []bool{false, true} {
		name := map[bool]string{false: "stream", true: "plain"}[nonStreaming]
		b.Run(name, func(b *testing.B) {
			_, root := providertest.StartServer(b, fake.Options{Responder: providertest.BenchReply()})
			m, err := anthropic.New("fake-model", anthropic.Options{APIKey: "k", BaseURL: root, NonStreaming: nonStreaming})
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
// who caches prompts would.
func bareParams() sdk.MessageNewParams {
	req := providertest.BenchRequest()
	p := sdk.MessageNewParams{Model: req.Model, MaxTokens: int64(req.MaxTokens), System: []sdk.TextBlockParam{{Text: req.System}}}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &sdk.ToolParam{Name: t.Name, Description: param.NewOpt(t.Description),
			InputSchema: param.Override[sdk.ToolInputSchemaParam](t.InputSchema)}})
	}
	for _, msg := range req.Messages {
		var blocks []sdk.ContentBlockParamUnion
		for _, bl := range msg.Content {
			switch bl.Type {
			case llm.TypeText:
				blocks = append(blocks, sdk.NewTextBlock(bl.Text))
			case llm.TypeToolUse:
				blocks = append(blocks, sdk.NewToolUseBlock(bl.ID, bl.Input, bl.Name))
			case llm.TypeToolResult:
				blocks = append(blocks, sdk.NewToolResultBlock(bl.ToolUseID, bl.Text, bl.IsError))
			}
		}
		if msg.Role == llm.User {
			p.Messages = append(p.Messages, sdk.NewUserMessage(blocks...))
		} else {
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(blocks...))
		}
	}
	// The same four breakpoints deputy places, so the server does the same
	// prompt-cache work for both.
	cc := sdk.NewCacheControlEphemeralParam()
	p.Tools[len(p.Tools)-1].OfTool.CacheControl = cc
	p.System[0].CacheControl = cc
	for _, i := range []int{len(p.Messages) - 3, len(p.Messages) - 1} {
		c := p.Messages[i].OfUser.Content
		switch last := &c[len(c)-1]; {
		case last.OfText != nil:
			last.OfText.CacheControl = cc
		case last.OfToolResult != nil:
			last.OfToolResult.CacheControl = cc
		}
	}
	return p
}

func BenchmarkBareSDK(b *testing.B) {
	b.Run("stream", func(b *testing.B) {
		_, root := providertest.StartServer(b, fake.Options{Responder: providertest.BenchReply()})
		c := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithAPIKey("k"), option.WithBaseURL(root), option.WithMaxRetries(0))
		p := bareParams()
		b.ReportAllocs()
		providertest.MeasureCPU(b, func() {
			s := c.Messages.NewStreaming(context.Background(), p)
			var acc sdk.Message
			for s.Next() {
				if err := acc.Accumulate(s.Current()); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				b.Fatal(err)
			}
			s.Close()
		})
	})
	b.Run("plain", func(b *testing.B) {
		_, root := providertest.StartServer(b, fake.Options{Responder: providertest.BenchReply()})
		c := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithAPIKey("k"), option.WithBaseURL(root), option.WithMaxRetries(0))
		p := bareParams()
		b.ReportAllocs()
		providertest.MeasureCPU(b, func() {
			if _, err := c.Messages.New(context.Background(), p); err != nil {
				b.Fatal(err)
			}
		})
	})
}
