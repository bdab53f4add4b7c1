package fake

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/deputy-run/deputy/llm"
)

// The Anthropic Messages API: request decoding and validation.

// anthWireRequest is a Messages API request body. Every top-level field the
// official SDKs can send (including the beta ones) is declared, so anything
// else is refused as the real API refuses it. Fields the fake has no use
// for are kept raw and ignored.
type anthWireRequest struct {
	Model         *string           `json:"model"`
	MaxTokens     *int64            `json:"max_tokens"`
	Messages      []json.RawMessage `json:"messages"`
	System        json.RawMessage   `json:"system"`
	Tools         []json.RawMessage `json:"tools"`
	ToolChoice    json.RawMessage   `json:"tool_choice"`
	StopSequences []string          `json:"stop_sequences"`
	Stream        *bool             `json:"stream"`
	Temperature   *float64          `json:"temperature"`
	TopP          *float64          `json:"top_p"`
	TopK          *int64            `json:"top_k"`
	Thinking      json.RawMessage   `json:"thinking"`
	CacheControl  json.RawMessage   `json:"cache_control"`

	Metadata            json.RawMessage `json:"metadata"`
	ServiceTier         json.RawMessage `json:"service_tier"`
	Container           json.RawMessage `json:"container"`
	InferenceGeo        json.RawMessage `json:"inference_geo"`
	Speed               json.RawMessage `json:"speed"`
	Diagnostics         json.RawMessage `json:"diagnostics"`
	OutputConfig        json.RawMessage `json:"output_config"`
	OutputFormat        json.RawMessage `json:"output_format"`
	ContextManagement   json.RawMessage `json:"context_management"`
	MCPServers          json.RawMessage `json:"mcp_servers"`
	Compaction          json.RawMessage `json:"compaction"`
	Fallbacks           json.RawMessage `json:"fallbacks"`
	FallbackCreditToken json.RawMessage `json:"fallback_credit_token"`
	Thread              json.RawMessage `json:"thread"`
	BillingPolicy       json.RawMessage `json:"billing_policy"`
}

// countTokensRefuses lists the Messages fields count_tokens does not take.
func (r *anthWireRequest) countTokensRefuses() string {
	switch {
	case r.MaxTokens != nil:
		return "max_tokens"
	case r.Stream != nil:
		return "stream"
	case r.StopSequences != nil:
		return "stop_sequences"
	case r.Temperature != nil:
		return "temperature"
	case r.TopP != nil:
		return "top_p"
	case r.TopK != nil:
		return "top_k"
	case r.Metadata != nil:
		return "metadata"
	case r.ServiceTier != nil:
		return "service_tier"
	case r.Container != nil:
		return "container"
	case r.InferenceGeo != nil:
		return "inference_geo"
	case r.Diagnostics != nil:
		return "diagnostics"
	case r.Fallbacks != nil:
		return "fallbacks"
	case r.FallbackCreditToken != nil:
		return "fallback_credit_token"
	case r.Thread != nil:
		return "thread"
	}
	return ""
}

// anthWireBlock is any content block; which fields matter depends on Type.
// Which fields a block may carry is checked first (anthBlockCheck).
type anthWireBlock struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	IsError      bool            `json:"is_error"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type anthWireTool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type anthCacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

type anthToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// anthDecoded is a decoded, validated request.
type anthDecoded struct {
	req    *llm.Request
	stream bool
	// elems is the cacheable prefix (tools, system, messages) with
	// breakpoints marked.
	elems []prefixElem
	// maxTokens is -1 for count_tokens, which has none.
	maxTokens int
	// schema is the structured-output JSON schema the answer must meet.
	schema json.RawMessage
	// contextManagement is set when the request asked for context edits,
	// which the response then reports (applied_edits).
	contextManagement bool
	// thinkingOmitted is set when thinking's display is "omitted".
	thinkingOmitted bool
	// thread is the request's message-thread turn, or nil.
	thread *threadTurn
}

// maxBreakpoints is the Messages API's limit on cache_control markers.
const maxBreakpoints = 4

// decodeAnthropic decodes and validates a body as the Messages API does.
// countTokens selects the count_tokens variant (no max_tokens, no stream).
// The steps check in one fixed order, so a body with several faults is
// always refused for the same one.
func decodeAnthropic(body []byte, countTokens bool, threads *threadStore) (*anthDecoded, *wireError) {
	var w anthWireRequest
	if p := decodeStrict(body, &w); p != nil {
		return nil, anthDecodeError(p)
	}
	d, werr := anthRequired(&w, countTokens)
	if werr != nil {
		return nil, werr
	}
	if !isNull(w.Thread) && threads != nil {
		if d.thread, werr = threads.begin(w.Thread, &w); werr != nil {
			return nil, werr
		}
	}
	if werr := anthDecodeBody(&w, d); werr != nil {
		d.thread.abandon()
		return nil, werr
	}
	return d, nil
}

// anthDecodeBody decodes what follows the required fields (and, on a
// thread, the held conversation laid before the request's messages).
func anthDecodeBody(w *anthWireRequest, d *anthDecoded) *wireError {
	if w.Messages == nil {
		return invalid("messages: Field required")
	}
	if len(w.Messages) == 0 {
		return invalid("messages: List should have at least 1 item after validation, not 0")
	}
	req := &llm.Request{Model: *w.Model, Temperature: w.Temperature, StopSequences: w.StopSequences}
	if w.MaxTokens != nil {
		req.MaxTokens = int(*w.MaxTokens)
	}
	var werr *wireError
	if werr = anthOptions(w, d.maxTokens, req); werr != nil {
		return werr
	}
	d.thinkingOmitted = anthThinkingOmitted(w.Thinking)
	if d.schema, werr = anthOutput(w); werr != nil {
		return werr
	}
	if d.contextManagement, werr = anthContextManagement(w); werr != nil {
		return werr
	}
	pb := newPrefixBuilder(*w.Model, len(w.Tools)+2*len(w.Messages)+2)
	conv, werr := anthPrompt(w, req, pb)
	if werr != nil {
		return werr
	}
	if werr := anthPairing(req.Messages, conv.wireIndex); werr != nil {
		return werr
	}
	d.req, d.elems = req, pb.elems
	return nil
}

// anthRequired checks the fields a request cannot do without (and, for
// count_tokens, refuses the ones it does not take), starting the decoded
// request with its limit and streaming.
func anthRequired(w *anthWireRequest, countTokens bool) (*anthDecoded, *wireError) {
	if countTokens {
		if f := w.countTokensRefuses(); f != "" {
			return nil, invalid("%s: Extra inputs are not permitted", f)
		}
	}
	if w.Model == nil || *w.Model == "" {
		return nil, invalid("model: Field required")
	}
	d := &anthDecoded{maxTokens: -1}
	if !countTokens {
		if w.MaxTokens == nil {
			return nil, invalid("max_tokens: Field required")
		}
		if *w.MaxTokens < 0 {
			return nil, invalid("max_tokens: Input should be greater than or equal to 0")
		}
		d.maxTokens = int(*w.MaxTokens)
		d.stream = w.Stream != nil && *w.Stream
	}
	return d, nil
}

// anthOptions validates the settings around the prompt: temperature,
// thinking (whose budget must fit under maxTokens, -1 for none) and tool
// choice, which lands in req.
func anthOptions(w *anthWireRequest, maxTokens int, req *llm.Request) *wireError {
	if t := w.Temperature; t != nil && *t < 0 {
		return invalid("temperature: Input should be greater than or equal to 0")
	} else if t != nil && *t > 1 {
		return invalid("temperature: Input should be less than or equal to 1")
	}
	if werr := anthThinkingCheck(w.Thinking, maxTokens); werr != nil {
		return werr
	}
	return anthToolChoiceDecode(w.ToolChoice, req)
}

// anthPrompt decodes the cacheable prompt (tools, system, messages, in
// the order the prefix hashes them) into req and pb, and holds the
// cache_control markers found on the way to the API's limit.
func anthPrompt(w *anthWireRequest, req *llm.Request, pb *prefixBuilder) (*anthConversation, *wireError) {
	bp := &anthBreakpoints{}
	tools, werr := anthTools(w.Tools, pb, bp)
	if werr != nil {
		return nil, werr
	}
	req.Tools = tools
	if req.System, werr = anthSystem(w.System, pb, bp); werr != nil {
		return nil, werr
	}
	conv, werr := anthMessages(w.Messages, req, pb, bp)
	if werr != nil {
		return nil, werr
	}
	if !isNull(w.CacheControl) {
		// A top-level marker caches everything up to the last element.
		ttl, werr := bp.mark(w.CacheControl, "cache_control")
		if werr != nil {
			return nil, werr
		}
		pb.markLast(ttl)
	}
	if bp.n > maxBreakpoints {
		return nil, invalid("A maximum of %d blocks with cache_control may be provided. Found %d.", maxBreakpoints, bp.n)
	}
	return conv, nil
}

// anthBreakpoints counts the cache_control markers a request carries,
// which the API limits to maxBreakpoints wherever they are.
type anthBreakpoints struct{ n int }

// mark validates one cache_control value at path and counts it if set.
func (bp *anthBreakpoints) mark(raw json.RawMessage, path string) (time.Duration, *wireError) {
	ttl, werr := anthCacheTTL(raw, path)
	if ttl > 0 {
		bp.n++
	}
	return ttl, werr
}

// anthTools decodes the tool definitions, each one prefix element: a
// custom tool needs a name and a schema, a server tool only its type.
func anthTools(tools []json.RawMessage, pb *prefixBuilder, bp *anthBreakpoints) ([]llm.ToolSpec, *wireError) {
	var specs []llm.ToolSpec
	for i, raw := range tools {
		var t anthWireTool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, invalid("tools.%d: Input should be a valid dictionary", i)
		}
		ttl, werr := bp.mark(t.CacheControl, fmt.Sprintf("tools.%d", i))
		if werr != nil {
			return nil, werr
		}
		spec, werr := anthToolSpec(raw, fmt.Sprintf("tools.%d", i))
		if werr != nil {
			return nil, werr
		}
		pb.begin()
		if t.Type == "" || t.Type == "custom" {
			pb.str(t.Name)
			pb.str(t.Description)
			pb.raw(t.InputSchema)
		} else {
			// A server tool (web search, bash, ...): no schema of its own;
			// its whole definition is the prefix element.
			pb.raw(raw)
		}
		pb.end(toolTokens(&spec), ttl)
		specs = append(specs, spec)
	}
	return specs, nil
}

// anthToolSpec reads one tool definition at path: a custom tool needs a
// name and a schema, a server tool (web search, bash, ...) only its type.
func anthToolSpec(raw json.RawMessage, path string) (llm.ToolSpec, *wireError) {
	var t anthWireTool
	if err := json.Unmarshal(raw, &t); err != nil || raw[0] != '{' {
		return llm.ToolSpec{}, invalid("%s: Input should be a valid dictionary", path)
	}
	spec := llm.ToolSpec{Name: t.Name, Description: t.Description}
	if t.Type == "" || t.Type == "custom" {
		if t.Name == "" {
			return spec, invalid("%s.custom.name: Field required", path)
		}
		if isNull(t.InputSchema) {
			return spec, invalid("%s.custom.input_schema: Field required", path)
		}
		spec.InputSchema = t.InputSchema
	}
	return spec, nil
}

// anthDecodeError words a decode problem as the Messages API does.
func anthDecodeError(p *decodeProblem) *wireError {
	switch {
	case p.syntax != "":
		return invalid("The request body is not valid JSON: %s: %s", p.syntax, p.position())
	case p.unknown != "":
		return invalid("%s: Extra inputs are not permitted", p.unknown)
	case p.want != "" && p.field == "":
		return invalid("Input should be a valid %s", p.want)
	case p.want != "":
		return invalid("%s: Input should be a valid %s", p.field, p.want)
	}
	return invalid("invalid request body: %s", p.other)
}

// anthCacheTTL validates a cache_control value; 0 means none.
func anthCacheTTL(raw json.RawMessage, path string) (time.Duration, *wireError) {
	if isNull(raw) {
		return 0, nil
	}
	var cc anthCacheControl
	if err := json.Unmarshal(raw, &cc); err != nil {
		return 0, invalid("%s.cache_control: Input should be a valid dictionary", path)
	}
	if cc.Type != "ephemeral" {
		return 0, invalid("%s.cache_control.type: Input should be 'ephemeral'", path)
	}
	switch cc.TTL {
	case "", "5m":
		return ttl5m, nil
	case "1h":
		return ttl1h, nil
	}
	return 0, invalid("%s.cache_control.ttl: Input should be '5m' or '1h'", path)
}

func anthToolChoiceDecode(raw json.RawMessage, req *llm.Request) *wireError {
	if isNull(raw) {
		return nil
	}
	var tc anthToolChoice
	if err := json.Unmarshal(raw, &tc); err != nil {
		return invalid("tool_choice: Input should be a valid dictionary")
	}
	switch tc.Type {
	case "auto", "any", "none":
	case "tool":
		if tc.Name == "" {
			return invalid("tool_choice.tool.name: Field required")
		}
	default:
		return invalid("tool_choice: Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", tc.Type)
	}
	req.ToolChoice = llm.ToolChoice{Type: tc.Type, Name: tc.Name, DisableParallel: tc.DisableParallelToolUse}
	return nil
}

// anthSystem decodes system as a string or an array of text blocks; each
// text is one prefix element. Multiple texts are joined with newlines in
// llm.Request.System.
func anthSystem(raw json.RawMessage, pb *prefixBuilder, bp *anthBreakpoints) (string, *wireError) {
	if isNull(raw) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalid("system: Input should be a valid string")
		}
		pb.begin()
		pb.str("system")
		pb.str(s)
		pb.end(systemTokens(s), 0)
		return s, nil
	}
	var blocks []anthWireBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", invalid("system: Input should be a valid list")
	}
	texts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != llm.TypeText {
			return "", invalid("system.%d.type: Input should be 'text'", i)
		}
		if b.Text == nil {
			return "", invalid("system.%d.text: Field required", i)
		}
		ttl, werr := bp.mark(b.CacheControl, fmt.Sprintf("system.%d", i))
		if werr != nil {
			return "", werr
		}
		pb.begin()
		pb.str("system")
		pb.str(*b.Text)
		pb.end(systemTokens(*b.Text), ttl)
		texts = append(texts, *b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// anthMessage decodes message i; each content block is a prefix element,
// the first one also carrying the message's framing tokens.
func anthMessage(i int, m anthWireMessage, pb *prefixBuilder, bp *anthBreakpoints) (llm.Message, *wireError) {
	var msg llm.Message
	switch m.Role {
	case "user":
		msg.Role = llm.User
	case "assistant":
		msg.Role = llm.Assistant
	case "":
		return msg, invalid("messages.%d.role: Field required", i)
	default:
		return msg, invalid("messages.%d.role: Input should be 'user' or 'assistant'", i)
	}
	if isNull(m.Content) {
		return msg, invalid("messages.%d.content: Field required", i)
	}
	overhead := messageOverhead
	if m.Content[0] == '"' {
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			return msg, invalid("messages.%d.content: Input should be a valid string", i)
		}
		b := llm.Text(s)
		msg.Content = []llm.Block{b}
		pb.begin()
		pb.str(string(msg.Role))
		hashBlock(pb, &b)
		pb.end(overhead+llm.EstimateBlock(&b), 0)
		return msg, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(m.Content, &raws); err != nil {
		return msg, invalid("messages.%d.content: Input should be a valid list", i)
	}
	msg.Content = make([]llm.Block, 0, len(raws))
	for j, raw := range raws {
		path := fmt.Sprintf("messages.%d.content.%d", i, j)
		b, cc, werr := anthBlock(raw, path)
		if werr != nil {
			return msg, werr
		}
		ttl, werr := bp.mark(cc, path)
		if werr != nil {
			return msg, werr
		}
		pb.begin()
		if j == 0 {
			pb.str(string(msg.Role))
		}
		hashBlock(pb, &b)
		pb.end(overhead+llm.EstimateBlock(&b), ttl)
		overhead = 0
		msg.Content = append(msg.Content, b)
	}
	if len(raws) == 0 {
		// An empty content list still frames a message.
		pb.begin()
		pb.str(string(msg.Role))
		pb.end(overhead, 0)
	}
	return msg, nil
}

// anthBlock decodes one content block, returning its cache_control.
func anthBlock(raw json.RawMessage, path string) (llm.Block, json.RawMessage, *wireError) {
	var w anthWireBlock
	if err := json.Unmarshal(raw, &w); err != nil {
		return llm.Block{}, nil, invalid("%s: Input should be a valid dictionary", path)
	}
	if w.Type == "" {
		return llm.Block{}, nil, invalid("%s.type: Field required", path)
	}
	if werr := anthBlockCheck(raw, path, w.Type); werr != nil {
		return llm.Block{}, nil, werr
	}
	switch w.Type {
	case llm.TypeText:
		if w.Text == nil {
			return llm.Block{}, nil, invalid("%s.text.text: Field required", path)
		}
		return llm.Text(*w.Text), w.CacheControl, nil
	case llm.TypeToolUse:
		switch {
		case w.ID == "":
			return llm.Block{}, nil, invalid("%s.tool_use.id: Field required", path)
		case w.Name == "":
			return llm.Block{}, nil, invalid("%s.tool_use.name: Field required", path)
		case isNull(w.Input):
			return llm.Block{}, nil, invalid("%s.tool_use.input: Field required", path)
		case w.Input[0] != '{':
			return llm.Block{}, nil, invalid("%s.tool_use.input: Input should be a valid dictionary", path)
		}
		// Input keeps the exact bytes the client sent.
		return llm.ToolUse(w.ID, w.Name, w.Input), w.CacheControl, nil
	case llm.TypeToolResult:
		if w.ToolUseID == "" {
			return llm.Block{}, nil, invalid("%s.tool_result.tool_use_id: Field required", path)
		}
		text, opaque, werr := anthToolResultContent(w.Content, path)
		if werr != nil {
			return llm.Block{}, nil, werr
		}
		b := llm.ToolResult(w.ToolUseID, text, w.IsError)
		if opaque {
			// Images or documents in a result: keep the whole block too.
			b.Raw = raw
		}
		return b, w.CacheControl, nil
	}
	// thinking, redacted_thinking, image, document and server tool blocks
	// travel untouched.
	return llm.Opaque(w.Type, raw), w.CacheControl, nil
}

// anthToolResultContent reads a tool_result's content (a string or a list
// of blocks); its text blocks are joined, and opaque reports other blocks.
func anthToolResultContent(raw json.RawMessage, path string) (string, bool, *wireError) {
	if isNull(raw) {
		return "", false, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, invalid("%s.tool_result.content: Input should be a valid string", path)
		}
		return s, false, nil
	}
	var blocks []anthWireBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", false, invalid("%s.tool_result.content: Input should be a valid list", path)
	}
	var texts []string
	opaque := false
	for _, b := range blocks {
		if b.Type == llm.TypeText && b.Text != nil {
			texts = append(texts, *b.Text)
		} else {
			opaque = true
		}
	}
	return strings.Join(texts, "\n"), opaque, nil
}

// hashBlock adds a block's canonical content (everything but its
// cache_control) to the element being hashed.
func hashBlock(pb *prefixBuilder, b *llm.Block) {
	pb.str(b.Type)
	switch b.Type {
	case llm.TypeText:
		pb.str(b.Text)
	case llm.TypeToolUse:
		pb.str(b.ID)
		pb.str(b.Name)
		pb.raw(b.Input)
	case llm.TypeToolResult:
		pb.str(b.ToolUseID)
		pb.str(b.Text)
		if b.IsError {
			pb.str("error")
		}
		pb.raw(b.Raw)
	default:
		pb.raw(b.Raw)
	}
}

// anthPairing checks tool_use/tool_result pairing as the Messages API
// does: every tool_use in an assistant message needs a tool_result at the
// start of the next message, and every tool_result needs a tool_use in the
// message before it.
// wire maps msgs' indices to the request's (system messages are not in
// msgs), so errors name the message the client sent.
func anthPairing(msgs []llm.Message, wire []int) *wireError {
	for i := range msgs {
		m := &msgs[i]
		if m.Role == llm.User {
			var prev map[string]bool
			if i > 0 && msgs[i-1].Role == llm.Assistant {
				for _, b := range msgs[i-1].Content {
					if b.Type == llm.TypeToolUse {
						if prev == nil {
							prev = map[string]bool{}
						}
						prev[b.ID] = true
					}
				}
			}
			for j, b := range m.Content {
				if b.Type == llm.TypeToolResult && !prev[b.ToolUseID] {
					return invalid("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", wire[i], j, b.ToolUseID)
				}
			}
			continue
		}
		uses := m.ToolUses()
		if len(uses) == 0 {
			continue
		}
		answered := map[string]bool{}
		if i+1 < len(msgs) && msgs[i+1].Role == llm.User {
			for _, b := range msgs[i+1].Content {
				if b.Type != llm.TypeToolResult {
					break // results must lead the message
				}
				answered[b.ToolUseID] = true
			}
		}
		var missing []string
		for _, u := range uses {
			if !answered[u.ID] {
				missing = append(missing, u.ID)
			}
		}
		if len(missing) > 0 {
			return invalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", wire[i], strings.Join(missing, ", "))
		}
	}
	return nil
}
