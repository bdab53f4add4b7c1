package deputy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
