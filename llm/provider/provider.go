// Package provider turns a model spec such as "anthropic:claude-sonnet-4-5",
// "openai:gpt-4.1", "openai-responses:gpt-5" or "ollama:qwen3" into an
// llm.Model. Endpoints and keys
// come from Options, in code; the environment (ANTHROPIC_API_KEY and the
// rest) is read only when the caller passes Options.Getenv, as the CLI does
// with os.LookupEnv. It is the one place deputy reads provider environment
// variables; the SDKs are told not to.
package provider

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/anthropic"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/retry"
)

// Names are the provider prefixes a spec may start with.
var Names = []string{"anthropic", "openai", "openai-responses", "ollama"}

// OllamaBaseURL is where ollama: models are served unless Options.BaseURL
// or OPENAI_BASE_URL says otherwise.
const OllamaBaseURL = "http://localhost:11434/v1"

// Options are a model's settings. The zero value reads no environment
// variable: the key comes from APIKey (an ollama: model needs none).
type Options struct {
	// HTTPClient sends the model's requests; nil: the SDK's default
	// client (net/http's default transport, two idle connections per
	// host). Give a program's own to size its pool or trace its requests.
	HTTPClient *http.Client
	// Retry is the retry policy; nil means retry.Default().
	Retry *retry.Policy
	// BaseURL is the API's root (https://api.anthropic.com, or an
	// OpenAI-compatible server's .../v1); empty: the provider's own
	// (OllamaBaseURL for ollama:), unless Getenv gives one. It wins over
	// the environment.
	BaseURL string
	// APIKey is the API key; it wins over the environment. Required for
	// anthropic: and openai: unless Getenv gives one.
	APIKey string
	// NonStreaming makes the plain (non-streamed) call when Generate gets
	// no stream callback, which costs less to read; by default every call
	// streams.
	NonStreaming bool
	// Getenv, when set, is asked for what BaseURL and APIKey leave empty:
	// ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OPENAI_API_KEY,
	// OPENAI_BASE_URL (os.LookupEnv: the process's environment). nil: no
	// variable is read.
	Getenv func(string) (string, bool)
	// Responses names the openai: models that speak OpenAI's Responses
	// API rather than Chat Completions, as openai-responses: would
	// (deputy.yaml's openai.responses); "*" is every openai: model. The
	// spec, and so the model's prices and records, stays openai:MODEL.
	Responses []string
}

// speaksResponses reports whether the openai: model is one of names.
func speaksResponses(model string, names []string) bool {
	for _, n := range names {
		if n == "*" || n == model {
			return true
		}
	}
	return false
}

// ErrBadSpec is wrapped by every error about the spec itself (as opposed
// to the environment), so a CLI can tell usage errors apart.
var ErrBadSpec = errors.New("bad model spec")

// Parse splits a spec "provider:model" and checks the provider.
func Parse(spec string) (provider, model string, err error) {
	p, m, ok := strings.Cut(strings.TrimSpace(spec), ":")
	if !ok || p == "" || m == "" {
		return "", "", fmt.Errorf("%w %q: want PROVIDER:MODEL with PROVIDER one of %s (for example anthropic:claude-sonnet-4-5)",
			ErrBadSpec, spec, strings.Join(Names, ", "))
	}
	p = strings.ToLower(p)
	for _, n := range Names {
		if p == n {
			return p, m, nil
		}
	}
	return "", "", fmt.Errorf("%w %q: unknown provider %q (valid: %s)", ErrBadSpec, spec, p, strings.Join(Names, ", "))
}

// New returns the model a spec names, configured by opts, and, for what
// they leave empty, by opts.Getenv's variables:
//
//	anthropic:MODEL  APIKey or ANTHROPIC_API_KEY (required); BaseURL or ANTHROPIC_BASE_URL
//	openai:MODEL     APIKey or OPENAI_API_KEY (required); BaseURL or OPENAI_BASE_URL;
//	                 Chat Completions, or the Responses API for a model in Responses
//	openai-responses:MODEL  the same, on the Responses API
//	ollama:MODEL     BaseURL or OPENAI_BASE_URL (default http://localhost:11434/v1);
//	                 APIKey or OPENAI_API_KEY (optional; Ollama ignores it)
//
// A missing key is named in the error; the error never contains a key.
func New(spec string, opts Options) (llm.Model, error) {
	p, model, err := Parse(spec)
	if err != nil {
		return nil, err
	}
	// get is opts' value, else the variable's when the caller lets one be
	// read.
	get := func(given, name string) string {
		if v := strings.TrimSpace(given); v != "" || opts.Getenv == nil {
			return v
		}
		v, _ := opts.Getenv(name)
		return strings.TrimSpace(v)
	}
	// noKey says where the key was looked for.
	noKey := func(name string) error {
		if opts.Getenv == nil {
			return fmt.Errorf("model %s: no API key: Options.APIKey is empty (the environment, %s, is read only when asked for)", spec, name)
		}
		return fmt.Errorf("model %s: %s is not set", spec, name)
	}
	switch p {
	case "anthropic":
		key := get(opts.APIKey, "ANTHROPIC_API_KEY")
		if key == "" {
			return nil, noKey("ANTHROPIC_API_KEY")
		}
		m, err := anthropic.New(model, anthropic.Options{
			APIKey: key, BaseURL: get(opts.BaseURL, "ANTHROPIC_BASE_URL"), HTTPClient: opts.HTTPClient, Retry: opts.Retry,
			NonStreaming: opts.NonStreaming,
		})
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", spec, err)
		}
		return m, nil
	case "openai", "openai-responses":
		key := get(opts.APIKey, "OPENAI_API_KEY")
		if key == "" {
			return nil, noKey("OPENAI_API_KEY")
		}
		m, err := openai.New(model, openai.Options{
			APIKey: key, BaseURL: get(opts.BaseURL, "OPENAI_BASE_URL"), HTTPClient: opts.HTTPClient, Retry: opts.Retry,
			NonStreaming: opts.NonStreaming, Responses: p == "openai-responses" || speaksResponses(model, opts.Responses),
		})
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", spec, err)
		}
		return m, nil
	default: // ollama
		base := get(opts.BaseURL, "OPENAI_BASE_URL")
		if base == "" {
			base = OllamaBaseURL
		}
		key := get(opts.APIKey, "OPENAI_API_KEY")
		if key == "" {
			key = "ollama" // the SDK insists on one; Ollama ignores it
		}
		m, err := openai.New(model, openai.Options{
			APIKey: key, BaseURL: base, HTTPClient: opts.HTTPClient, Retry: opts.Retry,
			Provider: "ollama", LegacyMaxTokens: true, NonStreaming: opts.NonStreaming,
		})
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", spec, err)
		}
		return m, nil
	}
}
