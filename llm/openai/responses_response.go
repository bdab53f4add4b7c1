package openai

import (
	"bytes"
	"encoding/json"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/deputy-run/deputy/llm"
)

// fromResponse translates a response whose output items are output (the
// response's own, or those a stream finished): one block per item, in
// order, so a streamed delta's Index (its output_index) is the block's
// position.
func fromResponse(r *responses.Response, output []responses.ResponseOutputItemUnion) *llm.Response {
	u := &r.Usage
	// Usage as Chat Completions counts it, the same three numbers, mapped
	// by the one rule (usage).
	resp := &llm.Response{ID: r.ID, Model: r.Model, Content: make([]llm.Block, 0, len(output)), Usage: usage(&sdk.CompletionUsage{
		PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens,
		PromptTokensDetails: sdk.CompletionUsagePromptTokensDetails{
			CachedTokens: u.InputTokensDetails.CachedTokens, CacheWriteTokens: u.InputTokensDetails.CacheWriteTokens},
	})}
	calls, refused := false, false
	for i := range output {
		it := &output[i]
		switch it.Type {
		case "message":
			text, refusal := messageText(it)
			refused = refused || refusal
			resp.Content = append(resp.Content, llm.Text(text))
		case "function_call":
			calls = true
			// Arguments that are not a JSON object are kept as sent, for
			// the loop to answer with an error result (llm.ToolCall).
			resp.Content = append(resp.Content, llm.ToolCall(it.CallID, it.Name, []byte(it.Arguments.OfString)))
		default:
			resp.Content = append(resp.Content, llm.Opaque(it.Type, compact(it.RawJSON())))
		}
	}
	resp.StopReason = responseStop(r, calls, refused)
	return resp
}

// messageText joins a message item's output_text and refusal parts;
// refusal reports a refusal part among them.
func messageText(it *responses.ResponseOutputItemUnion) (text string, refusal bool) {
	if len(it.Content) == 1 {
		c := &it.Content[0]
		return c.Text + c.Refusal, c.Type == "refusal"
	}
	var b strings.Builder
	for i := range it.Content {
		c := &it.Content[i]
		b.WriteString(c.Text)
		b.WriteString(c.Refusal)
		refusal = refusal || c.Type == "refusal"
	}
	return b.String(), refusal
}

// responseStop maps a response's status onto deputy's stop reasons.
func responseStop(r *responses.Response, calls, refused bool) llm.StopReason {
	if r.Status == responses.ResponseStatusIncomplete {
		switch reason := r.IncompleteDetails.Reason; reason {
		case "max_output_tokens", "":
			return llm.StopMaxTokens
		case "content_filter":
			return llm.StopRefusal
		default:
			return llm.StopReason(reason)
		}
	}
	switch {
	case calls:
		return llm.StopToolUse
	case refused:
		return llm.StopRefusal
	}
	return llm.StopEndTurn
}

// compact returns an item's JSON without insignificant whitespace: the
// form openai-go's encoder sends an override in (it compacts, and escapes
// nothing). Stored so, a reasoning item goes back byte for byte as stored
// on every turn, which keeps the prompt-cache prefix stable; only the
// spelling of the JSON changes, never a key, value or escape. It is a
// copy, so the block does not pin the SDK's buffers.
func compact(raw string) json.RawMessage {
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := json.Compact(&b, []byte(raw)); err != nil {
		// Not JSON (the SDK decoded it, so this is theoretical): kept as
		// it came.
		return json.RawMessage(raw)
	}
	return b.Bytes()
}
