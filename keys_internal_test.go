package deputy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/llm"
)

// ProviderOptions.APIKey is Options.ModelSpec's provider's: a tier or a
// definition naming another provider gets no copy of it, neither sent to
// that provider's host nor in an error.
func TestTheKeyStaysWithItsProvider(t *testing.T) {
	t.Parallel()
	const key = "sk-ant-secret-7"
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()
	ms, err := newModels(&Options{ModelSpec: "anthropic:claude-x", Provider: ProviderOptions{APIKey: key, BaseURL: srv.URL,
		Endpoints: map[string]Endpoint{"ollama": {BaseURL: srv.URL + "/v1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ms.open("anthropic:claude-x"); err != nil {
		t.Fatalf("ModelSpec's own provider: %v", err)
	}
	_, _, err = ms.open("openai:gpt-x")
	if err == nil || !strings.Contains(err.Error(), "no key for provider openai") || strings.Contains(err.Error(), key) {
		t.Errorf("openai: with only an anthropic key: %v", err)
	}
	m, _, err := ms.open("ollama:qwen")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, MaxTokens: 10}, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 1 || strings.Contains(auth[0], key) {
		t.Errorf("ollama got Authorization %q", auth)
	}
}

// openai-responses is OpenAI's other wire on the same account: it gets
// Options.ModelSpec's openai key and endpoint, and deputy.yaml's
// openai.responses moves an openai: model onto it.
func TestResponsesWireSharesOpenAIsAccount(t *testing.T) {
	t.Parallel()
	const key = "sk-openai-secret-9"
	var mu sync.Mutex
	paths := map[string][]string{} // path → each request's Authorization
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths[r.URL.Path] = append(paths[r.URL.Path], r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, `{"error":{"message":"no","type":"invalid_request_error"}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	ms, err := newModels(&Options{ModelSpec: "openai:gpt-a", Provider: ProviderOptions{APIKey: key, BaseURL: srv.URL + "/v1"},
		Config: &Config{OpenAI: agentdef.OpenAIConfig{Responses: []string{"gpt-b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Messages: []llm.Message{llm.UserText("hi")}, MaxTokens: 10}
	for _, spec := range []string{"openai:gpt-a", "openai-responses:gpt-c", "openai:gpt-b"} {
		m, _, err := ms.open(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if _, err := m.Generate(context.Background(), req, nil); err == nil {
			t.Fatalf("%s: the server refuses every call", spec)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	chat, resp := paths["/v1/chat/completions"], paths["/v1/responses"]
	if len(paths) != 2 || len(chat) != 1 || len(resp) != 2 {
		t.Errorf("gpt-a on Chat Completions, gpt-c and gpt-b on Responses: %v", paths)
	}
	for _, a := range append(chat, resp...) {
		if a != "Bearer "+key {
			t.Errorf("Authorization %q", a)
		}
	}
}
