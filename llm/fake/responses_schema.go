package fake

import (
	"errors"
	"strings"

	"github.com/deputy-run/deputy/llm"
)

// text.format json_schema: the answer's text is JSON valid against the
// schema (schemaReply), as the API's structured outputs guarantee.

// respCheckSchema refuses a schema the fake cannot answer, before the
// request is numbered, in the words OpenAI uses for an invalid schema
// ("Invalid schema for response_format 'NAME': In context=(), ...").
func respCheckSchema(name string, schema []byte) *wireError {
	_, err := schemaReply(schema, "")
	var se *schemaError
	if errors.As(err, &se) {
		return oaiInvalid("text.format.schema", "invalid_json_schema", "Invalid schema for response_format '%s': %s.", name, strings.TrimSuffix(se.Error(), "."))
	}
	if err != nil {
		return oaiInvalid("text.format.schema", "invalid_json_schema", "Invalid schema for response_format '%s': %v.", name, err)
	}
	return nil
}

// schemaContent replaces the answer's text blocks with one text block
// holding JSON valid against schema (the scripted text itself when it is
// such JSON). Tool calls stay: a turn that calls a tool has no message to
// shape.
func schemaContent(g *generation, schema []byte) error {
	var text strings.Builder
	at := -1
	out := make([]llm.Block, 0, len(g.content))
	for _, b := range g.content {
		if b.Type != llm.TypeText {
			out = append(out, b)
			continue
		}
		if at < 0 {
			at = len(out)
			out = append(out, b)
		}
		text.WriteString(b.Text)
	}
	if at < 0 {
		return nil
	}
	reply, err := schemaReply(schema, text.String())
	if err != nil {
		return err
	}
	out[at] = llm.Text(reply)
	g.content = out
	g.output = llm.EstimateOutput(g.content)
	return nil
}
