package fake

import (
	"fmt"
)

// text.format json_schema: the answer's text is JSON valid against the
// schema, as the API's structured outputs guarantee, shaped by the shaper
// every wire shares (answerBySchema).

// respCheckSchema refuses a format the API refuses, as Chat Completions
// refuses its response_format (oaiCheckSchema: strict mode's subset under
// strict: true, and a schema the fake cannot answer), and a name outside
// the pattern both OpenAI wires give (openai-openapi's
// ResponseFormatJsonSchema and TextResponseFormatJsonSchema: "Must be a-z,
// A-Z, 0-9, or contain underscores and dashes"). The message is the
// API's ("Invalid schema for response_format 'NAME': In context=(), ...").
func respCheckSchema(name string, schema []byte, strict bool) *wireError {
	if !validSchemaName(name) {
		return oaiInvalid("text.format.name", "invalid_value", "Invalid 'text.format.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.")
	}
	return oaiCheckSchema(schema, strict, "text.format.schema", "invalid_json_schema", "response_format '"+name+"'")
}

// schemaContent makes the answer's text what text.format asks for.
func schemaContent(g *generation, schema []byte) error {
	if err := g.answerBySchema(schema); err != nil {
		return fmt.Errorf("fake: answer for text.format: %w", err)
	}
	return nil
}
