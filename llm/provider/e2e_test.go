package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/providertest"
	"github.com/deputy-run/deputy/llm/retry"
)

// The way to try deputy's real provider path without an account: point the
// provider variables at the fake server and ask for the model "fake".
func TestSpecsAgainstTheFakeServer(t *testing.T) {
	t.Parallel()
	const key = "sk-e2e-secret-42"
	srv, root := providertest.StartServer(t, fake.Options{APIKey: key})
	p := retry.Default()
	p.BaseDelay, p.StallTimeout, p.Clock = 0, 0, clock.NewInstant()
	cases := []struct {
		spec, path string
		env        map[string]string
		maxField   string
	}{
		{"anthropic:fake", "/v1/messages", map[string]string{"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": root}, `"max_tokens":64`},
		{"openai:fake", "/v1/chat/completions", map[string]string{"OPENAI_API_KEY": key, "OPENAI_BASE_URL": root + "/v1"}, `"max_completion_tokens":64`},
		{"ollama:fake", "/v1/chat/completions", map[string]string{"OPENAI_API_KEY": key, "OPENAI_BASE_URL": root + "/v1"}, `"max_tokens":64`},
	}
	for i, c := range cases {
		m, err := New(c.spec, Options{Retry: &p, Getenv: envOf(c.env)})
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hello")}, MaxTokens: 64}, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		if resp.Message().Text() != "Hello from deputy's fake model." || resp.Model != "fake" {
			t.Errorf("%s: %+v", c.spec, resp)
		}
		lr := srv.Requests()[i]
		if lr.Path != c.path || !strings.Contains(string(lr.Body), c.maxField) || !strings.Contains(string(lr.Body), `"model":"fake"`) {
			t.Errorf("%s: %s %s", c.spec, lr.Path, lr.Body)
		}
	}
	// A wrong key: one line, status and message, never the key.
	m, err := New("openai:fake", Options{Retry: &p, Getenv: envOf(map[string]string{"OPENAI_API_KEY": "sk-wrong-77", "OPENAI_BASE_URL": root + "/v1"})})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("hello")}}, nil)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 401 || strings.Contains(err.Error(), "sk-wrong-77") || strings.Contains(err.Error(), "\n") {
		t.Errorf("wrong key: %v", err)
	}
}
