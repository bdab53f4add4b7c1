package anthropic

import (
	"bytes"
	"encoding/json"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/deputy-run/deputy/llm"
)

// toResponse translates the SDK's message. Text and tool_use become deputy
// blocks (the input keeping the model's bytes); any other block is kept as
// its raw JSON in canonical form. inputs, from a stream, holds each block's
// concatenated input_json_delta fragments (nil for a block that had none).
func toResponse(msg *sdk.Message, inputs [][]byte) *llm.Response {
	r := &llm.Response{
		ID:           msg.ID,
		Model:        msg.Model,
		Content:      make([]llm.Block, 0, len(msg.Content)),
		StopReason:   llm.StopReason(msg.StopReason),
		StopSequence: msg.StopSequence,
		Usage:        usageOf(&msg.Usage),
	}
	for i := range msg.Content {
		b := &msg.Content[i]
		switch b.Type {
		case llm.TypeText:
			r.Content = append(r.Content, llm.Text(b.Text))
		case llm.TypeToolUse:
			var in []byte
			if i < len(inputs) && inputs[i] != nil {
				in = inputs[i]
			} else {
				in = toolInput(b)
			}
			r.Content = append(r.Content, llm.ToolCall(b.ID, b.Name, in))
		default:
			r.Content = append(r.Content, llm.Opaque(b.Type, canonical(b.RawJSON())))
		}
	}
	return r
}

// usageOf maps the API's usage. cache_creation splits the cache writes by
// lifetime (ephemeral_5m_input_tokens, ephemeral_1h_input_tokens; the
// Messages API's Usage object, anthropic-sdk-go v2 message.go
// CacheCreation); the one-hour part is priced apart. A stream carries the
// split in message_start only, while message_delta may restate the total,
// so the part is kept within the total.
func usageOf(u *sdk.Usage) llm.Usage {
	return llm.Usage{
		InputTokens:        u.InputTokens,
		OutputTokens:       u.OutputTokens,
		CacheReadTokens:    u.CacheReadInputTokens,
		CacheWriteTokens:   u.CacheCreationInputTokens,
		CacheWrite1hTokens: max(0, min(u.CacheCreation.Ephemeral1hInputTokens, u.CacheCreationInputTokens)),
	}
}

// canonical returns raw compacted and with <, >, &, U+2028 and U+2029
// escaped: the form the SDK's encoder gives any raw JSON it sends. Storing an
// opaque block in this form makes the stored bytes and the bytes on the wire
// the same on every turn (the encoder maps this form to itself), which
// keeps the prompt-cache prefix stable. The content is unchanged: only its
// JSON spelling.
func canonical(raw string) json.RawMessage {
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := json.Compact(&b, []byte(raw)); err != nil {
		// Not JSON (the SDK saw to that when decoding, so this is
		// theoretical): keep it as it came.
		return json.RawMessage(raw)
	}
	var out bytes.Buffer
	out.Grow(b.Len())
	json.HTMLEscape(&out, b.Bytes())
	return out.Bytes()
}

// toolInput returns a non-streamed tool call's input as the exact bytes the
// wire carried (the decoder keeps the raw bytes). That is any JSON value: one
// that is not an object becomes the call's InvalidInput (llm.ToolCall). It
// is copied so the response does not pin the SDK's buffers.
//
// A streamed call's input is not taken from here: the SDK's accumulator
// replaces fragments that do not concatenate to valid JSON with {}, which
// would run the tool with no arguments instead of telling the model its
// arguments were not JSON, so streamOnce concatenates them itself.
func toolInput(b *sdk.ContentBlockUnion) json.RawMessage {
	if len(b.Input) == 0 {
		return json.RawMessage(`{}`)
	}
	return bytes.Clone(b.Input)
}
