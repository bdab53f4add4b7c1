package fake

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/deputy-run/deputy/llm"
)

// Chat Completions' response_format and strict function tools: what the
// request asks the answer to be, checked as the API checks it.

// oaiWireFormat is response_format: {"type":"text"}, {"type":"json_object"}
// or {"type":"json_schema","json_schema":{name, description, schema,
// strict}} (openai-node's ResponseFormatJSONSchema).
type oaiWireFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name        *string         `json:"name"`
		Description json.RawMessage `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"json_schema"`
}

// oaiWirePrediction is a predicted output: {"type":"content","content":…}.
type oaiWirePrediction struct {
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
}

// oaiFormat is a decoded JSON response format: the answer is JSON valid
// against schema (a json_object answer's schema wraps the text in an
// object, so it is JSON whatever the scenario said).
type oaiFormat struct {
	name   string
	schema []byte
}

// jsonObjectSchema is json_object mode on both OpenAI wires: any JSON
// object is valid (scripted text that is one is answered as it is), and
// other text is wrapped as {"text": ...}, the first branch schemaReply
// builds, so the scenario's words still reach the client.
var jsonObjectSchema = []byte(`{"anyOf":[{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false},{"type":"object"}]}`)

// oaiResponseFormat checks response_format and returns the format the
// answer must take, nil for plain text. A json_object request must say
// "json" somewhere in its messages, as the API requires.
func oaiResponseFormat(f *oaiWireFormat, req *llm.Request) (*oaiFormat, *wireError) {
	if f == nil {
		return nil, nil
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		if !mentionsJSON(req) {
			return nil, oaiInvalid("messages", "", "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.")
		}
		return &oaiFormat{schema: jsonObjectSchema}, nil
	case "json_schema":
		return oaiJSONSchemaFormat(f)
	case "":
		return nil, oaiInvalid("response_format.type", "missing_required_parameter", "Missing required parameter: 'response_format.type'.")
	}
	return nil, oaiInvalid("response_format.type", "invalid_value", "Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", f.Type)
}

func oaiJSONSchemaFormat(f *oaiWireFormat) (*oaiFormat, *wireError) {
	js := f.JSONSchema
	if js == nil {
		return nil, oaiInvalid("response_format.json_schema", "missing_required_parameter", "Missing required parameter: 'response_format.json_schema'.")
	}
	if js.Name == nil {
		return nil, oaiInvalid("response_format.json_schema.name", "missing_required_parameter", "Missing required parameter: 'response_format.json_schema.name'.")
	}
	name := *js.Name
	if !validSchemaName(name) {
		return nil, oaiInvalid("response_format.json_schema.name", "invalid_value", "Invalid 'response_format.json_schema.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.")
	}
	schema := []byte(js.Schema)
	if isNull(js.Schema) {
		schema = jsonObjectSchema
	}
	if werr := oaiCheckSchema(schema, js.Strict != nil && *js.Strict, "response_format", "", "response_format '"+name+"'"); werr != nil {
		return nil, werr
	}
	return &oaiFormat{name: name, schema: schema}, nil
}

// oaiCheckSchema refuses a schema the API would not take: under strict,
// one outside strict mode's subset; always, one that is no JSON Schema, or
// that the fake can build no answer for (which the message says).
func oaiCheckSchema(schema []byte, strict bool, param, code, what string) *wireError {
	if strict {
		if err := checkStrictSchema(schema); err != nil {
			return oaiInvalid(param, code, "Invalid schema for %s: %s", what, err)
		}
	}
	if _, err := schemaReply(schema, ""); err != nil {
		return oaiInvalid(param, code, "Invalid schema for %s: %s", what, err)
	}
	return nil
}

// mentionsJSON reports whether the prompt says "json" in any case, in the
// system text or a text block.
func mentionsJSON(req *llm.Request) bool {
	if strings.Contains(strings.ToLower(req.System), "json") {
		return true
	}
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if b.Type == llm.TypeText && strings.Contains(strings.ToLower(b.Text), "json") {
				return true
			}
		}
	}
	return false
}

// oaiStrictTools checks the parameters of each function tool declared
// strict and returns them by name; the arguments the fake answers for
// such a tool are then valid against them, as the API guarantees.
func oaiStrictTools(tools []oaiWireTool) (map[string][]byte, *wireError) {
	var out map[string][]byte
	for i, t := range tools {
		f := t.Function
		if t.Type != "function" || f == nil || string(f.Strict) != "true" {
			continue
		}
		schema := []byte(f.Parameters)
		if isNull(f.Parameters) {
			schema = []byte(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`)
		}
		param := fmt.Sprintf("tools[%d].function.parameters", i)
		if werr := oaiCheckSchema(schema, true, param, "invalid_function_parameters", "function '"+f.Name+"'"); werr != nil {
			return nil, werr
		}
		if out == nil {
			out = map[string][]byte{}
		}
		out[f.Name] = schema
	}
	return out, nil
}

// oaiSettings checks the options that do not shape the prompt, against
// the values openai-node 6.49's ChatCompletionCreateParams allows, and
// keeps the service tier the answer reports.
func oaiSettings(w *oaiWireRequest, d *oaiDecoded) *wireError {
	checks := []struct {
		param string
		value *string
		allow []string
	}{
		{"reasoning_effort", w.ReasoningEffort, []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}},
		{"verbosity", w.Verbosity, []string{"low", "medium", "high"}},
		{"service_tier", w.ServiceTier, []string{"auto", "default", "flex", "scale", "priority"}},
		{"prompt_cache_retention", w.PromptCacheRetention, []string{"in_memory", "24h"}},
	}
	for _, c := range checks {
		if werr := oaiOneOf(c.param, c.value, c.allow); werr != nil {
			return werr
		}
	}
	for i, m := range w.Modalities {
		if werr := oaiOneOf(fmt.Sprintf("modalities[%d]", i), &m, []string{"text", "audio"}); werr != nil {
			return werr
		}
	}
	if werr := oaiMetadata(w.Metadata); werr != nil {
		return werr
	}
	if p := w.Prediction; p != nil && p.Type != "content" {
		return oaiInvalid("prediction.type", "invalid_value", "Invalid value: '%s'. Supported values are: 'content'.", p.Type)
	}
	// The answer names the tier that served it: "default" for auto or
	// none, the one asked for otherwise.
	d.serviceTier = "default"
	if t := w.ServiceTier; t != nil && *t != "auto" {
		d.serviceTier = *t
	}
	return nil
}

// oaiOneOf refuses a string option outside its allowed values.
func oaiOneOf(param string, v *string, allow []string) *wireError {
	if v == nil {
		return nil
	}
	for _, a := range allow {
		if *v == a {
			return nil
		}
	}
	quoted := make([]string, len(allow))
	for i, a := range allow {
		quoted[i] = "'" + a + "'"
	}
	list := strings.Join(quoted[:len(quoted)-1], ", ") + ", and " + quoted[len(quoted)-1]
	return oaiInvalid(param, "invalid_value", "Invalid value: '%s'. Supported values are: %s.", *v, list)
}

// Metadata limits, as the API reference gives them: 16 pairs, keys of at
// most 64 characters, values of at most 512.
const (
	metadataMaxPairs = 16
	metadataMaxKey   = 64
	metadataMaxValue = 512
)

func oaiMetadata(m map[string]string) *wireError {
	if len(m) > metadataMaxPairs {
		return oaiInvalid("metadata", "object_above_max_properties", "Invalid 'metadata': too many properties. Expected an object with at most %d properties, but got an object with %d properties instead.", metadataMaxPairs, len(m))
	}
	// In key order, so a body with two bad pairs is refused for the same one.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if len([]rune(k)) > metadataMaxKey {
			return oaiInvalid("metadata", "invalid_value", "Invalid 'metadata': keys must be at most %d characters long, but '%s' is longer.", metadataMaxKey, k)
		}
		if n := len([]rune(v)); n > metadataMaxValue {
			p := "metadata." + k
			return oaiInvalid(p, "string_above_max_length", "Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", p, metadataMaxValue, n)
		}
	}
	return nil
}
