package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// decodeStrict decodes one JSON object into v, refusing fields v does not
// declare and anything after the object. It returns a wire-neutral
// description of what was wrong, which each wire words its own way.
func decodeStrict(body []byte, v any) *decodeProblem {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		p := classifyDecodeErr(body, err)
		if p.unknown != "" {
			// encoding/json names the field alone; the APIs give its path.
			if path := unknownField(body, reflect.TypeOf(v)); path != nil {
				p.unknown = path.dotted()
			}
		}
		return p
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		off := int(dec.InputOffset())
		return &decodeProblem{syntax: "unexpected data after the top-level value", offset: off, body: body}
	}
	return nil
}

// decodeProblem is why a body did not decode.
type decodeProblem struct {
	// syntax is set when the body is not JSON at all; offset is where.
	syntax string
	offset int
	body   []byte
	// unknown is the dotted path (unknownField) of the first undeclared
	// field in document order.
	unknown string
	// field and want describe a value of the wrong JSON type.
	field, want string
	// other is any other failure.
	other string
}

func classifyDecodeErr(body []byte, err error) *decodeProblem {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the offending byte; the API reports its index.
		return &decodeProblem{syntax: strings.TrimPrefix(se.Error(), "json: "), offset: max(int(se.Offset)-1, 0), body: body}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &decodeProblem{syntax: "unexpected end of input", offset: len(body), body: body}
	case errors.As(err, &te):
		return &decodeProblem{field: te.Field, want: jsonKind(te.Type.Kind().String())}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &decodeProblem{unknown: strings.Trim(name, `"`)}
	}
	return &decodeProblem{other: err.Error()}
}

// jsonKind names a Go kind the way a JSON schema validator would.
func jsonKind(k string) string {
	switch k {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "integer"
	case "float32", "float64":
		return "number"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "list"
	case "struct", "map":
		return "dictionary"
	}
	return k
}

// position renders a byte offset as "line L column C (char N)", the way
// the Messages API reports JSON errors: N is the 0-based index of the
// offending character (the length, at the end of input), C is 1-based.
func (p *decodeProblem) position() string {
	off := min(max(p.offset, 0), len(p.body))
	line, col := 1, 1
	for _, c := range p.body[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d column %d (char %d)", line, col, off)
}

// isNull reports whether a raw value is absent or JSON null, which the
// APIs treat alike for optional fields.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// at places the problem under path, the dotted location of the value that
// was decoded (messages.1): encoding/json names an unknown field by its own
// name only, and a field of the wrong type from the decoded value down, so
// a value decoded on its own would otherwise lose where it sits.
func (p *decodeProblem) at(path string) *decodeProblem {
	if path == "" || p.syntax != "" {
		return p
	}
	q := *p
	switch {
	case q.unknown != "":
		q.unknown = path + "." + q.unknown
	case q.want != "" && q.field == "":
		q.field = path
	case q.want != "":
		q.field = path + "." + q.field
	}
	return &q
}
