package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/deputy-run/deputy/llm"
)

// Structured outputs: the answer to a request that names a JSON schema
// (Chat Completions' response_format json_schema, the Responses API's
// text.format, the Messages API's output_format) is JSON valid against it,
// as the real APIs guarantee by constrained decoding. The fake cannot
// decode under a grammar, so it checks the scripted text and, when that is
// not a valid instance, builds one from the schema. Whatever it builds is
// validated against the schema before it is sent, so a schema feature the
// builder gets wrong shows up as an error, never as an invalid answer.

// schemaReply returns text when it is JSON valid against schema, and
// otherwise a deterministic JSON instance of schema. When text is JSON,
// its property values and items that are valid where they stand are kept
// (scripted tool arguments with one wrong field keep the others);
// otherwise the first plain string the instance holds is text itself, when
// it fits, so a scenario's words still reach the client. The error, a *schemaError, names the
// path of what made the schema unusable: not JSON, not a schema, a $ref
// that leaves the document, or constraints no value meets.
func schemaReply(schema []byte, text string) (string, error) {
	doc, err := parseOrdered(schema)
	if err != nil {
		return "", &schemaError{rule: "the schema is not valid JSON: " + err.Error()}
	}
	v, err := newSchemaValidator(schema)
	if err != nil {
		return "", err
	}
	if json.Valid([]byte(text)) && v.valid(v.root, []byte(text)) {
		return text, nil
	}
	g := &schemaGen{doc: doc, text: text, v: v}
	if hint, err := parseOrdered([]byte(text)); err == nil {
		// JSON that is not valid still guides the answer: its values
		// that are valid where they stand are kept, and its text is not
		// put into a string.
		g.hint, g.textUsed = hint, true
	}
	inst, err := g.gen(doc, nil, 0)
	if err != nil {
		return "", err
	}
	out := mustJSON(inst)
	if err := v.check(v.root, out); err != nil {
		return "", &schemaError{rule: "the fake cannot build an instance of this schema: " + err.Error()}
	}
	return string(out), nil
}

// schemaError is a schema the fake refuses, at path (schema keywords and
// property names from the root). It reads the way OpenAI reports an
// invalid schema, "In context=('properties', 'x'), ...": Python's tuple
// repr of the path, which the other wires can reuse or reword.
type schemaError struct {
	path []string
	rule string
	// noContext leaves the context out, for rules about the schema as a
	// whole (OpenAI's "schema must be a JSON Schema of 'type: "object"'").
	noContext bool
}

func (e *schemaError) Error() string {
	if e.noContext {
		return e.rule
	}
	return "In context=" + pyTuple(e.path) + ", " + e.rule
}

// pyTuple renders a path as Python's repr of a tuple of strings: () for
// none, ('a',) for one, ('a', 'b') for more.
func pyTuple(path []string) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, p := range path {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + strings.ReplaceAll(p, "'", `\'`) + "'")
	}
	if len(path) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}

// schemaValidator holds one compiled schema document.
type schemaValidator struct {
	c    *jsonschema.Compiler
	root *jsonschema.Schema
}

const schemaURL = "mem://request/schema.json"

// refuseLoader refuses every $ref outside the document: the schema comes
// from a request, and the compiler's default loader would read local
// files a "file://" reference names.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("only references inside the schema are supported, not %q", url)
}

func newSchemaValidator(schema []byte) (*schemaValidator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, &schemaError{rule: "the schema is not valid JSON: " + err.Error()}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, &schemaError{rule: "invalid schema: " + err.Error()}
	}
	root, err := c.Compile(schemaURL)
	if err != nil {
		return nil, &schemaError{rule: "invalid schema: " + err.Error()}
	}
	return &schemaValidator{c: c, root: root}, nil
}

// at compiles the subschema at a JSON pointer path of the document.
func (v *schemaValidator) at(path []string) (*jsonschema.Schema, error) {
	var b strings.Builder
	for _, p := range path {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	return v.c.Compile(schemaURL + "#" + b.String())
}

// check validates one JSON document against sch.
func (v *schemaValidator) check(sch *jsonschema.Schema, doc []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

func (v *schemaValidator) valid(sch *jsonschema.Schema, doc []byte) bool {
	return v.check(sch, doc) == nil
}

// orderedObject is a JSON object that keeps its keys' order: a schema's
// properties are answered in the order the schema lists them, as OpenAI's
// structured outputs do.
type orderedObject struct {
	keys []string
	vals map[string]any
}

func (o *orderedObject) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

func (o *orderedObject) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func newOrderedObject() *orderedObject { return &orderedObject{vals: map[string]any{}} }

func (o *orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// parseOrdered decodes one JSON value, objects as *orderedObject, numbers
// as json.Number.
func parseOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseOrderedValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the top-level value")
	}
	return v, nil
}

func parseOrderedValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := newOrderedObject()
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := parseOrderedValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(k.(string), v)
		}
		_, err = dec.Token()
		return o, err
	default: // '['
		arr := []any{}
		for dec.More() {
			v, err := parseOrderedValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err = dec.Token()
		return arr, err
	}
}

// Recursion limits: past schemaMinimalDepth the builder takes the smallest
// instance it can (no optional properties, the fewest items, null where
// allowed), so a recursive schema ends; past schemaMaxDepth it gives up.
const (
	schemaMinimalDepth = 4
	schemaMaxDepth     = 32
)

// schemaGen builds an instance of one schema document.
type schemaGen struct {
	doc      any
	text     string
	textUsed bool
	v        *schemaValidator
	// hint is the part of the scripted JSON at the instance being built
	// (nil if none): genObject and genArray set it for each child.
	hint any
}

// keep returns the hint for a child at path when it is valid against the
// child's schema there.
func (g *schemaGen) keep(hint any, path []string) (any, bool) {
	if hint == nil {
		return nil, false
	}
	sch, err := g.v.at(path)
	if err != nil || !g.v.valid(sch, mustJSON(hint)) {
		return nil, false
	}
	return hint, true
}

// gen builds an instance of the schema s found at path; depth is how deep
// in the instance it lands.
func (g *schemaGen) gen(s any, path []string, depth int) (any, error) {
	if depth > schemaMaxDepth {
		return nil, &schemaError{path: path, rule: fmt.Sprintf("the schema has no instance shallower than %d levels (a recursion every branch takes)", schemaMaxDepth)}
	}
	switch s := s.(type) {
	case bool:
		if !s {
			return nil, &schemaError{path: path, rule: "schema false admits no value"}
		}
		return g.plainString(-1, 0), nil
	case *orderedObject:
		return g.genObjectSchema(s, path, depth)
	}
	return nil, &schemaError{path: path, rule: "a schema must be an object or a boolean"}
}

func (g *schemaGen) genObjectSchema(s *orderedObject, path []string, depth int) (any, error) {
	if ref, ok := s.get("$ref"); ok {
		target, tpath, err := g.resolve(ref, path)
		if err != nil {
			return nil, err
		}
		return g.gen(target, tpath, depth)
	}
	if c, ok := s.get("const"); ok {
		return c, nil
	}
	if e, ok := s.get("enum"); ok {
		return g.genEnum(s, e, path)
	}
	if all, ok := s.get("allOf"); ok {
		merged, err := g.mergeAllOf(s, all, path)
		if err != nil {
			return nil, err
		}
		return g.gen(merged, path, depth)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if branches, ok := s.get(kw); ok {
			return g.genBranches(s, kw, branches, path, depth)
		}
	}
	var firstErr error
	for _, t := range g.types(s, depth) {
		v, err := g.genType(s, t, path, depth)
		if err == nil {
			return v, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// types lists the types to try, in order: the schema's own (null last,
// but first past the minimal depth, where it ends a recursion), or the
// one its keywords imply.
func (g *schemaGen) types(s *orderedObject, depth int) []string {
	var ts []string
	switch t, _ := s.get("type"); t := t.(type) {
	case string:
		ts = []string{t}
	case []any:
		for _, x := range t {
			if str, ok := x.(string); ok {
				ts = append(ts, str)
			}
		}
	}
	if len(ts) == 0 {
		switch {
		case has(s, "properties", "required", "additionalProperties"):
			return []string{"object"}
		case has(s, "items", "prefixItems", "minItems", "maxItems"):
			return []string{"array"}
		case has(s, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
			return []string{"number"}
		}
		return []string{"string"}
	}
	var out, null []string
	for _, t := range ts {
		if t == "null" {
			null = append(null, t)
		} else {
			out = append(out, t)
		}
	}
	if depth >= schemaMinimalDepth {
		return append(null, out...)
	}
	return append(out, null...)
}

func has(s *orderedObject, keys ...string) bool {
	for _, k := range keys {
		if _, ok := s.get(k); ok {
			return true
		}
	}
	return false
}

func (g *schemaGen) genType(s *orderedObject, t string, path []string, depth int) (any, error) {
	switch t {
	case "null":
		return nil, nil
	case "boolean":
		return true, nil
	case "string":
		return g.genString(s, path)
	case "number", "integer":
		return genNumber(s, t == "integer", path)
	case "array":
		return g.genArray(s, path, depth)
	case "object":
		return g.genObject(s, path, depth)
	}
	return nil, &schemaError{path: sub(path, "type"), rule: fmt.Sprintf("unknown type %q", t)}
}

// genEnum takes the first enum value the schema's type allows.
func (g *schemaGen) genEnum(s *orderedObject, e any, path []string) (any, error) {
	vals, _ := e.([]any)
	sch, err := g.v.at(path)
	if err != nil {
		return nil, &schemaError{path: path, rule: err.Error()}
	}
	for _, val := range vals {
		if g.v.valid(sch, mustJSON(val)) {
			return val, nil
		}
	}
	return nil, &schemaError{path: sub(path, "enum"), rule: "no enum value is valid against the rest of the schema"}
}

// genBranches builds from the first anyOf/oneOf branch whose instance the
// whole schema accepts (for oneOf, that no other branch also matches).
func (g *schemaGen) genBranches(s *orderedObject, kw string, branches any, path []string, depth int) (any, error) {
	list, _ := branches.([]any)
	sch, err := g.v.at(path)
	if err != nil {
		return nil, &schemaError{path: path, rule: err.Error()}
	}
	order := make([]int, len(list))
	for i := range order {
		order[i] = i
	}
	if depth >= schemaMinimalDepth {
		// Past the minimal depth a null branch comes first: it ends a
		// recursion the others may continue.
		for i, b := range list {
			if bo, ok := b.(*orderedObject); ok {
				if t, _ := bo.get("type"); t == "null" {
					order = append([]int{i}, append(order[:i:i], order[i+1:]...)...)
					break
				}
			}
		}
	}
	used := g.textUsed
	for _, i := range order {
		g.textUsed = used
		v, err := g.gen(list[i], sub(path, kw, strconv.Itoa(i)), depth)
		if err == nil && g.v.valid(sch, mustJSON(v)) {
			return v, nil
		}
	}
	return nil, &schemaError{path: sub(path, kw), rule: "no branch yields an instance the whole schema accepts"}
}

// resolve follows a $ref inside the document ("#", "#/$defs/x", any JSON
// pointer); the compiler has already refused anything else.
func (g *schemaGen) resolve(ref any, path []string) (any, []string, error) {
	r, _ := ref.(string)
	ptr, ok := strings.CutPrefix(r, "#")
	if !ok {
		return nil, nil, &schemaError{path: sub(path, "$ref"), rule: fmt.Sprintf("only references inside the schema (#/...) are supported, not %q", r)}
	}
	var cur any = g.doc
	var tpath []string
	if ptr != "" {
		for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
			tpath = append(tpath, seg)
			switch c := cur.(type) {
			case *orderedObject:
				cur, ok = c.get(seg)
			case []any:
				n, err := strconv.Atoi(seg)
				ok = err == nil && n >= 0 && n < len(c)
				if ok {
					cur = c[n]
				}
			default:
				ok = false
			}
			if !ok {
				return nil, nil, &schemaError{path: sub(path, "$ref"), rule: fmt.Sprintf("reference %q names nothing in the schema", r)}
			}
		}
	}
	return cur, tpath, nil
}

// mergeAllOf folds allOf's subschemas into one: properties and required
// are joined, any other keyword is taken from the first that has it.
func (g *schemaGen) mergeAllOf(s *orderedObject, all any, path []string) (*orderedObject, error) {
	merged := newOrderedObject()
	subs, _ := all.([]any)
	parts := []*orderedObject{s}
	for i, entry := range subs {
		for {
			so, ok := entry.(*orderedObject)
			if !ok {
				return nil, &schemaError{path: sub(path, "allOf", strconv.Itoa(i)), rule: "allOf entries must be schema objects"}
			}
			ref, isRef := so.get("$ref")
			if !isRef {
				parts = append(parts, so)
				break
			}
			target, _, err := g.resolve(ref, path)
			if err != nil {
				return nil, err
			}
			entry = target
		}
	}
	props := newOrderedObject()
	var required []any
	for _, p := range parts {
		for _, k := range p.keys {
			switch k {
			case "allOf":
			case "properties":
				if po, ok := p.vals[k].(*orderedObject); ok {
					for _, pk := range po.keys {
						props.set(pk, po.vals[pk])
					}
				}
			case "required":
				r, _ := p.vals[k].([]any)
				required = append(required, r...)
			default:
				if _, ok := merged.get(k); !ok {
					merged.set(k, p.vals[k])
				}
			}
		}
	}
	if len(props.keys) > 0 {
		merged.set("properties", props)
	}
	if len(required) > 0 {
		merged.set("required", required)
	}
	return merged, nil
}

// genObject builds an object: every required property, and the optional
// ones too above the minimal depth (one that cannot be built is left
// out), in the schema's order; required names with no property schema
// follow, built from additionalProperties.
func (g *schemaGen) genObject(s *orderedObject, path []string, depth int) (any, error) {
	out := newOrderedObject()
	required := map[string]bool{}
	var reqOrder []string
	if r, ok := s.get("required"); ok {
		list, _ := r.([]any)
		for _, x := range list {
			if name, ok := x.(string); ok && !required[name] {
				required[name] = true
				reqOrder = append(reqOrder, name)
			}
		}
	}
	pv, _ := s.get("properties")
	props, _ := pv.(*orderedObject)
	hints, _ := g.hint.(*orderedObject)
	defer func(h any) { g.hint = h }(g.hint)
	if props != nil {
		for _, k := range props.keys {
			hint, hinted := hints.get(k)
			ppath := sub(path, "properties", k)
			if v, ok := g.keep(hint, ppath); ok {
				out.set(k, v)
				continue
			}
			if !required[k] && (depth >= schemaMinimalDepth || hints != nil && !hinted) {
				continue
			}
			used := g.textUsed
			g.hint = hint
			v, err := g.gen(props.vals[k], ppath, depth+1)
			if err != nil {
				if required[k] {
					return nil, err
				}
				g.textUsed = used
				continue
			}
			out.set(k, v)
		}
	}
	for _, k := range reqOrder {
		if _, ok := out.get(k); ok {
			continue
		}
		var extra any = true
		if ap, ok := s.get("additionalProperties"); ok {
			extra = ap
		}
		v, err := g.gen(extra, sub(path, "additionalProperties"), depth+1)
		if err != nil {
			return nil, &schemaError{path: sub(path, "required"), rule: fmt.Sprintf("required property %q has no schema that admits a value", k)}
		}
		out.set(k, v)
	}
	return out, nil
}

// genArray builds minItems items (one, when none is required, above the
// minimal depth and room allows), from prefixItems then items.
func (g *schemaGen) genArray(s *orderedObject, path []string, depth int) (any, error) {
	minItems, _ := intKeyword(s, "minItems")
	maxItems, hasMax := intKeyword(s, "maxItems")
	if hasMax && maxItems < minItems {
		return nil, &schemaError{path: sub(path, "maxItems"), rule: fmt.Sprintf("maxItems %d is below minItems %d", maxItems, minItems)}
	}
	pi, _ := s.get("prefixItems")
	prefix, _ := pi.([]any)
	items, hasItems := s.get("items")
	if tuple, ok := items.([]any); ok { // drafts before 2020-12
		prefix, items, hasItems = tuple, nil, false
		if ai, ok := s.get("additionalItems"); ok {
			items, hasItems = ai, true
		}
	}
	n := minItems
	if n == 0 && depth < schemaMinimalDepth && (!hasMax || maxItems > 0) && (hasItems || len(prefix) > 0) && items != false {
		n = 1
	}
	hints, _ := g.hint.([]any)
	defer func(h any) { g.hint = h }(g.hint)
	if len(hints) > n && (!hasMax || len(hints) <= maxItems) {
		n = len(hints)
	}
	out := make([]any, 0, n)
	for i := 0; i < n; i++ {
		var itemSchema any = true
		itemPath := sub(path, "items")
		switch {
		case i < len(prefix):
			itemSchema, itemPath = prefix[i], sub(path, "prefixItems", strconv.Itoa(i))
		case hasItems:
			itemSchema = items
		}
		g.hint = nil
		if i < len(hints) {
			if v, ok := g.keep(hints[i], itemPath); ok {
				out = append(out, v)
				continue
			}
			g.hint = hints[i]
		}
		v, err := g.gen(itemSchema, itemPath, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// intKeyword reads a non-negative integer keyword.
func intKeyword(s *orderedObject, k string) (int, bool) {
	v, ok := s.get(k)
	if !ok {
		return 0, false
	}
	n, _ := v.(json.Number)
	i, err := strconv.Atoi(n.String())
	if err != nil {
		// 2.0 is an integer too.
		f, ferr := n.Float64()
		if ferr != nil {
			return 0, false
		}
		i = int(f)
	}
	return max(i, 0), true
}

// genString builds a string: a sample of its format, a string its
// pattern matches, or plain text between minLength and maxLength.
func (g *schemaGen) genString(s *orderedObject, path []string) (any, error) {
	minLen, _ := intKeyword(s, "minLength")
	maxLen, hasMax := intKeyword(s, "maxLength")
	if !hasMax {
		maxLen = -1
	} else if maxLen < minLen {
		return nil, &schemaError{path: sub(path, "maxLength"), rule: fmt.Sprintf("maxLength %d is below minLength %d", maxLen, minLen)}
	}
	if f, ok := s.get("format"); ok {
		if sample, ok := formatSamples[fmt.Sprint(f)]; ok {
			return sample, nil
		}
	}
	if p, ok := s.get("pattern"); ok {
		str, err := patternSample(fmt.Sprint(p))
		if err != nil {
			return nil, &schemaError{path: sub(path, "pattern"), rule: err.Error()}
		}
		for n := utf8.RuneCountInString(str); n < minLen; n++ {
			str += "x"
		}
		return str, nil
	}
	return g.plainString(maxLen, minLen), nil
}

// plainString is the request's text the first time it fits, "text"
// otherwise, padded to minLen and cut to maxLen (-1: no limit) runes.
func (g *schemaGen) plainString(maxLen, minLen int) string {
	str := "text"
	if !g.textUsed && g.text != "" && (maxLen < 0 || utf8.RuneCountInString(g.text) <= maxLen) {
		str, g.textUsed = g.text, true
	}
	for n := utf8.RuneCountInString(str); n < minLen; n++ {
		str += "x"
	}
	if maxLen >= 0 && utf8.RuneCountInString(str) > maxLen {
		str = string([]rune(str)[:maxLen])
	}
	return str
}

// sub is path extended by elems, never sharing path's backing array.
func sub(path []string, elems ...string) []string {
	out := make([]string, 0, len(path)+len(elems))
	return append(append(out, path...), elems...)
}

// answerBySchema is structured outputs, the one shaper every wire calls
// (Messages' output_format, Chat's response_format, Responses'
// text.format): it replaces the text blocks by one holding schemaReply's
// answer, where the first was, or after the rest when there was none and no
// tool call either (a turn that only calls tools has no message to shape;
// one that only thinks still answers, after its thinking, unless
// max_tokens ended it first). A refusal
// stays as the model said it: the APIs do not hold a refusal to the
// schema. An answer cut by max_tokens is cut as long as the text was, so
// it stops mid-JSON as a real one does. Output tokens are counted again
// when the fake estimated them.
func (g *generation) answerBySchema(schema []byte) error {
	if g.stop == llm.StopRefusal {
		return nil
	}
	var text strings.Builder
	at, calls := -1, 0
	kept := g.content[:0:0]
	for _, b := range g.content {
		switch b.Type {
		case llm.TypeText:
			if at < 0 {
				at = len(kept)
				kept = append(kept, b)
			}
			text.WriteString(b.Text)
			continue
		case llm.TypeToolUse:
			calls++
		}
		kept = append(kept, b)
	}
	if at < 0 && (calls > 0 || g.stop == llm.StopMaxTokens) {
		// Only tool calls, or max_tokens reached before any text.
		return nil
	}
	out, err := schemaReply(schema, text.String())
	if err != nil {
		return err
	}
	if g.stop == llm.StopMaxTokens && len(out) > text.Len() {
		n := text.Len()
		for n > 0 && !utf8.RuneStart(out[n]) {
			n--
		}
		out = out[:n]
	}
	if at < 0 {
		at, kept = len(kept), append(kept, llm.Block{})
	}
	kept[at] = llm.Text(out)
	g.content = kept
	g.reestimate()
	return nil
}

// reestimate counts output tokens again after the content was shaped,
// unless the Responder pinned usage (then its figures stand).
func (g *generation) reestimate() {
	if g.plan != nil {
		g.output = llm.EstimateOutput(g.content)
	}
}
