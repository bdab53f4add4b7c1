package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/llm"

	"github.com/deputy-run/deputy/llm/anthropic"
	"github.com/deputy-run/deputy/llm/openai"
)

func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestParse(t *testing.T) {
	t.Parallel()
	good := map[string][2]string{
		"anthropic:claude-sonnet-4-5": {"anthropic", "claude-sonnet-4-5"},
		"openai:gpt-4.1":              {"openai", "gpt-4.1"},
		"ollama:qwen3:8b":             {"ollama", "qwen3:8b"}, // Ollama tags keep their colon
		" OpenAI:gpt-5 ":              {"openai", "gpt-5"},
		"openai-responses:gpt-5":      {"openai-responses", "gpt-5"},
	}
	for spec, want := range good {
		p, m, err := Parse(spec)
		if err != nil || p != want[0] || m != want[1] {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", spec, p, m, err, want[0], want[1])
		}
	}
	for _, spec := range []string{"", "claude", "anthropic:", ":gpt-4", "gemini:pro", "fake:x"} {
		_, _, err := Parse(spec)
		if err == nil || !errors.Is(err, ErrBadSpec) {
			t.Errorf("Parse(%q) err = %v, want ErrBadSpec", spec, err)
			continue
		}
		if !strings.Contains(err.Error(), "anthropic, openai, openai-responses, ollama") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q) err = %q: want one line listing the providers", spec, err)
		}
	}
}

func TestNewFromEnv(t *testing.T) {
	t.Parallel()
	const key = "sk-secret-value-123"
	cases := []struct {
		spec    string
		env     map[string]string
		wantErr string // substring; "" means success
	}{
		{"anthropic:claude-x", map[string]string{}, "ANTHROPIC_API_KEY is not set"},
		{"anthropic:claude-x", map[string]string{"ANTHROPIC_API_KEY": "  "}, "ANTHROPIC_API_KEY is not set"},
		{"anthropic:claude-x", map[string]string{"ANTHROPIC_API_KEY": key}, ""},
		{"anthropic:claude-x", map[string]string{"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": "localhost:8080"}, "base URL"},
		{"openai:gpt-4.1", map[string]string{"ANTHROPIC_API_KEY": key}, "OPENAI_API_KEY is not set"},
		{"openai:gpt-4.1", map[string]string{"OPENAI_API_KEY": key}, ""},
		{"openai:gpt-4.1", map[string]string{"OPENAI_API_KEY": key, "OPENAI_BASE_URL": "ftp://x"}, "base URL"},
		{"ollama:qwen3", map[string]string{}, ""},
		{"mistral:large", map[string]string{}, "unknown provider \"mistral\" (valid: anthropic, openai, openai-responses, ollama)"},
	}
	for _, c := range cases {
		m, err := New(c.spec, Options{Getenv: envOf(c.env)})
		if c.wantErr == "" {
			if err != nil || m == nil {
				t.Errorf("New(%q) = %v, %v", c.spec, m, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("New(%q) err = %v, want %q", c.spec, err, c.wantErr)
		} else if strings.Contains(err.Error(), key) {
			t.Errorf("New(%q) err leaks the key: %v", c.spec, err)
		}
	}
}

func TestNewPicksProviders(t *testing.T) {
	t.Parallel()
	m, err := New("ollama:llama3.2", Options{Getenv: envOf(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := m.(*openai.Model); !ok || o.Name() != "llama3.2" {
		t.Errorf("ollama model = %#v", m)
	}
	m, err = New("anthropic:claude-haiku-4-5", Options{Getenv: envOf(map[string]string{"ANTHROPIC_API_KEY": "k"})})
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := m.(*anthropic.Model); !ok || a.Name() != "claude-haiku-4-5" {
		t.Errorf("anthropic model = %#v", m)
	}
}

// Options given in code win over the environment, and without Getenv no
// variable is read at all: a key in the process's environment is not
// found, and the error says where the key was looked for.
func TestOptionsWinAndTheEnvironmentIsReadOnlyWhenAsked(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	for _, spec := range []string{"anthropic:claude-x", "openai:gpt-4.1"} {
		_, err := New(spec, Options{})
		if err == nil || !strings.Contains(err.Error(), "Options.APIKey is empty") || strings.Contains(err.Error(), "sk-from") {
			t.Errorf("%s without Getenv: %v", spec, err)
		}
	}
	env := envOf(map[string]string{"ANTHROPIC_API_KEY": "sk-env", "ANTHROPIC_BASE_URL": "ftp://not-a-base-url"})
	// The environment's base URL would be refused: the one given wins.
	if _, err := New("anthropic:claude-x", Options{Getenv: env, BaseURL: "http://127.0.0.1:1"}); err != nil {
		t.Errorf("BaseURL over the environment's: %v", err)
	}
	if _, err := New("anthropic:claude-x", Options{Getenv: env}); err == nil || !strings.Contains(err.Error(), "base URL") {
		t.Errorf("the environment's base URL was not read: %v", err)
	}
	if _, err := New("openai:gpt-4.1", Options{APIKey: "sk-code", BaseURL: "http://127.0.0.1:1/v1"}); err != nil {
		t.Errorf("key and URL in code: %v", err)
	}
}

// openai-responses:MODEL, and an openai: model that Options.Responses
// names (deputy.yaml's openai.responses), speak the Responses API; other
// openai: models Chat Completions. Seen from the server, over real HTTP.
func TestResponsesWireChosenPerModel(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"seen","type":"invalid_request_error"}}`))
	}))
	defer srv.Close()
	for _, c := range []struct {
		spec      string
		responses []string
		want      string
	}{
		{"openai-responses:gpt-5", nil, "/v1/responses"},
		{"openai:gpt-5", []string{"o3", "gpt-5"}, "/v1/responses"},
		{"openai:gpt-5", []string{"*"}, "/v1/responses"},
		{"openai:gpt-4.1", []string{"gpt-5"}, "/v1/chat/completions"},
		{"openai:gpt-4.1", nil, "/v1/chat/completions"},
		{"ollama:gpt-5", []string{"*"}, "/v1/chat/completions"}, // openai: models only
	} {
		m, err := New(c.spec, Options{APIKey: "k", BaseURL: srv.URL + "/v1", Responses: c.responses})
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		_, err = m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}}, nil)
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Message != "seen" {
			t.Fatalf("%s: %v", c.spec, err)
		}
		mu.Lock()
		got := paths[len(paths)-1]
		mu.Unlock()
		if got != c.want {
			t.Errorf("%s with responses %q: %s, want %s", c.spec, c.responses, got, c.want)
		}
	}
}
