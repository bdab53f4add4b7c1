// Package openai is deputy's provider for OpenAI-compatible Chat Completions
// servers (OpenAI, Ollama, vLLM, llama.cpp), on the official SDK
// (github.com/openai/openai-go/v3), and for OpenAI's Responses API
// (Options.Responses; its mapping is in responses.go).
//
// As in package anthropic: the SDK's retries are off and deputy's
// (llm/retry) are on, every attempt is reported through llm.ReportAttempt,
// and Generate streams by default (Options.NonStreaming selects the plain
// endpoint for calls without a stream callback). A stream cut after some
// output is retried from the start; the attempt report before the retry
// (Retry and Discarded set) tells a stream consumer to drop the deltas it
// got, and the next attempt streams from block 0 again.
//
// Mapping to deputy's Anthropic-shaped vocabulary:
//
//   - finish_reason: tool_calls → tool_use, stop → end_turn, length →
//     max_tokens, content_filter → refusal; others pass through. A stop
//     with tool calls (some Ollama versions) is tool_use.
//   - usage: InputTokens = prompt_tokens − cached_tokens, CacheReadTokens =
//     cached_tokens (absent on Ollama: zero).
//   - streamed tool calls are assembled by the SDK's accumulator by index;
//     a chunk without an index (old Ollama) continues the current call
//     unless it brings a new id.
//   - transcript blocks the wire has no place for (thinking and other opaque
//     blocks) are left out of the request; tool_result IsError has no field
//     and is carried only by the result text.
package openai

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/retry"
)

// DefaultBaseURL is the OpenAI API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Options configures a Model. APIKey is required (send any non-empty string
// to a server that ignores keys, such as Ollama).
type Options struct {
	APIKey string
	// BaseURL defaults to DefaultBaseURL; the SDK appends
	// /chat/completions, so it includes the /v1.
	BaseURL    string
	HTTPClient *http.Client
	// Retry is the retry policy; nil means retry.Default().
	Retry *retry.Policy
	// Provider labels attempts and errors; "openai" when empty (the
	// provider package passes "ollama").
	Provider string
	// LegacyMaxTokens sends max_tokens instead of max_completion_tokens,
	// for servers that predate it.
	LegacyMaxTokens bool
	// NonStreaming uses the non-streaming endpoint when Generate gets no
	// stream callback; its attempts are bounded by the retry policy's
	// PlainTimeout, not StallTimeout, since their first byte comes with the
	// whole answer. By default every call streams.
	NonStreaming bool
	// EchoInvalidArguments sends a tool call whose arguments were not a
	// JSON object (llm.Block.InvalidInput) back with those arguments byte
	// for byte. By default it goes back with arguments "{}", and the
	// model learns what it sent from the call's error result, which
	// quotes it. The default is the safe one because the servers that
	// produce such calls most (vLLM 0.23 to 0.25, Ollama, llama.cpp)
	// parse every replayed arguments string and answer 400 when it is
	// not JSON, on every later turn: one bad call would end the run
	// there instead. The OpenAI API itself takes any string; set this
	// against it when the model should see its own bytes in its history.
	// The transcript keeps the bytes as sent either way.
	EchoInvalidArguments bool
	// Responses speaks the Responses API (POST /responses) instead of
	// Chat Completions: reasoning items kept and sent back, nothing left
	// on the server (see responses.go). LegacyMaxTokens has no meaning
	// there.
	Responses bool
}

// Model is an llm.Model backed by a Chat Completions server. It is safe for
// concurrent use.
type Model struct {
	model   string
	name    string
	opts    Options
	policy  retry.Policy
	service sdk.ChatCompletionService
	// responses is the Responses API's service, used when
	// Options.Responses is set.
	responses responses.ResponseService

	// schemas caches decoded tool schemas: the SDK wants parameters as a
	// map, and decoding every tool's schema on every turn would dominate the
	// per-call cost. The maps are only read after insertion.
	mu      sync.Mutex
	schemas map[string]shared.FunctionParameters
}

var _ llm.Model = (*Model)(nil)

// New returns a Model answering with model (a request's own Model, when set,
// wins).
func New(model string, opts Options) (*Model, error) {
	name := opts.Provider
	if name == "" {
		name = "openai"
	}
	if opts.APIKey == "" {
		return nil, fmt.Errorf("%s: no API key (set OPENAI_API_KEY)", name)
	}
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: base URL %q: want http(s)://host[:port]/path", name, base)
	}
	m := &Model{model: model, name: name, opts: opts, schemas: make(map[string]shared.FunctionParameters)}
	if opts.Retry != nil {
		m.policy = *opts.Retry
	} else {
		m.policy = retry.Default()
	}
	sopts := []option.RequestOption{
		option.WithAPIKey(opts.APIKey),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
	}
	if opts.HTTPClient != nil {
		sopts = append(sopts, option.WithHTTPClient(opts.HTTPClient))
	}
	// The chat service alone, not openai.NewClient: the client would read
	// OPENAI_* variables on its own, and deputy resolves its environment in
	// one place (llm/provider).
	if opts.Responses {
		m.responses = responses.NewResponseService(sopts...)
	} else {
		m.service = sdk.NewChatCompletionService(sopts...)
	}
	return m, nil
}

// Name returns the model the Model answers with by default.
func (m *Model) Name() string { return m.model }

// Generate answers req, retrying failed attempts under the retry policy.
func (m *Model) Generate(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
	if req == nil {
		return nil, fmt.Errorf("%s: nil request", m.name)
	}
	if m.opts.Responses {
		return m.generateResponse(ctx, req, stream)
	}
	params, err := m.params(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	streaming := stream != nil || !m.opts.NonStreaming
	if streaming {
		params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	}
	return m.attempts(ctx, params.Model, streaming, func(actx context.Context, w *retry.Watchdog, out *retry.Outcome) (*llm.Response, error) {
		if streaming {
			return m.streamOnce(actx, w, &params, stream, out)
		}
		return m.once(actx, w, &params, out)
	})
}

// attempts runs attempt under the retry policy, for both wires, and
// returns the response of the one that succeeded. A call that does not
// stream is bounded by the policy's PlainTimeout instead of its stall
// timeout: no byte comes until the answer is whole, which is not a stall.
func (m *Model) attempts(ctx context.Context, model string, streaming bool, attempt func(context.Context, *retry.Watchdog, *retry.Outcome) (*llm.Response, error)) (*llm.Response, error) {
	policy := m.policy
	if !streaming {
		policy = policy.Plain()
	}
	var resp *llm.Response
	err := policy.Do(ctx, m.name, model, func(actx context.Context, w *retry.Watchdog) (retry.Outcome, error) {
		var out retry.Outcome
		r, err := attempt(actx, w, &out)
		resp = r
		return out, err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
