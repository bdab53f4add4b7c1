package fake

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deputy-run/deputy/llm"
)

// The OpenAI Responses API: request decoding and validation.
//
// The field lists follow openai-go v3's responses.ResponseNewParams (and
// the item params it nests) and the CreateResponse schema of
// openai/openai-openapi. The API refuses any other field with 400
// "Unknown parameter: 'PATH'." (param PATH, code unknown_parameter), the
// path naming nested fields too ('input[3].status'), as reported against
// the real API in 1jehuang/jcode#1028 and pydantic/pydantic-ai#3653.

// respWireRequest declares every top-level field the API takes. Fields the
// fake has no use for are kept raw and ignored.
type respWireRequest struct {
	Model             *string           `json:"model"`
	Input             json.RawMessage   `json:"input"`
	Instructions      *string           `json:"instructions"`
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens   *int64            `json:"max_output_tokens"`
	Stream            *bool             `json:"stream"`
	StreamOptions     *struct {
		IncludeObfuscation bool `json:"include_obfuscation"`
	} `json:"stream_options"`
	Temperature          *float64        `json:"temperature"`
	TopP                 *float64        `json:"top_p"`
	Text                 json.RawMessage `json:"text"`
	Reasoning            json.RawMessage `json:"reasoning"`
	Include              []string        `json:"include"`
	PreviousResponseID   *string         `json:"previous_response_id"`
	Store                *bool           `json:"store"`
	PromptCacheRetention *string         `json:"prompt_cache_retention"`
	Metadata             json.RawMessage `json:"metadata"`
	// ClientMetadata is Codex CLI's (codex-rs sends it to api.openai.com
	// with every request, so the API takes it); not in openai-go's params.
	ClientMetadata json.RawMessage `json:"client_metadata"`
	Truncation     json.RawMessage `json:"truncation"`
	User           json.RawMessage `json:"user"`

	Background         *bool           `json:"background"`
	MaxToolCalls       json.RawMessage `json:"max_tool_calls"`
	PromptCacheKey     json.RawMessage `json:"prompt_cache_key"`
	PromptCacheOptions json.RawMessage `json:"prompt_cache_options"`
	SafetyIdentifier   json.RawMessage `json:"safety_identifier"`
	TopLogprobs        json.RawMessage `json:"top_logprobs"`
	ContextManagement  json.RawMessage `json:"context_management"`
	Conversation       json.RawMessage `json:"conversation"`
	Moderation         json.RawMessage `json:"moderation"`
	Prompt             json.RawMessage `json:"prompt"`
	ServiceTier        json.RawMessage `json:"service_tier"`
	AccessPrograms     json.RawMessage `json:"access_programs"`
	Image              json.RawMessage `json:"image"`
}

// respDecoded is a decoded, validated request.
type respDecoded struct {
	req       *llm.Request
	stream    bool
	elems     []prefixElem
	maxTokens int // -1: none
	retention time.Duration
	store     bool
	// encrypted is set when include names reasoning.encrypted_content.
	encrypted bool
	// summary is reasoning.summary ("" for none): whether reasoning items
	// carry their summary.
	summary string
	// schema is text.format's JSON schema when the format is json_schema.
	schema json.RawMessage
	// custom names the custom (free-form input) tools: a call to one is a
	// custom_tool_call item, its input the call's text.
	custom map[string]bool
	// jsonObject is set for text.format json_object: the answer is a JSON
	// object, and the prompt must say "json".
	jsonObject bool
	// namespace names the namespace a tool was offered in, if any; its
	// calls carry it.
	namespace map[string]string
	// items is the whole input (a continued response's input and output
	// first), normalized to item objects, as a stored response keeps it.
	items []json.RawMessage
	echo  respEcho
}

// respEcho is what the response object repeats of the request.
type respEcho struct {
	instructions      *string
	tools             []json.RawMessage
	toolChoice        json.RawMessage
	parallel          bool
	background        bool
	temperature, topP float64
	maxOutput         *int64
	previous          *string
	reasoningEffort   *string
	reasoningSummary  *string
	text              json.RawMessage
	metadata          json.RawMessage
	truncation        string
	promptCacheRetain *string
	user              json.RawMessage
}

// respHistory is what a request may draw on from stored responses: a
// response's input and output items (previous_response_id) and single
// items by id (item_reference). *respStore is one.
type respHistory interface {
	lookup(id string) (input, output []json.RawMessage, ok bool)
	item(id string) (json.RawMessage, bool)
}

// decodeResponses decodes and validates a body as the Responses API does.
// The steps check in one fixed order, so a body with several faults is
// always refused for the same one.
func decodeResponses(body []byte, hist respHistory) (*respDecoded, *wireError) {
	var w respWireRequest
	if p := decodeStrict(body, &w); p != nil {
		return nil, respDecodeError(p, "")
	}
	if w.Model == nil || *w.Model == "" {
		return nil, oaiInvalid("model", "missing_required_parameter", "Missing required parameter: 'model'.")
	}
	if werr := respConversation(w.Conversation); werr != nil {
		return nil, werr
	}
	d := &respDecoded{maxTokens: -1, retention: ttl5m, store: w.Store == nil || *w.Store}
	req := &llm.Request{Model: *w.Model, Temperature: w.Temperature}
	if werr := respOptions(&w, d, req); werr != nil {
		return nil, werr
	}
	items, prior, werr := respAllItems(&w, hist)
	if werr != nil {
		return nil, werr
	}
	pb, werr := respPrompt(&w, items, prior, d, req)
	if werr != nil {
		return nil, werr
	}
	if werr := respCheckReasoning(items, prior, hist); werr != nil {
		return nil, werr
	}
	if w.Input == nil && w.PreviousResponseID == nil && isNull(w.Prompt) {
		return nil, oaiInvalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	if d.jsonObject && !mentionsJSON(req) {
		return nil, oaiInvalid("input", "", "Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.")
	}
	d.req, d.elems, d.items = req, pb.elems, items
	return d, nil
}

// respAllItems is the whole input: a continued response's input and
// output (its first prior items), then the request's own, item
// references resolved.
func respAllItems(w *respWireRequest, hist respHistory) (items []json.RawMessage, prior int, werr *wireError) {
	if items, werr = respInputItems(w.Input); werr != nil {
		return nil, 0, werr
	}
	if id := w.PreviousResponseID; id != nil {
		in, out, ok := hist.lookup(*id)
		if !ok {
			msg := fmt.Sprintf("Previous response with id '%s' not found.", *id)
			return nil, 0, &wireError{status: 400, kind: errInvalid, oaiParam: "previous_response_id", oaiCode: "previous_response_not_found", msg: msg, oaiMsg: msg}
		}
		prior = len(in) + len(out)
		items = append(slices.Concat(in, out), items...)
	}
	items, werr = respResolveRefs(items, prior, hist)
	return items, prior, werr
}

// respPrompt maps the prompt in the order the cache sees it (tools,
// instructions, input items) into req and the prefix.
func respPrompt(w *respWireRequest, items []json.RawMessage, prior int, d *respDecoded, req *llm.Request) (*prefixBuilder, *wireError) {
	pb := newPrefixBuilder(*w.Model, len(w.Tools)+2*len(items)+1)
	d.echo.tools = []json.RawMessage{}
	if werr := respTools(w.Tools, "tools", "", pb, d, req); werr != nil {
		return nil, werr
	}
	if w.Instructions != nil && *w.Instructions != "" {
		req.System = *w.Instructions
		pb.begin()
		pb.str("instructions")
		pb.str(*w.Instructions)
		pb.end(systemTokens(*w.Instructions), 0)
	}
	return pb, respItems(items, prior, req, pb, d)
}

// respConversation answers a conversation (an id, or {id}) as the API
// answers one it does not hold: the fake has no Conversations API, so it
// holds none, and continuing one without its items would silently drop
// them.
func respConversation(raw json.RawMessage) *wireError {
	if isNull(raw) {
		return nil
	}
	var id string
	if json.Unmarshal(raw, &id) != nil {
		var obj struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &obj) != nil {
			return oaiInvalid("conversation", "invalid_type", "Invalid type for 'conversation': expected one of a string or an object.")
		}
		id = obj.ID
	}
	msg := fmt.Sprintf("Conversation with id '%s' not found.", id)
	return &wireError{status: 404, kind: errNotFound, msg: msg, oaiMsg: msg, oaiParam: "conversation"}
}

// respOptions validates the settings around the prompt into d and req.
func respOptions(w *respWireRequest, d *respDecoded, req *llm.Request) *wireError {
	d.stream = w.Stream != nil && *w.Stream
	if w.StreamOptions != nil && !d.stream {
		return oaiInvalid("stream_options", "invalid_value", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	if t := w.Temperature; t != nil && (*t < 0 || *t > 2) {
		return oaiInvalid("temperature", "decimal_above_max_value", "Invalid 'temperature': expected a value between 0 and 2, but got %v instead.", *t)
	}
	if n := w.MaxOutputTokens; n != nil {
		// The Responses API's floor is 16, not Chat Completions' 1.
		if *n < 16 {
			return oaiInvalid("max_output_tokens", "integer_below_min_value", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", *n)
		}
		d.maxTokens = int(*n)
		req.MaxTokens = int(*n)
	}
	if w.PromptCacheRetention != nil && *w.PromptCacheRetention == "24h" {
		d.retention = ttl24h
	}
	for i, inc := range w.Include {
		if !slices.Contains(respIncludables, inc) {
			return oaiInvalid(fmt.Sprintf("include[%d]", i), "invalid_value", "Invalid value: '%s'. Supported values are: %s.", inc, quoteList(respIncludables))
		}
		d.encrypted = d.encrypted || inc == "reasoning.encrypted_content"
	}
	if werr := respToolChoice(w.ToolChoice, req); werr != nil {
		return werr
	}
	if w.ParallelToolCalls != nil && !*w.ParallelToolCalls {
		req.ToolChoice.DisableParallel = true
	}
	if werr := respReasoning(w.Reasoning, d); werr != nil {
		return werr
	}
	if werr := respText(w.Text, d); werr != nil {
		return werr
	}
	respEchoOf(w, d)
	return nil
}

// respIncludables are the values include takes (openai-go's
// ResponseIncludable).
var respIncludables = []string{
	"file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
	"message.input_image.image_url", "computer_call_output.output.image_url",
	"code_interpreter_call.outputs", "reasoning.encrypted_content", "message.output_text.logprobs",
}

// quoteList renders values as the API lists them: 'a', 'b', and 'c'.
func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = "'" + v + "'"
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + ", and " + q[len(q)-1]
}

// respEchoOf keeps what the response object repeats, with the API's
// defaults for what the request left out.
func respEchoOf(w *respWireRequest, d *respDecoded) {
	e := &d.echo
	e.instructions, e.maxOutput, e.previous = w.Instructions, w.MaxOutputTokens, w.PreviousResponseID
	// background: true is answered at once, already completed, which a
	// client polling GET until the status is final accepts.
	e.background = w.Background != nil && *w.Background
	e.parallel = w.ParallelToolCalls == nil || *w.ParallelToolCalls
	e.temperature, e.topP = 1, 1
	if w.Temperature != nil {
		e.temperature = *w.Temperature
	}
	if w.TopP != nil {
		e.topP = *w.TopP
	}
	e.toolChoice = json.RawMessage(`"auto"`)
	if !isNull(w.ToolChoice) {
		e.toolChoice = w.ToolChoice
	}
	e.metadata = json.RawMessage(`{}`)
	if !isNull(w.Metadata) {
		e.metadata = w.Metadata
	}
	e.truncation = "disabled"
	var tr string
	if json.Unmarshal(w.Truncation, &tr) == nil && tr != "" {
		e.truncation = tr
	}
	e.promptCacheRetain, e.user = w.PromptCacheRetention, w.User
}

// respReasoning reads reasoning: {effort, summary, generate_summary}.
func respReasoning(raw json.RawMessage, d *respDecoded) *wireError {
	if isNull(raw) {
		return nil
	}
	var r struct {
		Effort          *string         `json:"effort"`
		Summary         *string         `json:"summary"`
		GenerateSummary *string         `json:"generate_summary"`
		Context         json.RawMessage `json:"context"`
		Mode            json.RawMessage `json:"mode"`
	}
	if werr := respStrict(raw, &r, "reasoning"); werr != nil {
		return werr
	}
	if e := r.Effort; e != nil && !slices.Contains(respEfforts, *e) {
		return oaiInvalid("reasoning.effort", "invalid_value", "Invalid value: '%s'. Supported values are: %s.", *e, quoteList(respEfforts))
	}
	sum := r.Summary
	if sum == nil {
		sum = r.GenerateSummary // the deprecated spelling
	}
	if sum != nil && !slices.Contains(respSummaries, *sum) {
		return oaiInvalid("reasoning.summary", "invalid_value", "Invalid value: '%s'. Supported values are: %s.", *sum, quoteList(respSummaries))
	}
	if sum != nil {
		d.summary = *sum
	}
	d.echo.reasoningEffort, d.echo.reasoningSummary = r.Effort, sum
	return nil
}

var (
	respEfforts   = []string{"none", "minimal", "low", "medium", "high", "xhigh"}
	respSummaries = []string{"auto", "concise", "detailed"}
)

// respText reads text: {format, verbosity}; a json_schema format needs a
// name and a schema.
func respText(raw json.RawMessage, d *respDecoded) *wireError {
	d.echo.text = json.RawMessage(`{"format":{"type":"text"},"verbosity":"medium"}`)
	if isNull(raw) {
		return nil
	}
	var t struct {
		Format *struct {
			Type        string          `json:"type"`
			Name        *string         `json:"name"`
			Schema      json.RawMessage `json:"schema"`
			Strict      json.RawMessage `json:"strict"`
			Description json.RawMessage `json:"description"`
		} `json:"format"`
		Verbosity json.RawMessage `json:"verbosity"`
	}
	if werr := respStrict(raw, &t, "text"); werr != nil {
		return werr
	}
	d.echo.text = raw
	if t.Format == nil {
		return nil
	}
	switch t.Format.Type {
	case "text":
	case "json_object":
		d.schema, d.jsonObject = jsonObjectSchema, true
	case "json_schema":
		if t.Format.Name == nil {
			return oaiInvalid("text.format.name", "missing_required_parameter", "Missing required parameter: 'text.format.name'.")
		}
		if isNull(t.Format.Schema) {
			return oaiInvalid("text.format.schema", "missing_required_parameter", "Missing required parameter: 'text.format.schema'.")
		}
		// strict is a boolean or null, false by default (openai-openapi's
		// TextResponseFormatJsonSchema).
		strict := string(t.Format.Strict) == "true"
		if !isNull(t.Format.Strict) && !strict && string(t.Format.Strict) != "false" {
			return oaiInvalid("text.format.strict", "invalid_type", "Invalid type for 'text.format.strict': expected a boolean.")
		}
		if werr := respCheckSchema(*t.Format.Name, t.Format.Schema, strict); werr != nil {
			return werr
		}
		d.schema = t.Format.Schema
	default:
		return oaiInvalid("text.format.type", "invalid_value", "Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", t.Format.Type)
	}
	return nil
}

// respStrict decodes raw into v as decodeStrict does, wording a problem
// with the field's full path (path is where raw sits in the body).
func respStrict(raw json.RawMessage, v any, path string) *wireError {
	if p := decodeStrict(raw, v); p != nil {
		return respDecodeError(p, path)
	}
	return nil
}

// respDecodeError words a decode problem as the Responses API does: an
// unknown field is an "Unknown parameter" naming its full path.
func respDecodeError(p *decodeProblem, path string) *wireError {
	p = p.at(path)
	switch {
	case p.syntax != "":
		return oaiDecodeError(p)
	case p.unknown != "":
		return oaiInvalid(p.unknown, "unknown_parameter", "Unknown parameter: '%s'.", p.unknown)
	case p.want != "" && p.field == "":
		return oaiInvalid("", "invalid_type", "Invalid type for request body: expected an object.")
	case p.want != "":
		return oaiInvalid(p.field, "invalid_type", "Invalid type for '%s': expected %s.", p.field, article(p.want))
	}
	return oaiInvalid(path, "", "Invalid request body: %s", p.other)
}

// article puts "a" or "an" before a JSON kind ("an integer", "a string").
func article(kind string) string {
	if strings.ContainsAny(kind[:1], "aeiou") {
		return "an " + kind
	}
	return "a " + kind
}

// respToolChoice maps tool_choice: "auto", "none", "required", or an
// object naming a function (or custom tool), allowed tools or a hosted
// tool type.
func respToolChoice(raw json.RawMessage, req *llm.Request) *wireError {
	if isNull(raw) {
		return nil
	}
	if raw[0] == '"' {
		return oaiToolChoiceMode(raw, req)
	}
	var tc struct {
		Type  string          `json:"type"`
		Name  string          `json:"name"`
		Mode  json.RawMessage `json:"mode"`
		Tools json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(raw, &tc) != nil {
		return oaiInvalid("tool_choice", "invalid_type", "Invalid type for 'tool_choice': expected one of a string or object.")
	}
	switch tc.Type {
	case "function", "custom":
		if tc.Name == "" {
			return oaiInvalid("tool_choice.name", "missing_required_parameter", "Missing required parameter: 'tool_choice.name'.")
		}
		req.ToolChoice = llm.ToolChoice{Type: "tool", Name: tc.Name}
	case "allowed_tools":
		req.ToolChoice.Type = "auto"
		var mode string
		if json.Unmarshal(tc.Mode, &mode) == nil && mode == "required" {
			req.ToolChoice.Type = "any"
		}
	case "":
		return oaiInvalid("tool_choice.type", "missing_required_parameter", "Missing required parameter: 'tool_choice.type'.")
	default:
		if !slices.Contains(respHostedTools, tc.Type) {
			return oaiInvalid("tool_choice.type", "invalid_value", "Invalid value: '%s'. Supported values are: 'function', 'custom', 'allowed_tools', and the hosted tool types.", tc.Type)
		}
		req.ToolChoice.Type = "auto" // a hosted tool the fake does not run
	}
	return nil
}

// respHostedTools are the built-in tool types the API runs itself. The
// fake accepts them and offers the Responder only function and custom
// tools.
var respHostedTools = []string{
	"web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11",
	"file_search", "code_interpreter", "image_generation", "mcp", "local_shell", "shell",
	"computer_use_preview", "computer", "apply_patch", "tool_search",
}

// respWireFunction is a function tool in the flat Responses shape.
type respWireFunction struct {
	Type           string          `json:"type"`
	Name           *string         `json:"name"`
	Description    *string         `json:"description"`
	Parameters     json.RawMessage `json:"parameters"`
	Strict         *bool           `json:"strict"`
	Async          json.RawMessage `json:"async"`
	DeferLoading   json.RawMessage `json:"defer_loading"`
	AllowedCallers json.RawMessage `json:"allowed_callers"`
	OutputSchema   json.RawMessage `json:"output_schema"`
}

// respFunction decodes one function (or custom) tool and renders it as the
// response echoes it: description null when absent, strict as sent.
func respFunction(raw json.RawMessage, path, typ string) (llm.ToolSpec, json.RawMessage, *wireError) {
	var f respWireFunction
	var custom struct {
		Type        string          `json:"type"`
		Name        *string         `json:"name"`
		Description *string         `json:"description"`
		Format      json.RawMessage `json:"format"`
		DeferLoad   json.RawMessage `json:"defer_loading"`
	}
	var werr *wireError
	if typ == "custom" {
		werr = respStrict(raw, &custom, path)
		f.Name, f.Description = custom.Name, custom.Description
	} else {
		werr = respStrict(raw, &f, path)
	}
	if werr != nil {
		return llm.ToolSpec{}, nil, werr
	}
	if f.Name == nil || *f.Name == "" {
		return llm.ToolSpec{}, nil, oaiInvalid(path+".name", "missing_required_parameter", "Missing required parameter: '%s.name'.", path)
	}
	spec := llm.ToolSpec{Name: *f.Name, InputSchema: f.Parameters}
	if f.Description != nil {
		spec.Description = *f.Description
	}
	if typ == "custom" {
		return spec, raw, nil
	}
	echo := mustJSON(struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	}{"function", spec.Name, f.Description, nullIfEmpty(f.Parameters), f.Strict})
	return spec, echo, nil
}

// nullIfEmpty is raw, or JSON null when raw is absent.
func nullIfEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return jsonNull
	}
	return raw
}
