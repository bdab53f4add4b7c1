// Package fake is deputy's stand-in for paid model APIs: a wire-faithful
// HTTP server speaking the Anthropic Messages and OpenAI Chat Completions
// protocols (JSON and SSE), and an in-process scripted model. Both are driven
// by the same scenario engine, so a scenario behaves the same over loopback
// HTTP and in process.
//
// The seam between the two halves is Responder: the server decodes and
// validates a wire request into an llm.Request, asks the Responder what to
// answer, and encodes the Reply in the provider's wire format, applying
// latency and faults.
package fake

import (
	"time"

	"github.com/deputy-run/deputy/llm"
)

// Provider names a wire protocol the fake speaks.
type Provider string

// The wire protocols.
const (
	Anthropic Provider = "anthropic"
	OpenAI    Provider = "openai"
	// InProcess is the scripted model, which has no wire.
	InProcess Provider = "inprocess"
)

// RequestInfo is what a Responder knows about a request beyond its content.
type RequestInfo struct {
	Provider Provider
	// N numbers the requests a server (or scripted model) has seen, from 1.
	N int
}

// Responder decides the answer to one request. Implementations must be safe
// for concurrent use.
type Responder interface {
	Respond(req *llm.Request, info RequestInfo) Reply
}

// Reply is a Responder's decision for one request.
type Reply struct {
	// Content is the assistant's blocks: text and tool_use (IDs set, Input a
	// JSON object). Opaque blocks such as thinking are allowed too.
	Content []llm.Block
	// StopReason defaults to tool_use when Content has a tool_use block and
	// end_turn otherwise, after the request's stop sequences and max_tokens
	// had their say (stop_sequence, max_tokens). Setting it pins the reason
	// and turns stop sequences off, but not max_tokens: content over the
	// limit is still cut, with stop reason max_tokens, since a real API
	// never exceeds it.
	StopReason llm.StopReason
	// Usage, when set, replaces the usage the server (or scripted model)
	// would compute: llm.EstimateOutput of the content as sent, and the
	// request's estimate split by the prompt-cache simulator.
	Usage *llm.Usage
	// FirstByte delays the response headers; PerToken delays each output
	// token (streamed responses spread it over their deltas).
	FirstByte time.Duration
	PerToken  time.Duration
	// Fault, when set, makes the request fail the way a real API can.
	Fault *Fault
}

// FaultKind is a way a real API request fails.
type FaultKind string

// The faults the fake can inject.
const (
	// FaultRateLimit answers 429 (rate_limit_error) with retry-after.
	FaultRateLimit FaultKind = "rate_limit"
	// FaultOverloaded answers 529 overloaded_error (503 on the OpenAI wire).
	FaultOverloaded FaultKind = "overloaded"
	// FaultServerError answers 500 api_error.
	FaultServerError FaultKind = "server_error"
	// FaultSlowFirstByte delays the response by Fault.Delay, then answers
	// normally.
	FaultSlowFirstByte FaultKind = "slow_first_byte"
	// FaultCutStream closes the connection after Fault.AfterBytes bytes of
	// the body.
	FaultCutStream FaultKind = "cut_stream"
	// FaultErrorEvent sends a 200 stream that ends with an error event
	// (overloaded_error) after Fault.AfterBytes bytes.
	FaultErrorEvent FaultKind = "error_event"
	// FaultMalformedJSON answers 200 with a body that is not valid JSON (or
	// a stream frame that is not).
	FaultMalformedJSON FaultKind = "malformed_json"
)

// Fault is one injected failure.
type Fault struct {
	Kind       FaultKind     `yaml:"kind" json:"kind"`
	RetryAfter time.Duration `yaml:"retry_after" json:"retry_after,omitempty"`
	Delay      time.Duration `yaml:"delay" json:"delay,omitempty"`
	AfterBytes int           `yaml:"after_bytes" json:"after_bytes,omitempty"`
}
