package fake

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Unknown fields. The APIs name an undeclared field by its full path:
// Messages as "messages.1.content.0.foo: Extra inputs are not permitted",
// Responses as "Unknown parameter: 'input.0.foo'.", Chat Completions as
// "Unknown parameter: 'messages[1].content[0].cache_control'." (param that
// path, code unknown_parameter; the bodies clients report, e.g.
// pydantic-ai's "Unknown parameter: 'messages[1].content[1].file.data'.")
// or, at the top, "Unrecognized request argument supplied: x". encoding/json
// names only the field, so the path is found again, on the error path
// only, by one finder (unknownField) walking the body in document order
// alongside the Go type that declares what is accepted; each wire formats
// the path its way (dotted, bracketed).

// pathStep is one step of a field path: an array index when index >= 0,
// otherwise an object key (which may be "").
type pathStep struct {
	key   string
	index int
}

// fieldPath is where a value sits in a JSON document.
type fieldPath []pathStep

// dotted renders the path as the Messages and Responses APIs do: every
// step joined by "." (input.0.content.1.foo).
func (p fieldPath) dotted() string {
	var b strings.Builder
	for i, s := range p {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// bracketed renders the path as Chat Completions does: keys joined by
// ".", indices as "[i]" (messages[1].content[0].foo).
func (p fieldPath) bracketed() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.index >= 0:
			b.WriteString("[" + s.String() + "]")
		case i > 0:
			b.WriteString("." + s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}

func (s pathStep) String() string {
	if s.index >= 0 {
		return strconv.Itoa(s.index)
	}
	return s.key
}

// unknownField returns the path of the first key, in document order, that
// t does not declare (nil if none).
func unknownField(body []byte, t reflect.Type) fieldPath {
	dec := json.NewDecoder(bytes.NewReader(body))
	p, _ := walkUnknown(dec, t, nil)
	return p
}

// unknownParamPath is unknownField in Chat Completions' notation ("" if
// none).
func unknownParamPath(body []byte, t reflect.Type) string {
	return unknownField(body, t).bracketed()
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func walkUnknown(dec *json.Decoder, t reflect.Type, path fieldPath) (fieldPath, error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType || t.Kind() == reflect.Interface {
		var skip json.RawMessage
		return nil, dec.Decode(&skip)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := k.(string)
			child := append(path[:len(path):len(path)], pathStep{key: key, index: -1})
			var ft reflect.Type
			switch t.Kind() {
			case reflect.Struct:
				var ok bool
				if ft, ok = fields[key]; !ok {
					return child, nil
				}
			case reflect.Map:
				ft = t.Elem()
			}
			if p, err := walkUnknown(dec, ft, child); p != nil || err != nil {
				return p, err
			}
		}
	case json.Delim('['):
		var elem reflect.Type
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			child := append(path[:len(path):len(path)], pathStep{index: i})
			if p, err := walkUnknown(dec, elem, child); p != nil || err != nil {
				return p, err
			}
		}
	default:
		return nil, nil
	}
	_, err = dec.Token() // the closing delimiter
	return nil, err
}

var jsonFieldsCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps a struct's JSON keys to their field types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := jsonFieldsCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	jsonFieldsCache.Store(t, m)
	return m
}

// oaiUnknownParam words an unknown field found at path.
func oaiUnknownParam(path string) *wireError {
	if !strings.ContainsAny(path, ".[") {
		return oaiInvalid("", "", "Unrecognized request argument supplied: %s", path)
	}
	return oaiInvalid(path, "unknown_parameter", "Unknown parameter: '%s'.", path)
}
