package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/deputy-run/deputy/llm"
)

// toResponse translates the SDK's message. Text and tool_use become deputy
// blocks (the input keeping the model's bytes); any other block is kept as
// its raw JSON in canonical form.
func toResponse(msg *sdk.Message) *llm.Response {
	r := &llm.Response{
		ID:           msg.ID,
		Model:        msg.Model,
		Content:      make([]llm.Block, 0, len(msg.Content)),
		StopReason:   llm.StopReason(msg.StopReason),
		StopSequence: msg.StopSequence,
		Usage: llm.Usage{
			InputTokens:      msg.Usage.InputTokens,
			OutputTokens:     msg.Usage.OutputTokens,
			CacheReadTokens:  msg.Usage.CacheReadInputTokens,
			CacheWriteTokens: msg.Usage.CacheCreationInputTokens,
		},
	}
	for i := range msg.Content {
		b := &msg.Content[i]
		switch b.Type {
		case llm.TypeText:
			r.Content = append(r.Content, llm.Text(b.Text))
		case llm.TypeToolUse:
			r.Content = append(r.Content, llm.ToolUse(b.ID, b.Name, toolInput(b)))
		default:
			r.Content = append(r.Content, llm.Opaque(b.Type, canonical(b.RawJSON())))
		}
	}
	return r
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

// bodySnippet describes an error response whose body had no message (a
// proxy's HTML page, an empty body): the status text and the body's start.
func bodySnippet(body string, status int) string {
	s := http.StatusText(status)
	body = strings.TrimSpace(body)
	if body == "" {
		return s
	}
	body = strings.Join(strings.Fields(body), " ")
	if len(body) > 200 {
		body = body[:200] + "…"
	}
	return s + ": " + body
}

// toolInput returns a tool call's input as the exact bytes the wire
// carried: the streaming accumulator concatenates the input fragments as
// they came, and the non-streaming decoder keeps the raw bytes too. It is
// copied so the response does not pin the SDK's buffers.
func toolInput(b *sdk.ContentBlockUnion) json.RawMessage {
	if len(b.Input) == 0 {
		return json.RawMessage(`{}`)
	}
	return bytes.Clone(b.Input)
}
