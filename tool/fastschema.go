package tool

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// fastSchema is a compiled subset of JSON Schema that checks a tool call's
// raw input bytes without decoding them into maps, and without allocating.
// It exists because the general validator costs ~15 allocations per call
// (decode to map[string]any, then walk it), which dominated the loop's
// per-call overhead in BenchmarkTurnOneTool; built-in tool schemas use only
// this subset.
//
// It is only ever trusted to say yes: when it rejects an input (or meets
// anything outside the subset), Set.validate asks the full validator, which
// has the final word and writes the error message. So the one property that
// matters, tested against the full validator, is: accepts(x) implies the
// schema accepts x.
type fastSchema struct {
	types    typeSet
	props    []fastProp
	required uint64 // bit i: props[i] is required
	closed   bool   // additionalProperties: false
	items    *fastSchema
	enum     [][]byte // string enum values, as raw JSON string contents
	min, max *float64
	// minLen, maxLen bound a string's length in code points; -1 is unset.
	minLen, maxLen int
}

type fastProp struct {
	name string
	s    *fastSchema
}

type typeSet uint8

const (
	tObject typeSet = 1 << iota
	tArray
	tString
	tInteger
	tNumber
	tBoolean
	tNull
)

var typeNames = map[string]typeSet{"object": tObject, "array": tArray, "string": tString,
	"integer": tInteger, "number": tNumber, "boolean": tBoolean, "null": tNull}

// annotations are keywords that never affect validity.
var annotations = map[string]bool{"description": true, "title": true, "default": true, "examples": true,
	"$schema": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true}

// compileFast compiles raw into the subset, or reports false when the schema
// uses anything outside it (the full validator then handles every call).
func compileFast(raw json.RawMessage) (*fastSchema, bool) {
	var kw map[string]json.RawMessage
	if err := json.Unmarshal(raw, &kw); err != nil {
		return nil, false
	}
	s := &fastSchema{minLen: -1, maxLen: -1}
	var required []string
	for k, v := range kw {
		if !s.keyword(k, v, &required) {
			return nil, false
		}
	}
	if !s.require(required) {
		return nil, false
	}
	return s, true
}

// keyword compiles one keyword of a schema into s, one case per keyword
// of the subset; false: the keyword, or its value, is outside it.
// required is only collected: it names properties, which need all of
// them compiled first.
func (s *fastSchema) keyword(k string, v json.RawMessage, required *[]string) bool {
	var ok bool
	switch k {
	case "type":
		return s.compileType(v)
	case "properties":
		return s.compileProps(v)
	case "required":
		return json.Unmarshal(v, required) == nil
	case "additionalProperties":
		var b bool
		ok = json.Unmarshal(v, &b) == nil
		s.closed = !b
		return ok
	case "items":
		s.items, ok = compileFast(v)
		return ok
	case "enum":
		return s.compileEnum(v)
	case "minLength":
		return decodeLength(v, &s.minLen)
	case "maxLength":
		return decodeLength(v, &s.maxLen)
	case "minimum":
		s.min, ok = decodeNumber(v)
		return ok
	case "maximum":
		s.max, ok = decodeNumber(v)
		return ok
	}
	return annotations[k]
}

// compileType compiles "type", when it names one type.
func (s *fastSchema) compileType(v json.RawMessage) bool {
	var name string
	if json.Unmarshal(v, &name) != nil || typeNames[name] == 0 {
		return false
	}
	s.types = typeNames[name]
	return true
}

// compileProps compiles "properties", each property's schema in the
// subset too. At most 64: required is a bit set.
func (s *fastSchema) compileProps(v json.RawMessage) bool {
	var props map[string]json.RawMessage
	if json.Unmarshal(v, &props) != nil || len(props) > 64 {
		return false
	}
	for name, ps := range props {
		sub, ok := compileFast(ps)
		if !ok {
			return false
		}
		s.props = append(s.props, fastProp{name: name, s: sub})
	}
	return true
}

// compileEnum compiles an enum of strings, each kept as its JSON
// string's contents, as accepts meets them in the input.
func (s *fastSchema) compileEnum(v json.RawMessage) bool {
	var vals []string
	if json.Unmarshal(v, &vals) != nil {
		return false
	}
	for _, e := range vals {
		b, _ := json.Marshal(e)
		s.enum = append(s.enum, b[1:len(b)-1])
	}
	return true
}

// decodeLength reads minLength or maxLength into *dst.
func decodeLength(v json.RawMessage, dst *int) bool {
	var n int
	if json.Unmarshal(v, &n) != nil || n < 0 {
		return false
	}
	*dst = n
	return true
}

// decodeNumber reads minimum or maximum.
func decodeNumber(v json.RawMessage) (*float64, bool) {
	var f float64
	if json.Unmarshal(v, &f) != nil {
		return nil, false
	}
	return &f, true
}

// require marks the required properties, once all are compiled.
func (s *fastSchema) require(required []string) bool {
	for _, r := range required {
		i := s.prop(r)
		if i < 0 {
			return false // required but undeclared: leave it to the full validator
		}
		s.required |= 1 << i
	}
	return true
}

// fastTopLevel compiles a tool's input schema for the fast path, which
// only takes schemas that demand an object (tool inputs must be objects).
func fastTopLevel(raw json.RawMessage) *fastSchema {
	if len(raw) == 0 {
		return nil
	}
	fs, ok := compileFast(raw)
	if !ok || fs.types != tObject {
		return nil
	}
	return fs
}

func (s *fastSchema) prop(name string) int {
	for i := range s.props {
		if s.props[i].name == name {
			return i
		}
	}
	return -1
}

// accepts reports whether data is one JSON value, valid against s. False
// means "not sure", never "invalid".
func (s *fastSchema) accepts(data []byte) bool {
	sc := scanner{data: data}
	if !sc.value(s) {
		return false
	}
	sc.ws()
	return sc.pos == len(sc.data)
}

type scanner struct {
	data  []byte
	pos   int
	depth int
}

// maxDepth bounds nesting: the scanner recurses, and a goroutine stack
// overflow is fatal, not a panic that could be recovered. Deeper inputs go
// to the full validator, which rejects them cleanly.
const maxDepth = 1000

func (sc *scanner) ws() {
	for sc.pos < len(sc.data) {
		switch sc.data[sc.pos] {
		case ' ', '\t', '\n', '\r':
			sc.pos++
		default:
			return
		}
	}
}

// at skips white space and then c, if c is what comes next: the
// punctuation between an object's or an array's members and around them.
func (sc *scanner) at(c byte) bool {
	sc.ws()
	if sc.pos < len(sc.data) && sc.data[sc.pos] == c {
		sc.pos++
		return true
	}
	return false
}

// value scans one value and checks it against s (nil: anything goes).
func (sc *scanner) value(s *fastSchema) bool {
	if sc.depth++; sc.depth > maxDepth {
		return false
	}
	defer func() { sc.depth-- }()
	sc.ws()
	if sc.pos >= len(sc.data) {
		return false
	}
	var got typeSet
	switch c := sc.data[sc.pos]; {
	case c == '{':
		got = tObject
		if !sc.object(s) {
			return false
		}
	case c == '[':
		got = tArray
		if !sc.array(s) {
			return false
		}
	case c == '"':
		got = tString
		str, escaped, ok := sc.str()
		if !ok {
			return false
		}
		if s != nil && s.enum != nil && (escaped || !inEnum(s.enum, str)) {
			return false
		}
		if s != nil && (s.minLen >= 0 || s.maxLen >= 0) {
			n, ok := codePoints(str)
			if !ok || (s.minLen >= 0 && n < s.minLen) || (s.maxLen >= 0 && n > s.maxLen) {
				return false
			}
		}
	case c == 't':
		got = tBoolean
		if !sc.lit("true") {
			return false
		}
	case c == 'f':
		got = tBoolean
		if !sc.lit("false") {
			return false
		}
	case c == 'n':
		got = tNull
		if !sc.lit("null") {
			return false
		}
	default:
		start := sc.pos
		isInt, ok := sc.number()
		if !ok {
			return false
		}
		got = tNumber
		if isInt {
			got |= tInteger
		}
		if s != nil && (s.min != nil || s.max != nil) {
			f, err := strconv.ParseFloat(string(sc.data[start:sc.pos]), 64)
			if err != nil || (s.min != nil && f < *s.min) || (s.max != nil && f > *s.max) {
				return false
			}
		}
	}
	if s == nil {
		return true
	}
	if s.enum != nil && got != tString {
		return false
	}
	return s.types == 0 || got&s.types != 0
}

func inEnum(enum [][]byte, v []byte) bool {
	for _, e := range enum {
		if bytes.Equal(e, v) {
			return true
		}
	}
	return false
}

func (sc *scanner) object(s *fastSchema) bool {
	sc.pos++ // {
	var seen uint64
	if sc.at('}') {
		return s == nil || s.required == 0
	}
	for {
		sc.ws()
		if sc.pos >= len(sc.data) || sc.data[sc.pos] != '"' {
			return false
		}
		key, escaped, ok := sc.str()
		if !ok || escaped {
			return false // an escaped key might spell a declared name: not sure
		}
		if !sc.at(':') {
			return false
		}
		var sub *fastSchema
		if s != nil {
			i := s.propBytes(key)
			switch {
			case i >= 0:
				if seen&(1<<i) != 0 {
					return false // duplicate key: decoders keep the last; not sure
				}
				seen |= 1 << i
				sub = s.props[i].s
			case s.closed:
				return false
			}
		}
		if !sc.value(sub) {
			return false
		}
		if sc.at('}') {
			return s == nil || seen&s.required == s.required
		}
		if !sc.at(',') {
			return false
		}
	}
}

func (s *fastSchema) propBytes(name []byte) int {
	for i := range s.props {
		if s.props[i].name == string(name) { // no allocation: compiler-optimized comparison
			return i
		}
	}
	return -1
}

func (sc *scanner) array(s *fastSchema) bool {
	sc.pos++ // [
	var items *fastSchema
	if s != nil {
		items = s.items
	}
	if sc.at(']') {
		return true
	}
	for {
		if !sc.value(items) {
			return false
		}
		if sc.at(']') {
			return true
		}
		if !sc.at(',') {
			return false
		}
	}
}

// str scans a string and returns its raw contents (between the quotes).
func (sc *scanner) str() (raw []byte, escaped, ok bool) {
	sc.pos++ // "
	start := sc.pos
	for sc.pos < len(sc.data) {
		c := sc.data[sc.pos]
		switch {
		case c == '"':
			raw = sc.data[start:sc.pos]
			sc.pos++
			return raw, escaped, true
		case c == '\\':
			escaped = true
			if sc.pos+1 >= len(sc.data) {
				return nil, false, false
			}
			switch sc.data[sc.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				sc.pos += 2
			case 'u':
				if sc.pos+6 > len(sc.data) {
					return nil, false, false
				}
				for _, h := range sc.data[sc.pos+2 : sc.pos+6] {
					if !isHex(h) {
						return nil, false, false
					}
				}
				sc.pos += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			sc.pos++
		}
	}
	return nil, false, false
}

// codePoints counts the code points raw (a string's contents, still
// escaped) decodes to, as JSON Schema's length keywords do. A \u escape
// may be half of a surrogate pair, so strings with one are "not sure".
// Invalid UTF-8 counts a code point per bad byte, as the decoder turns each
// into U+FFFD.
func codePoints(raw []byte) (n int, ok bool) {
	for i := 0; i < len(raw); {
		if raw[i] == '\\' {
			if raw[i+1] == 'u' {
				return 0, false
			}
			i += 2
			n++
			continue
		}
		_, size := utf8.DecodeRune(raw[i:])
		i += size
		n++
	}
	return n, true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func (sc *scanner) lit(word string) bool {
	if len(sc.data)-sc.pos < len(word) || string(sc.data[sc.pos:sc.pos+len(word)]) != word {
		return false
	}
	sc.pos += len(word)
	return true
}

// number scans a JSON number's syntax. isInt means plain digits (no fraction or
// exponent), which is always a JSON Schema integer.
func (sc *scanner) number() (isInt, ok bool) {
	if sc.pos < len(sc.data) && sc.data[sc.pos] == '-' {
		sc.pos++
	}
	digits := func() int {
		n := 0
		for sc.pos < len(sc.data) && sc.data[sc.pos] >= '0' && sc.data[sc.pos] <= '9' {
			sc.pos++
			n++
		}
		return n
	}
	intStart := sc.pos
	n := digits()
	if n == 0 || (n > 1 && sc.data[intStart] == '0') {
		return false, false
	}
	isInt = true
	if sc.pos < len(sc.data) && sc.data[sc.pos] == '.' {
		sc.pos++
		if digits() == 0 {
			return false, false
		}
		isInt = false
	}
	if sc.pos < len(sc.data) && (sc.data[sc.pos] == 'e' || sc.data[sc.pos] == 'E') {
		sc.pos++
		if sc.pos < len(sc.data) && (sc.data[sc.pos] == '+' || sc.data[sc.pos] == '-') {
			sc.pos++
		}
		if digits() == 0 {
			return false, false
		}
		isInt = false
	}
	return isInt, true
}
