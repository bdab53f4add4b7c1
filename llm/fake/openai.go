package fake

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/deputy-run/deputy/llm"
)

// The OpenAI Chat Completions API: request decoding and validation.

// oaiWireRequest declares every field openai-go v3 can send, so anything
// else is refused as "Unrecognized request argument". Fields the fake has
// no use for are kept raw and ignored.
type oaiWireRequest struct {
	Model               *string          `json:"model"`
	Messages            []oaiWireMessage `json:"messages"`
	Tools               []oaiWireTool    `json:"tools"`
	ToolChoice          json.RawMessage  `json:"tool_choice"`
	ParallelToolCalls   *bool            `json:"parallel_tool_calls"`
	MaxTokens           *int64           `json:"max_tokens"`
	MaxCompletionTokens *int64           `json:"max_completion_tokens"`
	Stop                json.RawMessage  `json:"stop"`
	Stream              *bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage       bool `json:"include_usage"`
		IncludeObfuscation bool `json:"include_obfuscation"`
	} `json:"stream_options"`
	Temperature          *float64           `json:"temperature"`
	PromptCacheRetention *string            `json:"prompt_cache_retention"`
	N                    *int64             `json:"n"`
	FrequencyPenalty     json.RawMessage    `json:"frequency_penalty"`
	Logprobs             json.RawMessage    `json:"logprobs"`
	PresencePenalty      json.RawMessage    `json:"presence_penalty"`
	PromptCacheKey       *string            `json:"prompt_cache_key"`
	PromptCacheOptions   json.RawMessage    `json:"prompt_cache_options"`
	SafetyIdentifier     *string            `json:"safety_identifier"`
	Seed                 json.RawMessage    `json:"seed"`
	Store                *bool              `json:"store"`
	TopLogprobs          json.RawMessage    `json:"top_logprobs"`
	TopP                 json.RawMessage    `json:"top_p"`
	User                 *string            `json:"user"`
	Audio                json.RawMessage    `json:"audio"`
	LogitBias            json.RawMessage    `json:"logit_bias"`
	Metadata             map[string]string  `json:"metadata"`
	Modalities           []string           `json:"modalities"`
	Moderation           json.RawMessage    `json:"moderation"`
	ReasoningEffort      *string            `json:"reasoning_effort"`
	ServiceTier          *string            `json:"service_tier"`
	Verbosity            *string            `json:"verbosity"`
	FunctionCall         json.RawMessage    `json:"function_call"`
	Functions            json.RawMessage    `json:"functions"`
	Prediction           *oaiWirePrediction `json:"prediction"`
	ResponseFormat       *oaiWireFormat     `json:"response_format"`
	WebSearchOptions     json.RawMessage    `json:"web_search_options"`
}

// oaiWireMessage declares what a request message may hold, and what the
// SDKs echo back on an assistant message they received: openai-node and
// openai-python append the response's message as it came (annotations,
// refusal, audio included), and their parse helpers add parsed (and
// parsed_arguments on tool calls), which gpt-4o and later accept
// (openai/openai-node#1161: refused by gpt-3.5 and gpt-4 only).
type oaiWireMessage struct {
	Role         string            `json:"role"`
	Content      json.RawMessage   `json:"content"`
	Name         json.RawMessage   `json:"name"`
	ToolCalls    []oaiWireToolCall `json:"tool_calls"`
	ToolCallID   string            `json:"tool_call_id"`
	Refusal      json.RawMessage   `json:"refusal"`
	Audio        json.RawMessage   `json:"audio"`
	FunctionCall json.RawMessage   `json:"function_call"`
	Annotations  json.RawMessage   `json:"annotations"`
	Parsed       json.RawMessage   `json:"parsed"`
}

type oaiWireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name            string          `json:"name"`
		Arguments       string          `json:"arguments"`
		ParsedArguments json.RawMessage `json:"parsed_arguments"`
	} `json:"function"`
	Custom json.RawMessage `json:"custom"`
	// Index is not part of the request schema, but clients that replay
	// streamed tool calls send it, and the API tolerates it.
	Index json.RawMessage `json:"index"`
}

type oaiWireTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      json.RawMessage `json:"strict"`
	} `json:"function"`
	Custom *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Format      json.RawMessage `json:"format"`
	} `json:"custom"`
}

// oaiWirePart declares the keys of every content part type (text,
// image_url, input_audio, file, refusal), each with its own object, and
// the prompt_cache_breakpoint openai-node 6.49 sends on any of them.
type oaiWirePart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	Refusal  *string `json:"refusal"`
	ImageURL *struct {
		URL    string          `json:"url"`
		Detail json.RawMessage `json:"detail"`
	} `json:"image_url"`
	InputAudio *struct {
		Data   string `json:"data"`
		Format string `json:"format"`
	} `json:"input_audio"`
	File *struct {
		FileData json.RawMessage `json:"file_data"`
		FileID   json.RawMessage `json:"file_id"`
		Filename json.RawMessage `json:"filename"`
	} `json:"file"`
	PromptCacheBreakpoint json.RawMessage `json:"prompt_cache_breakpoint"`
}

// oaiDecoded is a decoded, validated request.
type oaiDecoded struct {
	req          *llm.Request
	stream       bool
	includeUsage bool
	elems        []prefixElem
	maxTokens    int // -1: none
	retention    time.Duration
	// format is the response_format asked for (nil: text), strictTools
	// the parameter schemas of tools declared strict, by name.
	format      *oaiFormat
	strictTools map[string][]byte
	serviceTier string
}

// decodeOpenAI decodes and validates a body as Chat Completions does.
// System and developer messages become Request.System; assistant tool calls
// become tool_use blocks whose Input is the arguments string's bytes; tool
// messages become tool_result blocks in a user message. Adjacent messages
// that map to the same role are merged, so the llm transcript alternates.
// The steps check in one fixed order, so a body with several faults is
// always refused for the same one.
func decodeOpenAI(body []byte) (*oaiDecoded, *wireError) {
	var w oaiWireRequest
	if p := decodeStrict(body, &w); p != nil {
		if p.unknown != "" {
			if path := unknownParamPath(body, reflect.TypeFor[oaiWireRequest]()); path != "" {
				return nil, oaiUnknownParam(path)
			}
		}
		return nil, oaiDecodeError(p)
	}
	if werr := oaiRequired(&w); werr != nil {
		return nil, werr
	}
	d := &oaiDecoded{maxTokens: -1, retention: ttl5m}
	req := &llm.Request{Model: *w.Model, Temperature: w.Temperature}
	if werr := oaiOptions(&w, d, req); werr != nil {
		return nil, werr
	}
	pb := newPrefixBuilder(*w.Model, len(w.Tools)+2*len(w.Messages))
	tools, werr := oaiTools(w.Tools, pb)
	if werr != nil {
		return nil, werr
	}
	req.Tools = tools
	if d.strictTools, werr = oaiStrictTools(w.Tools); werr != nil {
		return nil, werr
	}
	if werr := oaiMessages(w.Messages, req, pb); werr != nil {
		return nil, werr
	}
	if werr := oaiPairing(w.Messages); werr != nil {
		return nil, werr
	}
	if d.format, werr = oaiResponseFormat(w.ResponseFormat, req); werr != nil {
		return nil, werr
	}
	d.req, d.elems = req, pb.elems
	return d, nil
}

// oaiRequired refuses a body without a model or without messages, the
// first things the API looks for.
func oaiRequired(w *oaiWireRequest) *wireError {
	if w.Model == nil || *w.Model == "" {
		return oaiInvalid("", "", "you must provide a model parameter")
	}
	if w.Messages == nil {
		return oaiInvalid("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	}
	if len(w.Messages) == 0 {
		return oaiInvalid("messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	return nil
}

// oaiOptions validates the settings around the prompt (streaming,
// sampling, limits, caching, stop and tool choice) into d and req.
func oaiOptions(w *oaiWireRequest, d *oaiDecoded, req *llm.Request) *wireError {
	d.stream = w.Stream != nil && *w.Stream
	if w.StreamOptions != nil {
		if !d.stream {
			return oaiInvalid("stream_options", "invalid_value", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		d.includeUsage = w.StreamOptions.IncludeUsage
	}
	if t := w.Temperature; t != nil && (*t < 0 || *t > 2) {
		return oaiInvalid("temperature", "invalid_value", "Invalid 'temperature': expected a value between 0 and 2, but got %v instead.", *t)
	}
	maxTokens, werr := oaiMaxTokens(w)
	if werr != nil {
		return werr
	}
	d.maxTokens = maxTokens
	if maxTokens > 0 {
		req.MaxTokens = maxTokens
	}
	if w.PromptCacheRetention != nil && *w.PromptCacheRetention == "24h" {
		d.retention = ttl24h
	}
	stops, werr := oaiStop(w.Stop)
	if werr != nil {
		return werr
	}
	req.StopSequences = stops
	if werr := oaiToolChoice(w.ToolChoice, req); werr != nil {
		return werr
	}
	if w.ParallelToolCalls != nil && !*w.ParallelToolCalls {
		req.ToolChoice.DisableParallel = true
	}
	return oaiSettings(w, d)
}

// oaiMaxTokens reads the output limit, -1 for none: max_completion_tokens
// wins over the deprecated max_tokens, and either must be at least 1
// (the error names max_tokens whichever was sent, as the API does).
func oaiMaxTokens(w *oaiWireRequest) (int, *wireError) {
	n := -1
	switch {
	case w.MaxCompletionTokens != nil:
		n = int(*w.MaxCompletionTokens)
	case w.MaxTokens != nil:
		n = int(*w.MaxTokens)
	}
	if n == 0 || n < -1 {
		return 0, oaiInvalid("max_tokens", "integer_below_min_value", "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got %d instead.", n)
	}
	return n, nil
}

// oaiTools maps the tool definitions, each one prefix element. A custom
// tool (free-form input, no schema) hashes its kind too, so it never
// shares a cache prefix with a function of the same name.
func oaiTools(tools []oaiWireTool, pb *prefixBuilder) ([]llm.ToolSpec, *wireError) {
	var specs []llm.ToolSpec
	for i, t := range tools {
		var spec llm.ToolSpec
		pb.begin()
		switch {
		case t.Type == "function" && t.Function != nil:
			if t.Function.Name == "" {
				p := fmt.Sprintf("tools[%d].function.name", i)
				return nil, oaiInvalid(p, "missing_required_parameter", "Missing required parameter: '%s'.", p)
			}
			spec = llm.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters}
		case t.Type == "custom" && t.Custom != nil:
			spec = llm.ToolSpec{Name: t.Custom.Name, Description: t.Custom.Description}
			pb.str("custom")
		default:
			p := fmt.Sprintf("tools[%d].type", i)
			return nil, oaiInvalid(p, "invalid_value", "Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type)
		}
		pb.str(spec.Name)
		pb.str(spec.Description)
		pb.raw(spec.InputSchema)
		pb.end(toolTokens(&spec), 0)
		specs = append(specs, spec)
	}
	return specs, nil
}

// oaiMessages maps the messages into req: system and developer texts join
// into req.System, the rest become req.Messages, a wire message that has
// the role of the one before it merging into it.
func oaiMessages(msgs []oaiWireMessage, req *llm.Request, pb *prefixBuilder) *wireError {
	var system []string
	for i := range msgs {
		m := &msgs[i]
		role, blocks, werr := oaiMessage(i, m)
		if werr != nil {
			return werr
		}
		if role == "" { // system or developer
			text := blocks[0].Text
			system = append(system, text)
			pb.begin()
			pb.str("system")
			pb.str(text)
			pb.end(systemTokens(text), 0)
			continue
		}
		n := len(req.Messages)
		merge := n > 0 && req.Messages[n-1].Role == role
		oaiPrefixMessage(pb, m.Role, blocks, merge)
		if merge {
			req.Messages[n-1].Content = append(req.Messages[n-1].Content, blocks...)
		} else {
			req.Messages = append(req.Messages, llm.Message{Role: role, Content: blocks})
		}
	}
	req.System = strings.Join(system, "\n")
	return nil
}

// oaiPrefixMessage adds one wire message's blocks to the prefix, each an
// element, the first also carrying the wire role and the message's
// framing tokens. A message that merges into the one before (an
// assistant's tool results, one message each on this wire) becomes part
// of one deputy message, which llm.EstimateRequest counts once: it is
// charged no overhead, so both ways of counting agree, as
// docs/scenarios.md promises.
func oaiPrefixMessage(pb *prefixBuilder, wireRole string, blocks []llm.Block, merge bool) {
	overhead := messageOverhead
	if merge {
		overhead = 0
	}
	for j := range blocks {
		pb.begin()
		if j == 0 {
			pb.str(wireRole)
		}
		hashBlock(pb, &blocks[j])
		pb.end(overhead+llm.EstimateBlock(&blocks[j]), 0)
		overhead = 0
	}
	if len(blocks) == 0 {
		pb.begin()
		pb.str(wireRole)
		pb.end(overhead, 0)
	}
}

// oaiDecodeError words a decode problem as OpenAI does.
func oaiDecodeError(p *decodeProblem) *wireError {
	switch {
	case p.syntax != "":
		return oaiInvalid("", "", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)")
	case p.unknown != "":
		return oaiInvalid("", "", "Unrecognized request argument supplied: %s", p.unknown)
	case p.want != "" && p.field == "":
		return oaiInvalid("", "invalid_type", "Invalid type for request body: expected an object.")
	case p.want != "":
		return oaiInvalid(p.field, "invalid_type", "Invalid type for '%s': expected %s.", p.field, p.want)
	}
	return oaiInvalid("", "", "Invalid request body: %s", p.other)
}

// oaiMessage maps one wire message to a role and blocks. The role is ""
// for system and developer messages, whose single block holds the text.
func oaiMessage(i int, m *oaiWireMessage) (llm.Role, []llm.Block, *wireError) {
	switch m.Role {
	case "system", "developer":
		text, _, werr := oaiContent(i, m.Content)
		if werr != nil {
			return "", nil, werr
		}
		return "", []llm.Block{llm.Text(text)}, nil
	case "user":
		_, blocks, werr := oaiContent(i, m.Content)
		return llm.User, blocks, werr
	case "assistant":
		_, blocks, werr := oaiContent(i, m.Content)
		if werr != nil {
			return "", nil, werr
		}
		if isNull(m.Content) && len(m.ToolCalls) == 0 && isNull(m.FunctionCall) && isNull(m.Audio) {
			p := fmt.Sprintf("messages[%d].content", i)
			return "", nil, oaiInvalid(p, "missing_required_parameter", "Missing required parameter: '%s'.", p)
		}
		for j, tc := range m.ToolCalls {
			switch {
			case tc.Function != nil:
				// The arguments string's bytes are the tool input as the
				// model produced them; arguments that are not a JSON
				// object (the API takes any string) are kept as text.
				blocks = append(blocks, llm.ToolCall(tc.ID, tc.Function.Name, []byte(tc.Function.Arguments)))
			case !isNull(tc.Custom):
				raw, _ := json.Marshal(tc)
				blocks = append(blocks, llm.Opaque("custom_tool_call", raw))
			default:
				p := fmt.Sprintf("messages[%d].tool_calls[%d].function", i, j)
				return "", nil, oaiInvalid(p, "missing_required_parameter", "Missing required parameter: '%s'.", p)
			}
		}
		return llm.Assistant, blocks, nil
	case "tool":
		text, _, werr := oaiContent(i, m.Content)
		if werr != nil {
			return "", nil, werr
		}
		if m.ToolCallID == "" {
			p := fmt.Sprintf("messages[%d].tool_call_id", i)
			return "", nil, oaiInvalid(p, "missing_required_parameter", "Missing required parameter: '%s'.", p)
		}
		return llm.User, []llm.Block{llm.ToolResult(m.ToolCallID, text, false)}, nil
	case "function":
		// The deprecated function-result role: carried, not interpreted.
		raw, _ := json.Marshal(m)
		return llm.User, []llm.Block{llm.Opaque("function_result", raw)}, nil
	case "":
		p := fmt.Sprintf("messages[%d].role", i)
		return "", nil, oaiInvalid(p, "missing_required_parameter", "Missing required parameter: '%s'.", p)
	}
	p := fmt.Sprintf("messages[%d].role", i)
	return "", nil, oaiInvalid(p, "invalid_value", "Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role)
}

// oaiContent reads content given as a string, null, or a list of parts.
// Text parts become text blocks (and are joined in the returned text);
// other parts (images, audio, files, refusals) are carried opaque.
func oaiContent(i int, raw json.RawMessage) (string, []llm.Block, *wireError) {
	if isNull(raw) {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, oaiInvalid(fmt.Sprintf("messages[%d].content", i), "invalid_type", "Invalid type for 'messages[%d].content'.", i)
		}
		if s == "" {
			return "", nil, nil
		}
		return s, []llm.Block{llm.Text(s)}, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		p := fmt.Sprintf("messages[%d].content", i)
		return "", nil, oaiInvalid(p, "invalid_type", "Invalid type for '%s': expected one of a string or array of objects.", p)
	}
	var texts []string
	blocks := make([]llm.Block, 0, len(parts))
	for j, pr := range parts {
		var part oaiWirePart
		if p := decodeStrict(pr, &part); p != nil && p.unknown != "" {
			return "", nil, oaiUnknownParam(fmt.Sprintf("messages[%d].content[%d].%s", i, j, unknownParamPath(pr, reflect.TypeFor[oaiWirePart]())))
		}
		if err := json.Unmarshal(pr, &part); err != nil || part.Type == "" {
			p := fmt.Sprintf("messages[%d].content[%d].type", i, j)
			return "", nil, oaiInvalid(p, "missing_required_parameter", "Missing required parameter: '%s'.", p)
		}
		if part.Type == "text" {
			if part.Text == nil {
				p := fmt.Sprintf("messages[%d].content[%d].text", i, j)
				return "", nil, oaiInvalid(p, "missing_required_parameter", "Missing required parameter: '%s'.", p)
			}
			texts = append(texts, *part.Text)
			blocks = append(blocks, llm.Text(*part.Text))
			continue
		}
		blocks = append(blocks, llm.Opaque(part.Type, pr))
	}
	return strings.Join(texts, "\n"), blocks, nil
}

func oaiStop(raw json.RawMessage) ([]string, *wireError) {
	if isNull(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, oaiInvalid("stop", "invalid_type", "Invalid type for 'stop'.")
		}
		return []string{s}, nil
	}
	var ss []string
	if json.Unmarshal(raw, &ss) != nil {
		return nil, oaiInvalid("stop", "invalid_type", "Invalid type for 'stop': expected one of a string or array of strings.")
	}
	if len(ss) > 4 {
		return nil, oaiInvalid("stop", "array_above_max_length", "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length %d instead.", len(ss))
	}
	return ss, nil
}

// oaiToolChoiceMode maps tool_choice's string form, the same on both
// OpenAI wires: "auto", "none", "required" (any tool).
func oaiToolChoiceMode(raw json.RawMessage, req *llm.Request) *wireError {
	var s string
	_ = json.Unmarshal(raw, &s)
	switch s {
	case "auto", "none":
		req.ToolChoice.Type = s
	case "required":
		req.ToolChoice.Type = "any"
	default:
		return oaiInvalid("tool_choice", "invalid_value", "Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", s)
	}
	return nil
}

// oaiToolChoice maps tool_choice: "auto", "none", "required" (any tool),
// or an object naming one function.
func oaiToolChoice(raw json.RawMessage, req *llm.Request) *wireError {
	if isNull(raw) {
		return nil
	}
	if raw[0] == '"' {
		return oaiToolChoiceMode(raw, req)
	}
	var tc struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		Custom struct {
			Name string `json:"name"`
		} `json:"custom"`
	}
	if json.Unmarshal(raw, &tc) != nil {
		return oaiInvalid("tool_choice", "invalid_type", "Invalid type for 'tool_choice': expected one of a string or object.")
	}
	switch tc.Type {
	case "function":
		req.ToolChoice = llm.ToolChoice{Type: "tool", Name: tc.Function.Name}
	case "custom":
		req.ToolChoice = llm.ToolChoice{Type: "tool", Name: tc.Custom.Name}
	case "allowed_tools":
		req.ToolChoice.Type = "auto"
	default:
		return oaiInvalid("tool_choice.type", "invalid_value", "Invalid value: '%s'. Supported values are: 'function', 'custom', and 'allowed_tools'.", tc.Type)
	}
	return nil
}

// oaiPairing checks that every assistant tool call is answered by the tool
// messages right after it, and that every tool message answers one.
func oaiPairing(msgs []oaiWireMessage) *wireError {
	for i := 0; i < len(msgs); i++ {
		m := &msgs[i]
		if m.Role == "tool" {
			p := fmt.Sprintf("messages.[%d].role", i)
			return oaiInvalid(p, "", "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
		}
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		want := make(map[string]bool, len(m.ToolCalls))
		for _, tc := range m.ToolCalls {
			want[tc.ID] = true
		}
		j := i + 1
		for ; j < len(msgs) && msgs[j].Role == "tool"; j++ {
			id := msgs[j].ToolCallID
			if _, ok := want[id]; !ok {
				p := fmt.Sprintf("messages.[%d].tool_call_id", j)
				return oaiInvalid(p, "", "Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", id)
			}
			delete(want, id)
		}
		if len(want) > 0 {
			var missing []string
			for _, tc := range m.ToolCalls {
				if want[tc.ID] {
					missing = append(missing, tc.ID)
				}
			}
			p := fmt.Sprintf("messages.[%d].role", i)
			return oaiInvalid(p, "", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(missing, ", "))
		}
		i = j - 1
	}
	return nil
}
