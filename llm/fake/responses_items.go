package fake

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/deputy-run/deputy/llm"
)

// The Responses API's input items: messages (with input_text, output_text
// and other parts), function_call and function_call_output items, and
// reasoning items, which are carried opaque (llm.Opaque("reasoning", the
// item's JSON)) so they go back byte-identical.

// respInputItems reads input: a string (one user message) or a list of
// item objects. A string is normalized to the item the API stores for it.
func respInputItems(raw json.RawMessage) ([]json.RawMessage, *wireError) {
	if isNull(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, oaiInvalid("input", "invalid_type", "Invalid type for 'input': expected one of a string or array of input items.")
		}
		return []json.RawMessage{respUserItem(s)}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, oaiInvalid("input", "invalid_type", "Invalid type for 'input': expected one of a string or array of input items.")
	}
	for i, it := range items {
		if firstNonSpace(it) != '{' {
			p := fmt.Sprintf("input[%d]", i)
			return nil, oaiInvalid(p, "invalid_type", "Invalid type for '%s': expected an input item object.", p)
		}
	}
	return items, nil
}

// respUserItem is the message item a string input stands for.
func respUserItem(text string) json.RawMessage {
	b := append([]byte(`{"type":"message","role":"user","content":[{"type":"input_text","text":`), appendJSONString(nil, text)...)
	return append(b, "}]}"...)
}

// respItems maps the items into req, item by item: system and developer
// messages join the instructions in req.System, the rest become messages,
// an item that maps to the role of the one before merging into it. The
// first prior items come from previous_response_id and were checked when
// they were stored; paths in errors count the request's own items.
func respItems(items []json.RawMessage, prior int, req *llm.Request, pb *prefixBuilder, d *respDecoded) *wireError {
	var system []string
	if req.System != "" {
		system = append(system, req.System)
	}
	for i, raw := range items {
		path := fmt.Sprintf("input[%d]", i-prior)
		if respItemType(raw) == "additional_tools" {
			if werr := respAdditionalTools(raw, path, pb, d, req); werr != nil {
				return werr
			}
			continue
		}
		role, wireRole, blocks, werr := respItem(raw, path)
		if werr != nil {
			return werr
		}
		if role == "" { // system or developer
			text := llm.Message{Content: blocks}.Text()
			system = append(system, text)
			pb.begin()
			pb.str(wireRole)
			pb.str(text)
			pb.end(systemTokens(text), 0)
			continue
		}
		n := len(req.Messages)
		merge := n > 0 && req.Messages[n-1].Role == role
		oaiPrefixMessage(pb, wireRole, blocks, merge)
		if merge {
			req.Messages[n-1].Content = append(req.Messages[n-1].Content, blocks...)
		} else {
			req.Messages = append(req.Messages, llm.Message{Role: role, Content: blocks})
		}
	}
	req.System = strings.Join(system, "\n")
	return respPairing(items)
}

// respItemType is an item's type, "" when it has none.
func respItemType(raw json.RawMessage) string {
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &head)
	return head.Type
}

// respItem maps one item to a deputy role ("" for system and developer
// messages), the role or type it had on the wire, and blocks.
func respItem(raw json.RawMessage, path string) (llm.Role, string, []llm.Block, *wireError) {
	var head struct {
		Type string `json:"type"`
		Role string `json:"role"`
	}
	if json.Unmarshal(raw, &head) != nil {
		return "", "", nil, oaiInvalid(path, "invalid_type", "Invalid type for '%s': expected an input item object.", path)
	}
	switch head.Type {
	case "message", "":
		if head.Type == "" && head.Role == "" {
			return "", "", nil, oaiInvalid(path+".type", "missing_required_parameter", "Missing required parameter: '%s.type'.", path)
		}
		return respMessage(raw, path, head.Role)
	case "function_call", "custom_tool_call":
		b, werr := respFunctionCall(raw, path, head.Type)
		return llm.Assistant, head.Type, b, werr
	case "function_call_output", "custom_tool_call_output":
		b, werr := respFunctionOutput(raw, path)
		return llm.User, head.Type, b, werr
	case "reasoning":
		b, werr := respReasoningItem(raw, path)
		return llm.Assistant, head.Type, b, werr
	}
	return "", "", nil, oaiInvalid(path+".type", "invalid_value", "Invalid value: '%s'. Supported values are: 'message', 'function_call', 'function_call_output', 'reasoning', 'custom_tool_call', 'custom_tool_call_output', 'additional_tools', and 'item_reference'.", head.Type)
}

// respResolveRefs replaces each item_reference ({type, id}, the type
// optional: openai-go omits it) among the request's own items with the
// stored item it names, as the API reads it; an id no stored response
// holds is refused.
func respResolveRefs(items []json.RawMessage, prior int, hist respHistory) ([]json.RawMessage, *wireError) {
	var out []json.RawMessage
	for i := prior; i < len(items); i++ {
		var ref struct {
			Type string  `json:"type"`
			ID   *string `json:"id"`
		}
		if json.Unmarshal(items[i], &ref) != nil || !respIsRef(items[i], ref.Type) {
			continue
		}
		path := fmt.Sprintf("input[%d]", i-prior)
		if werr := respStrict(items[i], &ref, path); werr != nil {
			return nil, werr
		}
		if ref.ID == nil {
			return nil, oaiInvalid(path+".id", "missing_required_parameter", "Missing required parameter: '%s.id'.", path)
		}
		raw, ok := hist.item(*ref.ID)
		if !ok {
			return nil, respItemNotFound(*ref.ID)
		}
		if out == nil {
			out = slices.Clone(items)
		}
		out[i] = raw
	}
	if out == nil {
		return items, nil
	}
	return out, nil
}

// respItemNotFound is the API's answer to an item id it holds no item
// for (anomalyco/opencode#7724, #8987 quote it).
func respItemNotFound(id string) *wireError {
	return oaiInvalid("input", "", "Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", id)
}

// respCheckReasoning refuses a reasoning item of the request's own that
// carries no encrypted_content and names no stored item: without either
// the API has nothing to restore the reasoning from (the case of a
// client that sends reasoning back under store: false without including
// reasoning.encrypted_content).
func respCheckReasoning(items []json.RawMessage, prior int, hist respHistory) *wireError {
	for _, raw := range items[prior:] {
		var r struct {
			Type             string          `json:"type"`
			ID               string          `json:"id"`
			EncryptedContent json.RawMessage `json:"encrypted_content"`
		}
		if json.Unmarshal(raw, &r) != nil || r.Type != "reasoning" || !isNull(r.EncryptedContent) || r.ID == "" {
			continue
		}
		if _, ok := hist.item(r.ID); !ok {
			return respItemNotFound(r.ID)
		}
	}
	return nil
}

// respIsRef reports whether an item is an item_reference: typed so, or
// an untyped item with an id and no role (a message always has one).
func respIsRef(raw json.RawMessage, typ string) bool {
	if typ != "" {
		return typ == "item_reference"
	}
	var head struct {
		Role *string         `json:"role"`
		ID   json.RawMessage `json:"id"`
	}
	return json.Unmarshal(raw, &head) == nil && head.Role == nil && !isNull(head.ID)
}

// respWireMessage is a message item: EasyInputMessage, an input message
// or an output message sent back (id, status, phase).
type respWireMessage struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	ID      json.RawMessage `json:"id"`
	Status  json.RawMessage `json:"status"`
	Phase   json.RawMessage `json:"phase"`
}

// respWirePart is a content part; which fields a type takes is checked by
// respPartFields.
type respWirePart struct {
	Type                  string          `json:"type"`
	Text                  *string         `json:"text"`
	Refusal               *string         `json:"refusal"`
	Annotations           json.RawMessage `json:"annotations"`
	Logprobs              json.RawMessage `json:"logprobs"`
	PromptCacheBreakpoint json.RawMessage `json:"prompt_cache_breakpoint"`
	ImageURL              json.RawMessage `json:"image_url"`
	FileID                json.RawMessage `json:"file_id"`
	Detail                json.RawMessage `json:"detail"`
	FileData              json.RawMessage `json:"file_data"`
	FileURL               json.RawMessage `json:"file_url"`
	Filename              json.RawMessage `json:"filename"`
	InputAudio            json.RawMessage `json:"input_audio"`
}

// respPartTypes are the part types each role may send.
var respPartTypes = map[string][]string{
	"user":      {"input_text", "input_image", "input_file", "input_audio"},
	"system":    {"input_text", "input_image", "input_file", "input_audio"},
	"developer": {"input_text", "input_image", "input_file", "input_audio"},
	"assistant": {"output_text", "refusal"},
}

// respMessage maps a message item: text parts become text blocks, other
// parts are carried opaque.
func respMessage(raw json.RawMessage, path, role string) (llm.Role, string, []llm.Block, *wireError) {
	var m respWireMessage
	if werr := respStrict(raw, &m, path); werr != nil {
		return "", "", nil, werr
	}
	allowed, ok := respPartTypes[m.Role]
	if !ok {
		return "", "", nil, oaiInvalid(path+".role", "invalid_value", "Invalid value: '%s'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", role)
	}
	if isNull(m.Content) {
		return "", "", nil, oaiInvalid(path+".content", "missing_required_parameter", "Missing required parameter: '%s.content'.", path)
	}
	blocks, werr := respContent(m.Content, path+".content", allowed)
	if werr != nil {
		return "", "", nil, werr
	}
	switch m.Role {
	case "user":
		return llm.User, m.Role, blocks, nil
	case "assistant":
		return llm.Assistant, m.Role, blocks, nil
	}
	return "", m.Role, blocks, nil
}

// respContent reads a message's content: a string or a list of parts of
// the types allowed.
func respContent(raw json.RawMessage, path string, allowed []string) ([]llm.Block, *wireError) {
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, oaiInvalid(path, "invalid_type", "Invalid type for '%s': expected one of a string or array of content parts.", path)
		}
		return []llm.Block{llm.Text(s)}, nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return nil, oaiInvalid(path, "invalid_type", "Invalid type for '%s': expected one of a string or array of content parts.", path)
	}
	blocks := make([]llm.Block, 0, len(parts))
	for j, pr := range parts {
		pp := fmt.Sprintf("%s[%d]", path, j)
		var part respWirePart
		if werr := respStrict(pr, &part, pp); werr != nil {
			return nil, werr
		}
		if !slices.Contains(allowed, part.Type) {
			return nil, oaiInvalid(pp+".type", "invalid_value", "Invalid value: '%s'. Supported values are: %s.", part.Type, quoteList(allowed))
		}
		if f := respPartFields(&part); f != "" {
			return nil, oaiInvalid(pp+"."+f, "unknown_parameter", "Unknown parameter: '%s.%s'.", pp, f)
		}
		switch part.Type {
		case "input_text", "output_text":
			if part.Text == nil {
				return nil, oaiInvalid(pp+".text", "missing_required_parameter", "Missing required parameter: '%s.text'.", pp)
			}
			blocks = append(blocks, llm.Text(*part.Text))
		default:
			blocks = append(blocks, llm.Opaque(part.Type, pr))
		}
	}
	return blocks, nil
}

// respPartFields names a field the part's type does not take, or "".
func respPartFields(p *respWirePart) string {
	type field struct {
		name string
		set  bool
	}
	fields := []field{
		{"text", p.Text != nil}, {"refusal", p.Refusal != nil}, {"annotations", p.Annotations != nil},
		{"logprobs", p.Logprobs != nil}, {"prompt_cache_breakpoint", p.PromptCacheBreakpoint != nil},
		{"image_url", p.ImageURL != nil}, {"file_id", p.FileID != nil}, {"detail", p.Detail != nil},
		{"file_data", p.FileData != nil}, {"file_url", p.FileURL != nil}, {"filename", p.Filename != nil},
		{"input_audio", p.InputAudio != nil},
	}
	takes := map[string]string{
		"input_text":  "text prompt_cache_breakpoint",
		"output_text": "text annotations logprobs",
		"refusal":     "refusal",
		"input_image": "image_url file_id detail",
		"input_file":  "file_id file_data file_url filename detail",
		"input_audio": "input_audio",
	}[p.Type]
	for _, f := range fields {
		if f.set && !slices.Contains(strings.Fields(takes), f.name) {
			return f.name
		}
	}
	return ""
}

// respWireCall is a function_call item sent back, or a custom_tool_call
// (its input where a function call has arguments).
type respWireCall struct {
	Type      string          `json:"type"`
	ID        json.RawMessage `json:"id"`
	CallID    *string         `json:"call_id"`
	Name      *string         `json:"name"`
	Arguments *string         `json:"arguments"`
	Input     *string         `json:"input"`
	Status    json.RawMessage `json:"status"`
	Namespace json.RawMessage `json:"namespace"`
	Caller    json.RawMessage `json:"caller"`
	Async     json.RawMessage `json:"async"`
}

// respFunctionCall maps a function_call item to a tool_use block whose
// input is the arguments string's bytes, and a custom_tool_call to one
// whose input is its input text (free-form, so mostly not JSON: the
// block's InvalidInput, as a scenario's raw_input makes it).
func respFunctionCall(raw json.RawMessage, path, typ string) ([]llm.Block, *wireError) {
	var c respWireCall
	if werr := respStrict(raw, &c, path); werr != nil {
		return nil, werr
	}
	argsName, args, other, otherName := "arguments", c.Arguments, c.Input, "input"
	if typ == "custom_tool_call" {
		argsName, args, other, otherName = "input", c.Input, c.Arguments, "arguments"
	}
	if other != nil {
		return nil, oaiInvalid(path+"."+otherName, "unknown_parameter", "Unknown parameter: '%s.%s'.", path, otherName)
	}
	c.Arguments = args
	for _, f := range []struct {
		name string
		v    *string
	}{{"call_id", c.CallID}, {"name", c.Name}, {argsName, c.Arguments}} {
		if f.v == nil {
			return nil, oaiInvalid(path+"."+f.name, "missing_required_parameter", "Missing required parameter: '%s.%s'.", path, f.name)
		}
	}
	return []llm.Block{llm.ToolCall(*c.CallID, *c.Name, []byte(*c.Arguments))}, nil
}

// respWireOutput is a function_call_output item.
type respWireOutput struct {
	Type      string          `json:"type"`
	ID        json.RawMessage `json:"id"`
	CallID    *string         `json:"call_id"`
	Output    json.RawMessage `json:"output"`
	Status    json.RawMessage `json:"status"`
	Name      json.RawMessage `json:"name"`
	Namespace json.RawMessage `json:"namespace"`
	Caller    json.RawMessage `json:"caller"`
}

// respFunctionOutput maps a function_call_output item to a tool_result
// block; an output given as parts keeps their text.
func respFunctionOutput(raw json.RawMessage, path string) ([]llm.Block, *wireError) {
	var o respWireOutput
	if werr := respStrict(raw, &o, path); werr != nil {
		return nil, werr
	}
	if o.CallID == nil {
		return nil, oaiInvalid(path+".call_id", "missing_required_parameter", "Missing required parameter: '%s.call_id'.", path)
	}
	if isNull(o.Output) {
		return nil, oaiInvalid(path+".output", "missing_required_parameter", "Missing required parameter: '%s.output'.", path)
	}
	blocks, werr := respContent(o.Output, path+".output", respPartTypes["user"])
	if werr != nil {
		return nil, werr
	}
	return []llm.Block{llm.ToolResult(*o.CallID, llm.Message{Content: blocks}.Text(), false)}, nil
}

// respWireReasoning is a reasoning item sent back. It has no status: the
// API refuses the output-only field ("Unknown parameter:
// 'input[1].status'.", BerriAI/litellm#13420).
type respWireReasoning struct {
	Type             string          `json:"type"`
	ID               *string         `json:"id"`
	Summary          json.RawMessage `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content"`
	Content          json.RawMessage `json:"content"`
}

// respReasoningItem checks a reasoning item and carries it opaque. Its
// encrypted_content, if any, must be one this fake issued, unmodified.
func respReasoningItem(raw json.RawMessage, path string) ([]llm.Block, *wireError) {
	var r respWireReasoning
	if werr := respStrict(raw, &r, path); werr != nil {
		return nil, werr
	}
	if r.ID == nil {
		return nil, oaiInvalid(path+".id", "missing_required_parameter", "Missing required parameter: '%s.id'.", path)
	}
	if isNull(r.Summary) {
		return nil, oaiInvalid(path+".summary", "missing_required_parameter", "Missing required parameter: '%s.summary'.", path)
	}
	if r.EncryptedContent != nil {
		if _, ok := openReasoning(*r.EncryptedContent); !ok {
			return nil, &wireError{status: 400, kind: errInvalid, oaiCode: "invalid_encrypted_content",
				msg:    fmt.Sprintf("The encrypted content for item %s could not be verified.", *r.ID),
				oaiMsg: fmt.Sprintf("The encrypted content for item %s could not be verified.", *r.ID)}
		}
	}
	return []llm.Block{llm.Opaque("reasoning", raw)}, nil
}

// respPairing checks that every function_call_output answers a
// function_call before it, and every function_call is answered, as the API
// does (both refusals name param "input").
func respPairing(items []json.RawMessage) *wireError {
	var calls []string
	answered := map[string]bool{}
	for _, raw := range items {
		var it struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		_ = json.Unmarshal(raw, &it)
		switch it.Type {
		case "function_call", "custom_tool_call":
			calls = append(calls, it.CallID)
		case "function_call_output", "custom_tool_call_output":
			if !slices.Contains(calls, it.CallID) {
				return oaiInvalid("input", "", "No tool call found for function call output with call_id %s.", it.CallID)
			}
			answered[it.CallID] = true
		}
	}
	for _, id := range calls {
		if !answered[id] {
			return oaiInvalid("input", "", "No tool output found for function call %s.", id)
		}
	}
	return nil
}
