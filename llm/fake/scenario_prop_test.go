package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func TestPropLoremLength(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 3*len(loremBase)).Draw(t, "n")
		s, err := ParseScenario([]byte(fmt.Sprintf("default:\n  text: \"{{lorem %d}}\"\n", n)), "p.yaml")
		if err != nil {
			t.Fatal(err)
		}
		r := s.Respond(atTurn("x", 1), RequestInfo{N: 1})
		got := ""
		if len(r.Content) == 1 {
			got = r.Content[0].Text
		}
		if c := utf8.RuneCountInString(got); c != n {
			t.Fatalf("lorem %d rendered %d characters", n, c)
		}
	})
}

func TestPropJSONStringRoundTrip(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		if rapid.Bool().Draw(t, "raw bytes") {
			s = string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes"))
		}
		enc := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", s, enc, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("%q round-trips to %q", s, back)
		}
		// encoding/json agrees, byte for byte, apart from HTML escaping.
		var want bytes.Buffer
		e := json.NewEncoder(&want)
		e.SetEscapeHTML(false)
		_ = e.Encode(s)
		if utf8.ValidString(s) && string(enc) != strings.TrimSuffix(want.String(), "\n") {
			t.Fatalf("%q: %s, encoding/json says %s", s, enc, want.String())
		}
	})
}

// value is a generated tool-input value and the JSON it must become.
type value struct {
	yaml string // a YAML flow-style rendering
	want any    // what decoding the produced JSON must give
}

func genValue(depth int) *rapid.Generator[value] {
	return rapid.Custom(func(t *rapid.T) value {
		kind := rapid.IntRange(0, 5).Draw(t, "kind")
		if depth >= 3 {
			kind %= 3
		}
		switch kind {
		case 0:
			s := strings.ReplaceAll(rapid.String().Draw(t, "str"), "{{", "{ {")
			return value{yaml: yamlQuote(s), want: s}
		case 1:
			i := rapid.Int64().Draw(t, "int")
			return value{yaml: strconv.FormatInt(i, 10), want: json.Number(strconv.FormatInt(i, 10))}
		case 2:
			b := rapid.Bool().Draw(t, "bool")
			return value{yaml: strconv.FormatBool(b), want: b}
		case 3:
			n := rapid.IntRange(0, 4).Draw(t, "len")
			var ys []string
			var ws []any
			for range n {
				v := genValue(depth+1).Draw(t, "item")
				ys, ws = append(ys, v.yaml), append(ws, v.want)
			}
			if ws == nil {
				ws = []any{}
			}
			return value{yaml: "[" + strings.Join(ys, ", ") + "]", want: ws}
		default:
			obj := genObject(depth+1).Draw(t, "obj")
			return value{yaml: obj.yaml, want: obj.want}
		}
	})
}

// object is an ordered JSON object: keys in order, then values.
type object struct {
	keys []string
	vals []any
}

func genObject(depth int) *rapid.Generator[value] {
	return rapid.Custom(func(t *rapid.T) value {
		keys := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-zA-Z_][a-zA-Z0-9_ -]{0,8}`), 0, 5, func(s string) string { return s }).Draw(t, "keys")
		var parts []string
		o := object{}
		for _, k := range keys {
			v := genValue(depth).Draw(t, "v")
			parts = append(parts, yamlQuote(k)+": "+v.yaml)
			o.keys, o.vals = append(o.keys, k), append(o.vals, v.want)
		}
		return value{yaml: "{" + strings.Join(parts, ", ") + "}", want: o}
	})
}

// decodeOrdered decodes JSON keeping object key order, to compare with the
// generated object.
func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := object{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			o.keys, o.vals = append(o.keys, k.(string)), append(o.vals, v)
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		out := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		_, err := dec.Token()
		return out, err
	}
	return tok, nil
}

func TestPropToolInputsAreOrderedJSONObjects(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		obj := genObject(0).Draw(t, "input")
		src := "rules:\n  - tool_calls:\n      - name: tool\n        input: " + obj.yaml + "\n"
		s, err := ParseScenario([]byte(src), "p.yaml")
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		input := s.Respond(atTurn("x", 1), RequestInfo{N: 1}).Content[0].Input
		if !json.Valid(input) || input[0] != '{' {
			t.Fatalf("not a JSON object: %s", input)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, input); err != nil || !bytes.Equal(compact.Bytes(), input) {
			t.Fatalf("not compact: %s", input)
		}
		dec := json.NewDecoder(bytes.NewReader(input))
		dec.UseNumber()
		got, err := decodeOrdered(dec)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := fmt.Sprintf("%#v", got), fmt.Sprintf("%#v", obj.want); g != w {
			t.Fatalf("input %s\ndecodes to %s\nwant       %s\nfrom %s", input, g, w, obj.yaml)
		}
	})
}

// FuzzParseScenario feeds arbitrary bytes to the parser: it must return a
// scenario or an error, never panic, and a scenario it returns must answer
// with valid tool inputs.
func FuzzParseScenario(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/scenarios/*.yaml")
	seeds = append(seeds, "scenarios/demo.yaml")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("rules:\n  - text: *a\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("rules: [{tool_calls: [{name: x, input: {<<: {a: 1}, b: !!str 2}}]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseScenario(data, "fuzz.yaml")
		if err != nil {
			if s != nil {
				t.Fatal("a scenario and an error")
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error without the file name: %v", err)
			}
			return
		}
		if s == nil {
			t.Fatal("no scenario and no error")
		}
		for turn := 1; turn <= 3; turn++ {
			req := atTurn("fuzz task", turn)
			req.Tools = tools("glob", "bash", "read_file", "write_file", "edit_file", "spawn_subagent")
			r := s.Respond(req, RequestInfo{Provider: Anthropic, N: turn})
			for _, b := range r.Content {
				if b.Input != nil && (!json.Valid(b.Input) || b.Input[0] != '{') {
					t.Fatalf("tool input is not a JSON object: %s", b.Input)
				}
				if b.Raw != nil && !json.Valid(b.Raw) {
					t.Fatalf("invalid raw block %s", b.Raw)
				}
			}
		}
	})
}
