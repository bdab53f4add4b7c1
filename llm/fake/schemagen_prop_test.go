package fake

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestSchemaReplyAlwaysValid is the property schemaReply promises: for
// any schema drawn from the features structured outputs use, it answers
// without error, its answer validates against the schema (checked by a
// validator of its own), and the same schema gives the same answer.
func TestSchemaReplyAlwaysValid(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		sg := &schemaDraw{t: t}
		root := sg.object(0)
		if len(sg.defs) > 0 {
			root["$defs"] = sg.defs
		}
		schema, err := json.Marshal(root)
		if err != nil {
			t.Fatal(err)
		}
		text := rapid.SampledFrom([]string{"", "Done.", "{not json", `{"a":1}`, "héllo wörld"}).Draw(t, "text")
		got, err := schemaReply(schema, text)
		if err != nil {
			t.Fatalf("schemaReply(%s): %v", schema, err)
		}
		v, err := newSchemaValidator(schema)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.check(v.root, []byte(got)); err != nil {
			t.Fatalf("answer %s is not valid against %s: %v", got, schema, err)
		}
		again, _ := schemaReply(schema, text)
		if again != got {
			t.Fatalf("not deterministic: %s then %s", got, again)
		}
	})
}

// schemaDraw draws random schemas; defs collects the $defs that $refs
// point at.
type schemaDraw struct {
	t    *rapid.T
	defs map[string]any
	n    int
}

func (d *schemaDraw) label(s string) string {
	d.n++
	return fmt.Sprintf("%s%d", s, d.n)
}

func (d *schemaDraw) schema(depth int) map[string]any {
	kinds := []string{"string", "number", "integer", "boolean", "null", "enum", "const"}
	if depth < 3 {
		kinds = append(kinds, "object", "array", "anyOf", "oneOf", "ref", "nullable")
	}
	switch rapid.SampledFrom(kinds).Draw(d.t, d.label("kind")) {
	case "string":
		return d.str()
	case "number":
		return d.number("number")
	case "integer":
		return d.number("integer")
	case "boolean", "null":
		return map[string]any{"type": rapid.SampledFrom([]string{"boolean", "null"}).Draw(d.t, d.label("bn"))}
	case "enum":
		return map[string]any{"type": "string", "enum": []any{"a", "b", "c"}[:rapid.IntRange(1, 3).Draw(d.t, d.label("enum"))]}
	case "const":
		return map[string]any{"const": rapid.SampledFrom([]any{"x", 3.5, true, nil}).Draw(d.t, d.label("const"))}
	case "object":
		return d.object(depth + 1)
	case "array":
		return d.array(depth + 1)
	case "anyOf":
		return map[string]any{"anyOf": []any{d.schema(depth + 1), d.schema(depth + 1)}}
	case "oneOf":
		// Branches of distinct types, as a satisfiable oneOf needs.
		return map[string]any{"oneOf": []any{d.str(), d.number("integer"), map[string]any{"type": "null"}}}
	case "ref":
		name := d.label("Def")
		if d.defs == nil {
			d.defs = map[string]any{}
		}
		d.defs[name] = d.schema(depth + 1)
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	s := d.schema(depth + 1) // nullable
	if t, ok := s["type"].(string); ok && t != "null" {
		s["type"] = []any{t, "null"}
	}
	return s
}

func (d *schemaDraw) str() map[string]any {
	s := map[string]any{"type": "string"}
	switch rapid.IntRange(0, 3).Draw(d.t, d.label("strkind")) {
	case 1:
		s["format"] = rapid.SampledFrom([]string{"date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}).Draw(d.t, d.label("format"))
	case 2:
		s["pattern"] = rapid.SampledFrom([]string{`^[a-z]+$`, `^\d{3}-\d{4}$`, `^(foo|bar)[0-9]*$`, `[A-Z]`, `^.{2,5}$`}).Draw(d.t, d.label("pattern"))
	case 3:
		lo := rapid.IntRange(0, 20).Draw(d.t, d.label("minLength"))
		s["minLength"] = lo
		if rapid.Bool().Draw(d.t, d.label("hasMax")) {
			s["maxLength"] = lo + rapid.IntRange(0, 10).Draw(d.t, d.label("maxLength"))
		}
	}
	return s
}

func (d *schemaDraw) number(typ string) map[string]any {
	s := map[string]any{"type": typ}
	lo := rapid.IntRange(-1000, 1000).Draw(d.t, d.label("lo"))
	width := rapid.IntRange(5, 100).Draw(d.t, d.label("width")) // room for a multiple of 2 strictly inside
	if rapid.Bool().Draw(d.t, d.label("hasLo")) {
		s[rapid.SampledFrom([]string{"minimum", "exclusiveMinimum"}).Draw(d.t, d.label("loKw"))] = lo
	}
	if rapid.Bool().Draw(d.t, d.label("hasHi")) {
		s[rapid.SampledFrom([]string{"maximum", "exclusiveMaximum"}).Draw(d.t, d.label("hiKw"))] = lo + width
	}
	if rapid.Bool().Draw(d.t, d.label("hasMult")) {
		s["multipleOf"] = rapid.SampledFrom([]any{0.5, 0.25, 1, 2}).Draw(d.t, d.label("mult"))
	}
	return s
}

func (d *schemaDraw) object(depth int) map[string]any {
	props := map[string]any{}
	var required []any
	n := rapid.IntRange(0, 4).Draw(d.t, d.label("props"))
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("p%d", i)
		props[name] = d.schema(depth)
		if rapid.Bool().Draw(d.t, d.label("required")) {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if required != nil {
		s["required"] = required
	}
	return s
}

func (d *schemaDraw) array(depth int) map[string]any {
	lo := rapid.IntRange(0, 3).Draw(d.t, d.label("minItems"))
	s := map[string]any{"type": "array", "items": d.schema(depth), "minItems": lo}
	if rapid.Bool().Draw(d.t, d.label("hasMaxItems")) {
		s["maxItems"] = lo + rapid.IntRange(0, 2).Draw(d.t, d.label("maxItems"))
	}
	return s
}

// TestSchemaReplyKeepsValidText: text that already is a valid instance is
// the answer, byte for byte; text that is not is replaced.
func TestSchemaReplyKeepsValidText(t *testing.T) {
	t.Parallel()
	schema := []byte(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`)
	for _, tc := range []struct{ text, want string }{
		{`{"n": 7}`, `{"n": 7}`},
		{`{"n": "7"}`, `{"n":0}`},
		{`Done.`, `{"n":0}`},
		{`{"n": 7} trailing`, `{"n":0}`},
	} {
		got, err := schemaReply(schema, tc.text)
		if err != nil || got != tc.want {
			t.Errorf("schemaReply(%q) = %q, %v; want %q", tc.text, got, err, tc.want)
		}
	}
}

// TestSchemaReplyShapes pins what the builder makes of the features it
// handles, in the schema's key order.
func TestSchemaReplyShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, schema, text, want string }{
		{"order and text", `{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"boolean"},"m":{"type":"string"}},"required":["z","a","m"],"additionalProperties":false}`, "Hi", `{"z":"Hi","a":true,"m":"text"}`},
		{"optional kept", `{"type":"object","properties":{"o":{"type":"integer","minimum":3}},"additionalProperties":false}`, "", `{"o":3}`},
		{"nullable", `{"type":["null","string"],"minLength":2}`, "", `"text"`},
		{"enum", `{"type":"string","enum":["red","green"]}`, "", `"red"`},
		{"exclusive bounds", `{"type":"number","exclusiveMinimum":1.5,"exclusiveMaximum":2}`, "", `1.75`},
		{"multiple", `{"type":"number","minimum":0.25,"multipleOf":0.1}`, "", `0.3`},
		{"integer below zero", `{"type":"integer","exclusiveMaximum":-3}`, "", `-4`},
		{"format", `{"type":"string","format":"uuid"}`, "", `"00000000-0000-4000-8000-000000000000"`},
		{"pattern", `{"type":"string","pattern":"^\\d{3}-[A-Z]+$"}`, "", `"000-A"`},
		{"array", `{"type":"array","items":{"type":"string","const":"k"},"minItems":2}`, "", `["k","k"]`},
		{"ref and defs", `{"$defs":{"P":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}},"$ref":"#/$defs/P"}`, "", `{"x":0}`},
		{"anyOf", `{"anyOf":[{"type":"integer","minimum":5},{"type":"string"}]}`, "", `5`},
		{"oneOf overlapping", `{"oneOf":[{"type":"number"},{"type":"integer"}]}`, "", `null`},
		{"hints kept", `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"units":{"type":"array","items":{"enum":["c","f"]}}},"required":["city","days","units"],"additionalProperties":false}`, `{"days":"3","city":"Paris","units":["f","k"]}`, `{"city":"Paris","days":0,"units":["f","c"]}`},
		{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"null"}},"required":["b"]}]}`, "", `{"a":"text","b":null}`},
	} {
		got, err := schemaReply([]byte(tc.schema), tc.text)
		if tc.name == "oneOf overlapping" {
			// Every integer is a number, so an integer matches both
			// branches; the fake finds no instance and says so.
			if err == nil || !strings.Contains(err.Error(), "'oneOf'") {
				t.Errorf("%s: got %s, %v; want an error naming oneOf", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: schemaReply = %s, %v; want %s", tc.name, got, err, tc.want)
		}
	}
}

// TestSchemaReplyRecursive: a recursive schema (a tree whose children are
// trees) ends, past the minimal depth, with the fewest items.
func TestSchemaReplyRecursive(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["name","children"],"additionalProperties":false}`
	got, err := schemaReply([]byte(schema), "root")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, `{"name":"root","children":[{"name":"text","children":[`) || !strings.Contains(got, `"children":[]`) {
		t.Fatalf("got %s", got)
	}
}

// TestSchemaReplyRefusals: schemas with no instance, or that reach
// outside the document, are refused with the path of the fault.
func TestSchemaReplyRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object"`, "not valid JSON"},
		{`{"type":"object","properties":{"a":{"type":"string","maxLength":1,"minLength":3}},"required":["a"]}`, "In context=('properties', 'a', 'maxLength'), maxLength 1 is below minLength 3"},
		{`{"type":"integer","minimum":1,"maximum":1.5,"multipleOf":2}`, "In context=(), no number lies within"},
		{`{"$ref":"file:///etc/passwd"}`, "only references inside the schema"},
		{`{"type":"object","properties":{"a":false},"required":["a"]}`, "In context=('properties', 'a'), schema false admits no value"},
		{`{"type":"object","properties":{"n":{"$ref":"#"}},"required":["n"]}`, "no instance shallower than"},
		{`{"type":"strin"}`, "invalid schema"},
	} {
		got, err := schemaReply([]byte(tc.schema), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("schemaReply(%s) = %s, %v; want an error containing %q", tc.schema, got, err, tc.want)
		}
	}
}
