package tool

import (
	"bytes"
	"encoding/json"
	"strings"

	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"
)

// readFileSchema has the shape of the built-in tools' schemas.
const readFileSchema = `{"type":"object","properties":{"path":{"type":"string","description":"file"},
"offset":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1,"maximum":2000},
"mode":{"type":"string","enum":["text","hex"]},"tags":{"type":"array","items":{"type":"string"}}},
"required":["path"],"additionalProperties":false}`

func referenceAccepts(t interface{ Fatalf(string, ...any) }, schema string, input []byte) bool {
	sch, err := compileSchema("t", json.RawMessage(schema))
	if err != nil {
		t.Fatalf("reference compile: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return false
	}
	return sch.Validate(v) == nil
}

func TestFastSchemaAcceptsTypicalInputs(t *testing.T) {
	t.Parallel()
	fs, ok := compileFast(json.RawMessage(readFileSchema))
	if !ok {
		t.Fatal("the built-in shaped schema is outside the fast subset")
	}
	valid := []string{`{"path":"a.go"}`, ` { "path" : "dir/é.txt" , "offset": 3, "limit": 2000 } `,
		`{"path":"x","mode":"hex","tags":["a","b"]}`, `{"path":"q\"uote\\u00e9"}`}
	for _, in := range valid {
		if !fs.accepts([]byte(in)) {
			t.Errorf("fast path refused valid %s", in)
		}
		if !referenceAccepts(t, readFileSchema, []byte(in)) {
			t.Errorf("reference refused %s", in)
		}
	}
	invalid := []string{`{}`, `{"path":1}`, `{"path":"a","extra":1}`, `{"path":"a","offset":0}`,
		`{"path":"a","limit":2001}`, `{"path":"a","offset":1.5}`, `{"path":"a","mode":"bin"}`,
		`{"path":"a","tags":[1]}`, `{"path":"a"`, `{"path":"a"} x`, `[]`, `"path"`, `{"path":"a",}`,
		`{"path":"a\x01"}`, `{"path":"a","offset":01}`}
	for _, in := range invalid {
		if fs.accepts([]byte(in)) {
			t.Errorf("fast path accepted invalid %s", in)
		}
		if referenceAccepts(t, readFileSchema, []byte(in)) && in != `{"path":"a","offset":01}` {
			t.Errorf("reference accepted invalid %s", in)
		}
	}
}

func TestFastSchemaDeepNestingIsNotSure(t *testing.T) {
	t.Parallel()
	fs, _ := compileFast(json.RawMessage(readFileSchema))
	deep := []byte(`{"path":"a","tags":` + strings.Repeat("[", 5_000_000))
	if fs.accepts(deep) {
		t.Fatal("accepted")
	}
	ok := []byte(`{"path":"a","x":` + strings.Repeat("[", 50) + strings.Repeat("]", 50) + `}`)
	open, _ := compileFast(json.RawMessage(`{"type":"object"}`))
	if !open.accepts(ok) {
		t.Fatal("refused moderate nesting")
	}
}

func TestFastSchemaLeavesUnknownKeywordsToTheFullValidator(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{"type":"object","patternProperties":{}}`, `{"type":["string","null"]}`,
		`{"oneOf":[]}`, `{"type":"object","required":["ghost"]}`, `{"type":"string","maxLength":-1}`} {
		if _, ok := compileFast(json.RawMessage(s)); ok {
			t.Errorf("compiled %s into the fast subset", s)
		}
	}
}

var names = []string{"a", "b", "path", "é"}

func genSchema(t *rapid.T, depth int) map[string]any {
	s := map[string]any{}
	typ := rapid.SampledFrom([]string{"", "object", "array", "string", "integer", "number", "boolean", "null"}).Draw(t, "type")
	if typ != "" {
		s["type"] = typ
	}
	switch typ {
	case "object":
		props := map[string]any{}
		var req []string
		for _, n := range names {
			if depth > 0 && rapid.Bool().Draw(t, "has") {
				props[n] = genSchema(t, depth-1)
				if rapid.Bool().Draw(t, "req") {
					req = append(req, n)
				}
			}
		}
		s["properties"] = props
		if len(req) > 0 {
			s["required"] = req
		}
		if rapid.Bool().Draw(t, "closed") {
			s["additionalProperties"] = false
		}
	case "array":
		if depth > 0 && rapid.Bool().Draw(t, "items") {
			s["items"] = genSchema(t, depth-1)
		}
	case "string":
		if rapid.Bool().Draw(t, "enum") {
			s["enum"] = []string{"x", "é", `q"`}
		}
		if rapid.Bool().Draw(t, "minLen") {
			s["minLength"] = rapid.IntRange(0, 3).Draw(t, "minLenV")
		}
		if rapid.Bool().Draw(t, "maxLen") {
			s["maxLength"] = rapid.IntRange(0, 3).Draw(t, "maxLenV")
		}
	case "integer", "number":
		if rapid.Bool().Draw(t, "min") {
			s["minimum"] = rapid.IntRange(-3, 3).Draw(t, "minv")
		}
		if rapid.Bool().Draw(t, "max") {
			s["maximum"] = rapid.IntRange(-3, 3).Draw(t, "maxv")
		}
	}
	return s
}

func genValue(t *rapid.T, depth int) any {
	switch k := rapid.IntRange(0, 7).Draw(t, "kind"); {
	case k == 0 && depth > 0:
		m := map[string]any{}
		for _, n := range names {
			if rapid.Bool().Draw(t, "key") {
				m[n] = genValue(t, depth-1)
			}
		}
		return m
	case k == 1 && depth > 0:
		var a []any
		for range rapid.IntRange(0, 3).Draw(t, "len") {
			a = append(a, genValue(t, depth-1))
		}
		return a
	case k == 2:
		return rapid.SampledFrom([]string{"x", "é", `q"`, "", "\u2028", "a\nb", "\t", "héé"}).Draw(t, "str")
	case k == 3:
		return rapid.IntRange(-5, 5).Draw(t, "int")
	case k == 4:
		return rapid.SampledFrom([]float64{0.5, -2.25, 1e3, 3}).Draw(t, "float")
	case k == 5:
		return rapid.Bool().Draw(t, "bool")
	default:
		return nil
	}
}

// TestFastSchemaNeverAcceptsWhatTheReferenceRejects is the property the fast
// path rests on, over random schemas of its subset and random values.
func TestFastSchemaNeverAcceptsWhatTheReferenceRejects(t *testing.T) {
	t.Parallel()
	accepted := 0
	rapid.Check(t, func(t *rapid.T) {
		schema := genSchema(t, 2)
		raw, _ := json.Marshal(schema)
		fs, ok := compileFast(raw)
		if !ok {
			t.Fatalf("generated schema outside the subset: %s", raw)
		}
		in, _ := json.Marshal(genValue(t, 2))
		if rapid.Bool().Draw(t, "spaces") {
			in = bytes.ReplaceAll(in, []byte(","), []byte(" ,\n "))
		}
		if fs.accepts(in) {
			accepted++
			if !referenceAccepts(t, string(raw), in) {
				t.Fatalf("fast path accepted %s against %s; the reference rejects it", in, raw)
			}
		}
	})
	if accepted == 0 {
		t.Fatal("the fast path accepted nothing: the property was vacuous")
	}
}

func FuzzFastSchema(f *testing.F) {
	for _, s := range []string{`{"path":"a.go"}`, `{"path":"x","offset":3,"tags":["a"]}`, `{"path":"\u00e9\n"}`, `{`, `{"path":1e5}`} {
		f.Add([]byte(s))
	}
	fs, ok := compileFast(json.RawMessage(readFileSchema))
	if !ok {
		f.Fatal("schema outside subset")
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if fs.accepts(in) && !referenceAccepts(t, readFileSchema, in) {
			t.Fatalf("fast path accepted %q; the reference rejects it", in)
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	in := []byte(`{"path":"internal/server/handler.go","offset":120,"limit":80}`)
	sch, err := compileSchema("t", json.RawMessage(readFileSchema))
	if err != nil {
		b.Fatal(err)
	}
	fs, _ := compileFast(json.RawMessage(readFileSchema))
	full := &Set{schemas: []*jsonschemaSchema{sch}}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !fs.accepts(in) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := full.validateFull(0, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
