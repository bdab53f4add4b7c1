// Package llm holds deputy's provider-neutral conversation types and the
// Model interface every provider implements.
//
// Two rules shape this package:
//
//   - A tool call's input stays the exact JSON bytes the model produced
//     (Block.Input), from the provider to storage and back. Re-marshalling a
//     decoded map reorders keys and breaks byte-stable prompt-cache prefixes.
//     Arguments that are not a JSON object are kept too, as text
//     (Block.InvalidInput), never as an invalid json.RawMessage: see
//     ToolCall.
//   - A block deputy does not interpret (thinking, redacted thinking, images,
//     types that do not exist yet) is carried as its raw provider JSON
//     (Block.Raw) and sent back untouched.
//
// Streaming reaches callers through exactly one mechanism: the callback
// passed to Model.Generate. It is called synchronously, in order, from the
// goroutine running Generate, and may be nil.
package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Role is who wrote a message.
type Role string

// The two conversation roles. The system prompt travels in Request.System.
const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// Block types deputy interprets. Any other type is carried in Block.Raw.
const (
	TypeText       = "text"
	TypeToolUse    = "tool_use"
	TypeToolResult = "tool_result"
)

// Block is one piece of a message. It is a flat struct rather than an
// interface so the agent loop can build transcripts without an allocation per
// block; which fields are meaningful depends on Type:
//
//	text:        Text
//	tool_use:    ID, Name, Input (raw JSON object, never re-marshalled),
//	             or InvalidInput (arguments that were not a JSON object)
//	tool_result: ToolUseID, Text (the result content), IsError
//	other:       Raw (the provider's exact JSON for the block)
type Block struct {
	Type  string          `json:"type"`
	Text  string          `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// InvalidInput is a tool call's arguments exactly as the model sent
	// them when they were not a JSON object (see ToolCall); Input is then
	// empty. It is a string, not a json.RawMessage, because a RawMessage
	// holding invalid JSON fails every json.Marshal of the block: of a
	// durable step's output, of a stored transcript.
	InvalidInput string          `json:"invalid_input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	Raw          json.RawMessage `json:"raw,omitempty"`
}

// Text returns a text block.
func Text(s string) Block { return Block{Type: TypeText, Text: s} }

// ToolUse returns a tool_use block; input must be a JSON object.
func ToolUse(id, name string, input json.RawMessage) Block {
	return Block{Type: TypeToolUse, ID: id, Name: name, Input: input}
}

// ToolCall returns the tool_use block of a call whose arguments arrived as
// args, the exact bytes of the wire: the OpenAI wire's arguments string, the
// Anthropic wire's input JSON or its concatenated input_json_delta
// fragments. Providers build every call they decode with it.
//
// Arguments that are a JSON object become Input, byte for byte. Empty or
// blank arguments mean no arguments: Input is {}. Anything else (JSON cut
// short, a model's prose, a JSON value that is not an object) is kept
// verbatim in InvalidInput, for three reasons: the call cannot run (the
// loop answers it with an error result quoting what was sent, so the model
// can retry; see Block.InputError); a model served by Ollama, vLLM or
// llama.cpp sends such calls routinely, so it must not fail the run; and
// the block must still marshal, which an invalid json.RawMessage does not.
// Sending the call back is the provider's business: tool_use.input must be
// an object on the Anthropic wire, so {} goes back there; see the OpenAI
// provider for what its wire gets.
func ToolCall(id, name string, args []byte) Block {
	b := Block{Type: TypeToolUse, ID: id, Name: name}
	switch {
	case isBlank(args):
		b.Input = json.RawMessage(`{}`)
	case isObject(args):
		b.Input = args
	default:
		b.InvalidInput = string(args)
	}
	return b
}

// isBlank reports whether b holds only JSON whitespace.
func isBlank(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return true
}

// isObject reports whether b is one valid JSON value that is an object.
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return json.Valid(b)
		}
		return false
	}
	return false
}

// Arguments returns a tool_use block's arguments as the model sent them:
// Input, or InvalidInput when they were not a JSON object.
func (b *Block) Arguments() string {
	if b.InvalidInput != "" {
		return b.InvalidInput
	}
	return string(b.Input)
}

// InputError says why a tool_use block's arguments cannot be used, or
// returns nil when they can (InvalidInput is empty). The message is for the
// model: the JSON syntax error, or what kind of value came instead of an
// object.
func (b *Block) InputError() error {
	if b.InvalidInput == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(b.InvalidInput), &v); err != nil {
		return fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	kind := "null"
	switch v.(type) {
	case string:
		kind = "a string"
	case float64:
		kind = "a number"
	case bool:
		kind = "a boolean"
	case []any:
		kind = "an array"
	case map[string]any:
		// Unreachable through ToolCall; a block built by hand may hold it.
		return nil
	}
	return fmt.Errorf("arguments must be a JSON object, not %s", kind)
}

// ToolResult returns a tool_result block answering the tool_use with id.
func ToolResult(toolUseID, content string, isError bool) Block {
	return Block{Type: TypeToolResult, ToolUseID: toolUseID, Text: content, IsError: isError}
}

// Opaque returns a block deputy carries without interpreting, such as a
// thinking block. raw is the provider's JSON for the whole block.
func Opaque(typ string, raw json.RawMessage) Block { return Block{Type: typ, Raw: raw} }

// Message is one turn of the conversation.
type Message struct {
	Role    Role    `json:"role"`
	Content []Block `json:"content"`
}

// UserText returns a user message holding one text block.
func UserText(s string) Message { return Message{Role: User, Content: []Block{Text(s)}} }

// Text joins the message's text blocks.
func (m Message) Text() string {
	var b strings.Builder
	var only string // the common case, one text block, needs no copy
	n := 0
	for i := range m.Content {
		if m.Content[i].Type != TypeText {
			continue
		}
		if n++; n == 1 {
			only = m.Content[i].Text
			continue
		}
		if n == 2 {
			b.WriteString(only)
		}
		b.WriteString(m.Content[i].Text)
	}
	if n <= 1 {
		return only
	}
	return b.String()
}

// ToolUses returns the message's tool_use blocks in order.
func (m Message) ToolUses() []Block {
	var out []Block
	for i := range m.Content {
		if m.Content[i].Type == TypeToolUse {
			out = append(out, m.Content[i])
		}
	}
	return out
}

// ToolSpec describes a tool offered to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolChoice says whether and which tool the model must call.
type ToolChoice struct {
	// Type is "auto" (the default when empty), "any" (some tool), "none" or
	// "tool" (the tool named by Name).
	Type string `json:"type,omitempty"`
	Name string `json:"name,omitempty"`
	// DisableParallel asks the model for at most one tool call per turn.
	DisableParallel bool `json:"disable_parallel_tool_use,omitempty"`
}

// Request is one call to a model.
type Request struct {
	Model         string     `json:"model"`
	System        string     `json:"system,omitempty"`
	Messages      []Message  `json:"messages"`
	Tools         []ToolSpec `json:"tools,omitempty"`
	ToolChoice    ToolChoice `json:"tool_choice,omitzero"`
	MaxTokens     int        `json:"max_tokens,omitempty"`
	Temperature   *float64   `json:"temperature,omitempty"`
	StopSequences []string   `json:"stop_sequences,omitempty"`
}

// StopReason says why the model stopped. Providers map their own values onto
// these; a value deputy does not know is passed through unchanged.
type StopReason string

// Stop reasons of the Anthropic Messages API, which deputy uses as its
// vocabulary (OpenAI's finish_reason values are mapped onto them).
const (
	StopEndTurn      StopReason = "end_turn"
	StopToolUse      StopReason = "tool_use"
	StopMaxTokens    StopReason = "max_tokens"
	StopSequence     StopReason = "stop_sequence"
	StopPauseTurn    StopReason = "pause_turn"
	StopRefusal      StopReason = "refusal"
	StopContextLimit StopReason = "model_context_window_exceeded"
)

// Usage counts the tokens of one or more model calls.
//
// InputTokens follows Anthropic's meaning: input tokens that were neither read
// from nor written to the prompt cache. The whole prompt is
// InputTokens+CacheReadTokens+CacheWriteTokens. Providers that report the
// whole prompt (OpenAI's prompt_tokens includes cached tokens) subtract.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// CacheWrite1hTokens are the part of CacheWriteTokens written to a
	// one-hour cache (Anthropic's ttl "1h"), which is priced apart from a
	// five-minute write (cost.Price.CacheWrite1h). Already counted in
	// CacheWriteTokens, so Prompt and Total do not add it again.
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens,omitempty"`
}

// Add accumulates o into u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.CacheWrite1hTokens += o.CacheWrite1hTokens
}

// Prompt is the whole prompt size: cached, cache-written and uncached input.
func (u Usage) Prompt() int64 { return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens }

// Total is every token counted: the whole prompt plus the output.
func (u Usage) Total() int64 { return u.Prompt() + u.OutputTokens }

// Response is a model's complete answer to one Request.
type Response struct {
	ID           string     `json:"id,omitempty"`
	Model        string     `json:"model,omitempty"`
	Content      []Block    `json:"content"`
	StopReason   StopReason `json:"stop_reason"`
	StopSequence string     `json:"stop_sequence,omitempty"`
	Usage        Usage      `json:"usage"`
}

// Message returns the response as an assistant message.
func (r *Response) Message() Message { return Message{Role: Assistant, Content: r.Content} }

// Delta is one streamed fragment of a response.
type Delta struct {
	// Index is the content block the fragment belongs to.
	Index int
	// Type is the block's type: text (Text is a text fragment), tool_use
	// (Text is a fragment of the input JSON; ID and Name are set on the
	// block's first delta), or another type such as thinking (Text is the
	// fragment, when the provider streams one).
	Type string
	Text string
	ID   string
	Name string
}

// Model generates one response. Implementations must be safe for concurrent
// use. stream, when not nil, receives deltas as they arrive; the returned
// Response is complete whether or not stream is nil.
type Model interface {
	Generate(ctx context.Context, req *Request, stream func(Delta)) (*Response, error)
}

// ModelFunc adapts a function to the Model interface.
type ModelFunc func(ctx context.Context, req *Request, stream func(Delta)) (*Response, error)

// Generate calls f.
func (f ModelFunc) Generate(ctx context.Context, req *Request, stream func(Delta)) (*Response, error) {
	return f(ctx, req, stream)
}

// APIError is an error answered by a model API (or by the fake server). It
// never carries request headers, so credentials cannot leak through it.
type APIError struct {
	Provider   string
	StatusCode int
	Type       string // the provider's error type, e.g. rate_limit_error
	Message    string
	RequestID  string
	RetryAfter time.Duration // zero when the provider gave none
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%s: %d %s: %s", e.Provider, e.StatusCode, e.Type, e.Message)
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// Temporary reports whether retrying the same request may succeed.
func (e *APIError) Temporary() bool {
	switch e.StatusCode {
	case 408, 409, 429, 500, 502, 503, 504, 529:
		return e.Type != "insufficient_quota"
	}
	return e.StatusCode > 500
}
