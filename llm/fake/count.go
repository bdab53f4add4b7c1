package fake

import "github.com/deputy-run/deputy/llm"

// Token counting. The fake has one rule, used for usage on both wires, by
// the prompt-cache simulator and by /v1/messages/count_tokens, so the three
// always agree:
//
//   - A tool definition costs 4 + EstimateTokens(name) +
//     EstimateTokens(description) + EstimateTokens(input schema JSON).
//   - A system prompt text (one Anthropic system block, one text block of
//     a role "system" message inside messages, or one OpenAI
//     system/developer message) costs EstimateTokens(text); a system
//     message's tool_addition or tool_removal block costs EstimateTokens of
//     its tool's JSON. System messages have no framing cost, since their
//     texts join llm.Request.System, which llm.EstimateRequest counts so.
//   - Every other message costs 4, plus llm.EstimateBlock for each content
//     block (4 + EstimateTokens of the block's text, tool name and input
//     bytes, or raw JSON for an opaque block).
//
// llm.EstimateTokens is ceil(bytes/4). For a request with at most one system
// text this is exactly llm.EstimateRequest of the decoded request.
//
// Output tokens are llm.EstimateOutput of the generated content (text, tool
// name plus input JSON, opaque raw JSON), the same count the scripted model
// reports, so a scenario's usage is the same in process and on either wire.

// messageOverhead is what a message's framing costs, matching llm's
// per-message estimate.
const messageOverhead = 4

func toolTokens(t *llm.ToolSpec) int {
	return 4 + llm.EstimateTokens(t.Name) + llm.EstimateTokens(t.Description) + llm.EstimateTokens(string(t.InputSchema))
}

func systemTokens(text string) int { return llm.EstimateTokens(text) }
