package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/llm/fake"
)

// TestFakeLLMHelpListsEveryEndpoint: the help names every endpoint the fake
// serves, the Responses API and the model list included, and the OpenAI
// base URL both OpenAI wires take; it named Messages and Chat only.
func TestFakeLLMHelpListsEveryEndpoint(t *testing.T) {
	t.Parallel()
	out, _, code := deputy(t, t.TempDir(), nil, "fakellm", "--help")
	for _, want := range []string{"/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions", "POST /v1/responses",
		"GET, DELETE /v1/responses/{id}", "/v1/responses/{id}/input_items", "GET /v1/models, /v1/models/{id}",
		"GET, DELETE /_deputy/requests", "OPENAI_BASE_URL=http://ADDR/v1", "--max-log-bytes"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestFakeLLMMaxLogBytes: --max-log-bytes reaches the server: with a bound
// below two entries' weight the log keeps only the newest exchange.
func TestFakeLLMMaxLogBytes(t *testing.T) {
	t.Parallel()
	url, stop := startFakeLLM(t, "--max-log-bytes", "600", "--api-key", "sk-cli-secret-77")
	defer stop()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	body := `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	for i := range 3 {
		if got := post(t, client, url, "/v1/messages", body); got != http.StatusOK {
			t.Fatalf("request %d: status %d", i+1, got)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/_deputy/requests", nil)
	req.Header.Set("x-api-key", "sk-cli-secret-77")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l fake.RequestLog
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || len(l.Requests) != 1 || l.Requests[0].Seq != 3 || l.LastSeq != 3 {
		t.Fatalf("GET /_deputy/requests: %v %+v", err, l)
	}
}
