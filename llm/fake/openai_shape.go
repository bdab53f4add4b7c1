package fake

import (
	"encoding/json"
	"fmt"

	"github.com/deputy-run/deputy/llm"
)

// shape makes a generation what the request's format and strict tools
// promise: arguments of a strict tool valid against its parameters, and
// the text, under a JSON response format, one JSON value valid against
// the schema (answerBySchema, which every wire shares; a refusal stays
// text and goes out as message.refusal, as structured outputs answer one).
// Output tokens are counted again when the fake estimated them (not when
// the Responder pinned usage).
func (d *oaiDecoded) shape(g *generation) error {
	changed := false
	for i := range g.content {
		b := &g.content[i]
		schema, ok := d.strictTools[b.Name]
		if b.Type != llm.TypeToolUse || !ok {
			continue
		}
		args, err := schemaReply(schema, b.Arguments())
		if err != nil {
			return fmt.Errorf("fake: arguments for strict tool %q: %w", b.Name, err)
		}
		b.Input, b.InvalidInput, changed = json.RawMessage(args), "", true
	}
	if changed {
		g.reestimate()
	}
	if d.format == nil {
		return nil
	}
	if err := g.answerBySchema(d.format.schema); err != nil {
		return fmt.Errorf("fake: answer for response_format %q: %w", d.format.name, err)
	}
	return nil
}

// refusal reports whether the answer goes out as a refusal: a JSON format
// was asked for and the model refused, so the text is message.refusal and
// content is null.
func (d *oaiDecoded) refusal(g *generation) bool {
	return d.format != nil && g.stop == llm.StopRefusal
}

// finishReason is finish_reason for this request: a structured-outputs
// refusal finishes with "stop", its text in refusal.
func (d *oaiDecoded) finishReason(g *generation) string {
	if d.refusal(g) {
		return "stop"
	}
	return oaiFinishReason(g.stop)
}
