package fake

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Unknown parameters. OpenAI refuses an undeclared top-level field as
// "Unrecognized request argument supplied: x" (param null), and one inside
// the body as "Unknown parameter: 'messages[1].content[0].cache_control'."
// with that path as param and code unknown_parameter (the bodies clients
// report, e.g. pydantic-ai's "Unknown parameter:
// 'messages[1].content[1].file.data'."). encoding/json names only the
// field, so the path is found again, on the error path only, by walking
// the body alongside the Go type that declares what is accepted.

// unknownParamPath returns the path of the first key, in document order,
// that t does not declare ("" if none), in the API's notation: object keys
// joined by ".", array indices as "[i]".
func unknownParamPath(body []byte, t reflect.Type) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	p, _ := walkUnknown(dec, t, "")
	return p
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func walkUnknown(dec *json.Decoder, t reflect.Type, path string) (string, error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType || t.Kind() == reflect.Interface {
		var skip json.RawMessage
		return "", dec.Decode(&skip)
	}
	tok, err := dec.Token()
	if err != nil {
		return "", err
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
				return "", err
			}
			key, _ := k.(string)
			child := joinParam(path, key)
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
			if p, err := walkUnknown(dec, ft, child); p != "" || err != nil {
				return p, err
			}
		}
	case json.Delim('['):
		var elem reflect.Type
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if p, err := walkUnknown(dec, elem, path+"["+strconv.Itoa(i)+"]"); p != "" || err != nil {
				return p, err
			}
		}
	default:
		return "", nil
	}
	_, err = dec.Token() // the closing delimiter
	return "", err
}

func joinParam(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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
