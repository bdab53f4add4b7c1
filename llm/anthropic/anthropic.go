// Package anthropic is deputy's provider for the Anthropic Messages API, on
// the official SDK (github.com/anthropics/anthropic-sdk-go/v2).
//
// Three things differ from calling the SDK directly:
//
//   - Retries are deputy's (package llm/retry): the SDK's own are off, so
//     every attempt is reported through llm.ReportAttempt and the policy,
//     clock and budget are deputy's.
//   - Prompt-cache breakpoints are placed by deputy, see breakpoints.go.
//   - Transcript bytes are stable: a tool_use input goes back on the wire as
//     the exact bytes the model produced, and blocks deputy does not
//     interpret (thinking, redacted_thinking, ...) as their stored raw JSON.
//     The SDK's encoder compacts and HTML-escapes any raw JSON it sends, so
//     an opaque block is stored in that canonical form when it arrives (same
//     value, signature intact): the stored bytes are then exactly the bytes
//     sent on every later turn.
//
// Streaming: Generate uses the streaming endpoint by default, even when the
// caller passes no stream callback, because a long non-streamed answer can
// outlive HTTP timeouts and the SDK refuses large max_tokens without
// streaming. Options.NonStreaming selects the plain endpoint for calls
// without a callback whose max_tokens the SDK accepts without streaming;
// those attempts are bounded by retry.Policy.PlainTimeout, not the stall
// timeout, since their response's first byte comes with the whole answer.
//
// A stream cut after some output is retried from the start of the call. The
// deltas already passed to the callback are void: the attempt report that
// precedes the retry (llm.Attempt with Retry and Discarded set) tells the
// consumer to drop them, and the next attempt streams from block 0 again.
// The returned Response holds only the successful attempt's content.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/retry"
)

// ProviderName labels attempts and errors.
const ProviderName = "anthropic"

// DefaultBaseURL is the Anthropic API.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is max_tokens when neither the request nor Options set it
// (the Messages API requires one).
const DefaultMaxTokens = 8192

// Cache lifetimes Anthropic offers for a breakpoint.
const (
	CacheTTL5m = 5 * time.Minute
	CacheTTL1h = time.Hour
)

// Options configures a Model. The zero value talks to the Anthropic API with
// the default retry policy; APIKey is required.
type Options struct {
	APIKey string
	// BaseURL defaults to DefaultBaseURL; the SDK appends /v1/messages.
	BaseURL    string
	HTTPClient *http.Client
	// Retry is the retry policy; nil means retry.Default().
	Retry *retry.Policy
	// CacheTTL is the lifetime of deputy's cache breakpoints: CacheTTL5m
	// (the default when zero) or CacheTTL1h.
	CacheTTL time.Duration
	// NoCache places no cache breakpoints.
	NoCache bool
	// MaxTokens is used when a request sets none; zero means
	// DefaultMaxTokens.
	MaxTokens int
	// ThinkingBudget, when positive, enables extended thinking with this
	// many tokens (it must be below max_tokens). AdaptiveThinking asks for
	// adaptive thinking instead, on models that support it.
	ThinkingBudget   int64
	AdaptiveThinking bool
	// NonStreaming uses the non-streaming endpoint when Generate gets no
	// stream callback and the SDK allows it (a call whose max_tokens is
	// above its non-streaming limit streams anyway). By default every call
	// streams.
	NonStreaming bool
}

// Model is an llm.Model backed by the Anthropic Messages API. It is safe for
// concurrent use.
type Model struct {
	model  string
	opts   Options
	policy retry.Policy
	ttl    sdk.CacheControlEphemeralTTL
	client sdk.Client
}

var _ llm.Model = (*Model)(nil)

// New returns a Model answering with model (a request's own Model, when set,
// wins).
func New(model string, opts Options) (*Model, error) {
	if opts.APIKey == "" {
		return nil, errors.New("anthropic: no API key (set ANTHROPIC_API_KEY)")
	}
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if err := checkBaseURL(base); err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	m := &Model{model: model, opts: opts}
	switch opts.CacheTTL {
	case 0, CacheTTL5m:
	case CacheTTL1h:
		m.ttl = sdk.CacheControlEphemeralTTLTTL1h
	default:
		return nil, fmt.Errorf("anthropic: cache TTL %s: Anthropic offers 5m or 1h", opts.CacheTTL)
	}
	if opts.ThinkingBudget > 0 && opts.AdaptiveThinking {
		return nil, errors.New("anthropic: choose ThinkingBudget or AdaptiveThinking, not both")
	}
	if opts.Retry != nil {
		m.policy = *opts.Retry
	} else {
		m.policy = retry.Default()
	}
	copts := []option.RequestOption{
		// deputy resolves credentials and endpoints itself (llm/provider);
		// the SDK must not pick up others from the environment.
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(opts.APIKey),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
	}
	if opts.HTTPClient != nil {
		copts = append(copts, option.WithHTTPClient(opts.HTTPClient))
	}
	m.client = sdk.NewClient(copts...)
	return m, nil
}

// checkBaseURL refuses a URL the HTTP client could only fail on, so a typo
// is one clear error rather than eight retried connection failures.
func checkBaseURL(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("base URL %q: %w", base, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q: want http(s)://host[:port][/path]", base)
	}
	return nil
}

// Name returns the model the Model answers with by default.
func (m *Model) Name() string { return m.model }

// Generate answers req, retrying failed attempts under the retry policy.
func (m *Model) Generate(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
	if req == nil {
		return nil, errors.New("anthropic: nil request")
	}
	params, err := m.params(req)
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	streaming := stream != nil || !m.opts.NonStreaming
	if !streaming {
		// The SDK refuses a plain call it expects to outlast its 10-minute
		// timeout (max_tokens above about 21,333, or a model's own lower
		// limit): such a call streams anyway, accumulated, with no callback.
		if _, err := sdk.CalculateNonStreamingTimeout(int(params.MaxTokens), params.Model, nil); err != nil {
			streaming = true
		}
	}
	policy := m.policy
	if !streaming {
		policy = policy.Plain() // no byte until the answer is whole: not a stall
	}
	var resp *llm.Response
	err = policy.Do(ctx, ProviderName, string(params.Model), func(actx context.Context, w *retry.Watchdog) (retry.Outcome, error) {
		var out retry.Outcome
		var r *llm.Response
		var err error
		if streaming {
			r, err = m.streamOnce(actx, w, req, &params, stream, &out)
		} else {
			r, err = m.once(actx, w, req, &params, &out)
		}
		resp = r
		return out, err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
