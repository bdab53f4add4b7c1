package fake

import (
	"fmt"
	"strconv"
	"strings"
)

// OpenAI's strict mode: a json_schema response format or a function tool
// with strict: true is compiled into a grammar, and only a subset of JSON
// Schema compiles. The rules, and the refusals' wording, come from
// OpenAI's structured-outputs guide ("Supported schemas"), the error
// bodies clients report from the API ("Invalid schema for
// response_format 'x': In context=('properties', 'y'), 'additionalProperties'
// is required to be supplied and to be false.", "... 'oneOf' is not
// permitted.", "... 'uri' is not a valid format."), and the keyword list
// openai-node 6.49.0's lib/transform.js refuses before it sends a strict
// schema.

// strictUnsupported are the keywords a strict schema may not use.
var strictUnsupported = map[string]bool{
	"$anchor": true, "$dynamicAnchor": true, "$dynamicRef": true, "$recursiveAnchor": true, "$recursiveRef": true,
	"allOf": true, "oneOf": true, "not": true, "if": true, "then": true, "else": true,
	"contains": true, "minContains": true, "maxContains": true, "uniqueItems": true, "prefixItems": true,
	"unevaluatedItems": true, "unevaluatedProperties": true, "additionalItems": true,
	"contentEncoding": true, "contentMediaType": true, "contentSchema": true,
	"dependentRequired": true, "dependentSchemas": true, "dependencies": true,
	"minProperties": true, "maxProperties": true, "patternProperties": true, "propertyNames": true,
}

// strictFormats are the string formats a strict schema may name.
var strictFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true, "email": true,
	"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
}

// Size limits of a strict schema, from the same guide.
const (
	strictMaxDepth      = 10
	strictMaxProperties = 5000
	strictMaxEnumValues = 1000
)

// checkStrictSchema reports the first rule of strict mode schema breaks,
// as a *schemaError whose path is the API's context; nil if it has none.
func checkStrictSchema(schema []byte) error {
	doc, err := parseOrdered(schema)
	if err != nil {
		return &schemaError{rule: "the schema is not valid JSON: " + err.Error(), noContext: true}
	}
	root, ok := doc.(*orderedObject)
	if !ok {
		return &schemaError{rule: "schema must be a JSON Schema of 'type: \"object\"', got '" + string(mustJSON(doc)) + "'.", noContext: true}
	}
	if t, _ := root.get("type"); t != "object" {
		got := "None"
		if t != nil {
			got = fmt.Sprint(t)
		}
		return &schemaError{rule: fmt.Sprintf("schema must be a JSON Schema of 'type: \"object\"', got 'type: \"%s\"'.", got), noContext: true}
	}
	c := &strictChecker{}
	if err := c.node(root, nil, 0); err != nil {
		return err
	}
	for _, defs := range []string{"$defs", "definitions"} {
		d, _ := root.get(defs)
		if do, ok := d.(*orderedObject); ok {
			for _, name := range do.keys {
				if err := c.node(do.vals[name], []string{defs, name}, 1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// strictChecker walks one schema, counting what the size limits count.
type strictChecker struct {
	properties, enumValues int
}

func (c *strictChecker) node(v any, path []string, depth int) error {
	s, ok := v.(*orderedObject)
	if !ok {
		return &schemaError{path: path, rule: "schema must be a JSON Schema object, not " + string(mustJSON(v)) + "."}
	}
	if depth > strictMaxDepth {
		return &schemaError{path: path, rule: fmt.Sprintf("the schema nests deeper than %d levels, the most strict mode allows.", strictMaxDepth)}
	}
	for _, k := range s.keys {
		if strictUnsupported[k] {
			return &schemaError{path: path, rule: fmt.Sprintf("'%s' is not permitted.", k)}
		}
	}
	if f, ok := s.get("format"); ok && !strictFormats[fmt.Sprint(f)] {
		return &schemaError{path: path, rule: fmt.Sprintf("'%v' is not a valid format.", f)}
	}
	if e, ok := s.get("enum"); ok {
		list, _ := e.([]any)
		if c.enumValues += len(list); c.enumValues > strictMaxEnumValues {
			return &schemaError{path: path, rule: fmt.Sprintf("the schema has more than %d enum values, the most strict mode allows.", strictMaxEnumValues)}
		}
	}
	if branches, ok := s.get("anyOf"); ok {
		list, _ := branches.([]any)
		for i, b := range list {
			if err := c.node(b, sub(path, "anyOf", strconv.Itoa(i)), depth); err != nil {
				return err
			}
		}
	}
	if !has(s, "type", "anyOf", "$ref", "enum", "const") {
		return &schemaError{path: path, rule: "schema must have a 'type' key."}
	}
	if typeIncludes(s, "object") {
		if err := c.object(s, path, depth); err != nil {
			return err
		}
	}
	if items, ok := s.get("items"); ok {
		return c.node(items, sub(path, "items"), depth+1)
	}
	return nil
}

// object checks an object schema: additionalProperties false, every
// property required, and each property's own schema.
func (c *strictChecker) object(s *orderedObject, path []string, depth int) error {
	if ap, ok := s.get("additionalProperties"); !ok || ap != false {
		return &schemaError{path: path, rule: "'additionalProperties' is required to be supplied and to be false."}
	}
	pv, _ := s.get("properties")
	props, _ := pv.(*orderedObject)
	if props == nil {
		props = newOrderedObject()
	}
	rv, _ := s.get("required")
	list, _ := rv.([]any)
	required := map[string]bool{}
	for _, r := range list {
		name := fmt.Sprint(r)
		if _, ok := props.get(name); !ok {
			return &schemaError{path: path, rule: fmt.Sprintf("'required' is required to be supplied and to be an array including every key in properties. Extra required key '%s' supplied.", name)}
		}
		required[name] = true
	}
	for _, k := range props.keys {
		if !required[k] {
			return &schemaError{path: path, rule: fmt.Sprintf("'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", k)}
		}
	}
	if c.properties += len(props.keys); c.properties > strictMaxProperties {
		return &schemaError{path: path, rule: fmt.Sprintf("the schema has more than %d object properties, the most strict mode allows.", strictMaxProperties)}
	}
	for _, k := range props.keys {
		if err := c.node(props.vals[k], sub(path, "properties", k), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// typeIncludes reports whether a schema's type is t or a list holding t.
func typeIncludes(s *orderedObject, t string) bool {
	switch v, _ := s.get("type"); v := v.(type) {
	case string:
		return v == t
	case []any:
		for _, x := range v {
			if x == t {
				return true
			}
		}
	}
	return false
}

// validSchemaName checks a response format or function name against the
// pattern the API requires of both.
func validSchemaName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	return strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == ""
}
