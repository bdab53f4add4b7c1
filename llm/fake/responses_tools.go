package fake

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/deputy-run/deputy/llm"
)

// The Responses API's tools: function and custom tools, hosted tools
// (accepted, never offered to the Responder), and namespace tools that
// group function and custom tools under a name. Tools come in the
// request's tools and, as Codex CLI's code mode sends them, in
// additional_tools input items (openai-go's
// ResponseInputItemAdditionalToolsParam).

// respTools maps tool definitions at path (tools, or an input item's
// tools) into req.Tools, each one prefix element, keeping each as the
// response echoes it. ns is the namespace they are in, "" for none.
func respTools(tools []json.RawMessage, path, ns string, pb *prefixBuilder, d *respDecoded, req *llm.Request) *wireError {
	for i, raw := range tools {
		p := fmt.Sprintf("%s[%d]", path, i)
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &head) != nil {
			return oaiInvalid(p, "invalid_type", "Invalid type for '%s': expected an object.", p)
		}
		switch {
		case head.Type == "function" || head.Type == "custom":
			if werr := respTool(raw, p, head.Type, ns, pb, d, req); werr != nil {
				return werr
			}
		case head.Type == "namespace" && ns == "":
			if werr := respNamespace(raw, p, pb, d, req); werr != nil {
				return werr
			}
		case slices.Contains(respHostedTools, head.Type) && ns == "":
			d.echo.tools = append(d.echo.tools, raw)
		case head.Type == "":
			return oaiInvalid(p+".type", "missing_required_parameter", "Missing required parameter: '%s.type'.", p)
		default:
			return oaiInvalid(p+".type", "invalid_value", "Invalid value: '%s'. Supported values are: 'function', 'custom', 'namespace', and the hosted tool types.", head.Type)
		}
	}
	return nil
}

// respTool adds one function or custom tool.
func respTool(raw json.RawMessage, path, typ, ns string, pb *prefixBuilder, d *respDecoded, req *llm.Request) *wireError {
	spec, echo, werr := respFunction(raw, path, typ)
	if werr != nil {
		return werr
	}
	pb.begin()
	if typ == "custom" {
		pb.str("custom") // never shares a prefix with a function of its name
		if d.custom == nil {
			d.custom = map[string]bool{}
		}
		d.custom[spec.Name] = true
	}
	if ns != "" {
		pb.str(ns)
		if d.namespace == nil {
			d.namespace = map[string]string{}
		}
		d.namespace[spec.Name] = ns
	}
	pb.str(spec.Name)
	pb.str(spec.Description)
	pb.raw(spec.InputSchema)
	pb.end(toolTokens(&spec), 0)
	req.Tools = append(req.Tools, spec)
	if ns == "" {
		d.echo.tools = append(d.echo.tools, echo)
	}
	return nil
}

// respNamespace adds a namespace's tools under its name.
func respNamespace(raw json.RawMessage, path string, pb *prefixBuilder, d *respDecoded, req *llm.Request) *wireError {
	var n struct {
		Type        string            `json:"type"`
		Name        *string           `json:"name"`
		Description json.RawMessage   `json:"description"`
		Tools       []json.RawMessage `json:"tools"`
	}
	if werr := respStrict(raw, &n, path); werr != nil {
		return werr
	}
	if n.Name == nil || *n.Name == "" {
		return oaiInvalid(path+".name", "missing_required_parameter", "Missing required parameter: '%s.name'.", path)
	}
	d.echo.tools = append(d.echo.tools, raw)
	return respTools(n.Tools, path+".tools", *n.Name, pb, d, req)
}

// respAdditionalTools reads an additional_tools input item: its tools
// join the request's from that point of the prompt on.
func respAdditionalTools(raw json.RawMessage, path string, pb *prefixBuilder, d *respDecoded, req *llm.Request) *wireError {
	var a struct {
		Type  string            `json:"type"`
		ID    json.RawMessage   `json:"id"`
		Role  json.RawMessage   `json:"role"`
		Tools []json.RawMessage `json:"tools"`
	}
	if werr := respStrict(raw, &a, path); werr != nil {
		return werr
	}
	if a.Tools == nil {
		return oaiInvalid(path+".tools", "missing_required_parameter", "Missing required parameter: '%s.tools'.", path)
	}
	return respTools(a.Tools, path+".tools", "", pb, d, req)
}
