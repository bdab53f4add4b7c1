package openai_test

import (
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/providertest"
)

// Target is the OpenAI-compatible provider as the shared suite sees it.
var Target = providertest.Target{
	Name: "openai",
	Wire: fake.OpenAI,
	New: func(c providertest.Config) (llm.Model, error) {
		p := c.Policy
		return openai.New("fake-model", openai.Options{APIKey: c.APIKey, BaseURL: c.RootURL + "/v1", Retry: &p, NonStreaming: c.NonStreaming})
	},
	OverloadedStatus: 503,
	// finish_reason has four values; the fake maps deputy's reasons onto
	// them as the API would, and the provider maps them back.
	StopReasons: map[llm.StopReason]llm.StopReason{
		llm.StopEndTurn: llm.StopEndTurn, llm.StopMaxTokens: llm.StopMaxTokens, llm.StopRefusal: llm.StopRefusal,
		llm.StopSequence: llm.StopEndTurn, llm.StopPauseTurn: llm.StopEndTurn, llm.StopContextLimit: llm.StopMaxTokens,
	},
	// prompt_tokens counts every prompt token; cache writes have no field
	// of their own there, so they are uncached input.
	UsageOf: func(u llm.Usage) llm.Usage {
		return llm.Usage{InputTokens: u.InputTokens + u.CacheWriteTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens}
	},
	// Automatic caching reads the longest cached prefix in 128-token steps.
	CacheRead: func(prev int64) int64 { return prev / 128 * 128 },
}

func TestProvider(t *testing.T) { providertest.Run(t, Target) }
