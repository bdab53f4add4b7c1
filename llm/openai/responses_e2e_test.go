package openai_test

import (
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/providertest"
)

// ResponsesTarget is the Responses API provider as the shared suite sees
// it, against the fake's POST /v1/responses.
var ResponsesTarget = providertest.Target{
	Name: "openai",
	Wire: fake.OpenAI,
	New: func(c providertest.Config) (llm.Model, error) {
		p := c.Policy
		return openai.New("fake-model", openai.Options{APIKey: c.APIKey, BaseURL: c.RootURL + "/v1", Retry: &p, NonStreaming: c.NonStreaming, Responses: true})
	},
	Opaque:          true,
	Reasoning:       true,
	NoStopSequences: true,
	// The fake's response.created and response.in_progress echo the
	// suite's three tools: 3,221 bytes before the first delta.
	StreamPreamble:   3000,
	OverloadedStatus: 503,
	// status is completed or incomplete; only max_output_tokens makes the
	// fake's response incomplete.
	StopReasons: map[llm.StopReason]llm.StopReason{
		llm.StopEndTurn: llm.StopEndTurn, llm.StopMaxTokens: llm.StopMaxTokens, llm.StopRefusal: llm.StopEndTurn,
		llm.StopSequence: llm.StopEndTurn, llm.StopPauseTurn: llm.StopEndTurn, llm.StopContextLimit: llm.StopEndTurn,
	},
	// input_tokens counts every prompt token, as prompt_tokens does.
	UsageOf:   Target.UsageOf,
	CacheRead: Target.CacheRead,
}

func TestResponsesProvider(t *testing.T) { providertest.Run(t, ResponsesTarget) }
