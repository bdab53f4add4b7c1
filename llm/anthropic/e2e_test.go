package anthropic_test

import (
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/anthropic"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/providertest"
)

// Target is the Anthropic provider as the shared suite sees it.
var Target = providertest.Target{
	Name: "anthropic",
	Wire: fake.Anthropic,
	New: func(c providertest.Config) (llm.Model, error) {
		p := c.Policy
		return anthropic.New("fake-model", anthropic.Options{APIKey: c.APIKey, BaseURL: c.RootURL, Retry: &p,
			NonStreaming: c.NonStreaming, CacheTTL: c.CacheTTL})
	},
	Opaque:           true,
	Breakpoints:      true,
	RawInput:         true,
	OverloadedStatus: 529,
	StopReasons: map[llm.StopReason]llm.StopReason{
		llm.StopEndTurn: llm.StopEndTurn, llm.StopMaxTokens: llm.StopMaxTokens, llm.StopSequence: llm.StopSequence,
		llm.StopPauseTurn: llm.StopPauseTurn, llm.StopRefusal: llm.StopRefusal, llm.StopContextLimit: llm.StopContextLimit,
		"some_future_reason": "some_future_reason",
	},
	UsageOf:     func(u llm.Usage) llm.Usage { return u },
	CacheRead:   func(prev int64) int64 { return prev },
	CacheWrites: true,
}

func TestProvider(t *testing.T) { providertest.Run(t, Target) }
