// Package provider turns a model spec such as "anthropic:claude-sonnet-4-5",
// "openai:gpt-4.1" or "ollama:qwen3" into an llm.Model, reading endpoints
// and keys from the environment. It is the one place deputy reads provider
// environment variables; the SDKs are told not to.
package provider

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/anthropic"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/retry"
)

// Names are the provider prefixes a spec may start with.
var Names = []string{"anthropic", "openai", "ollama"}

// OllamaBaseURL is where ollama: models are served unless OPENAI_BASE_URL
// says otherwise.
const OllamaBaseURL = "http://localhost:11434/v1"

// Options are settings for every provider, beyond what the environment
// gives.
type Options struct {
	HTTPClient *http.Client
	// Retry is the retry policy; nil means retry.Default().
	Retry *retry.Policy
	// Getenv looks up an environment variable; nil means os.LookupEnv.
	Getenv func(string) (string, bool)
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

// New returns the model a spec names, configured from the environment:
//
//	anthropic:MODEL  ANTHROPIC_API_KEY (required), ANTHROPIC_BASE_URL
//	openai:MODEL     OPENAI_API_KEY (required), OPENAI_BASE_URL
//	ollama:MODEL     OPENAI_BASE_URL (default http://localhost:11434/v1),
//	                 OPENAI_API_KEY (optional; Ollama ignores it)
//
// A missing variable is named in the error; the error never contains a key.
func New(spec string, opts Options) (llm.Model, error) {
	p, model, err := Parse(spec)
	if err != nil {
		return nil, err
	}
	env := opts.Getenv
	if env == nil {
		env = os.LookupEnv
	}
	get := func(k string) string {
		v, _ := env(k)
		return strings.TrimSpace(v)
	}
	switch p {
	case "anthropic":
		key := get("ANTHROPIC_API_KEY")
		if key == "" {
			return nil, fmt.Errorf("model %s: ANTHROPIC_API_KEY is not set", spec)
		}
		m, err := anthropic.New(model, anthropic.Options{
			APIKey: key, BaseURL: get("ANTHROPIC_BASE_URL"), HTTPClient: opts.HTTPClient, Retry: opts.Retry,
		})
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", spec, err)
		}
		return m, nil
	case "openai":
		key := get("OPENAI_API_KEY")
		if key == "" {
			return nil, fmt.Errorf("model %s: OPENAI_API_KEY is not set", spec)
		}
		m, err := openai.New(model, openai.Options{
			APIKey: key, BaseURL: get("OPENAI_BASE_URL"), HTTPClient: opts.HTTPClient, Retry: opts.Retry,
		})
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", spec, err)
		}
		return m, nil
	default: // ollama
		base := get("OPENAI_BASE_URL")
		if base == "" {
			base = OllamaBaseURL
		}
		key := get("OPENAI_API_KEY")
		if key == "" {
			key = "ollama" // the SDK insists on one; Ollama ignores it
		}
		m, err := openai.New(model, openai.Options{
			APIKey: key, BaseURL: base, HTTPClient: opts.HTTPClient, Retry: opts.Retry,
			Provider: "ollama", LegacyMaxTokens: true,
		})
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", spec, err)
		}
		return m, nil
	}
}
