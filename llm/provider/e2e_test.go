package provider

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
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
		{"openai-responses:fake", "/v1/responses", map[string]string{"OPENAI_API_KEY": key, "OPENAI_BASE_URL": root + "/v1"}, `"max_output_tokens":64`},
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

// countingTransport counts the requests of the client it is given to.
type countingTransport struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// A program's client, endpoint and key reach the fake server over real
// HTTP, with no variable read; NonStreaming makes the plain call when no
// stream callback is given, and a callback still streams.
func TestClientEndpointAndKeyInCode(t *testing.T) {
	t.Parallel()
	const key = "sk-in-code-7"
	srv, root := providertest.StartServer(t, fake.Options{APIKey: key})
	p := retry.Default()
	p.BaseDelay, p.StallTimeout, p.Clock = 0, 0, clock.NewInstant()
	ct := &countingTransport{next: http.DefaultTransport}
	client := &http.Client{Transport: ct}
	for _, c := range []struct{ spec, base string }{{"anthropic:fake", root}, {"openai:fake", root + "/v1"}, {"openai-responses:fake", root + "/v1"}} {
		m, err := New(c.spec, Options{HTTPClient: client, BaseURL: c.base, APIKey: key, Retry: &p, NonStreaming: true})
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		req := &llm.Request{Messages: []llm.Message{llm.UserText("hello")}, MaxTokens: 64}
		if _, err := m.Generate(context.Background(), req, nil); err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		if _, err := m.Generate(context.Background(), req, func(llm.Delta) {}); err != nil {
			t.Fatalf("%s streamed: %v", c.spec, err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 6 || ct.n.Load() != 6 {
		t.Fatalf("%d requests logged, %d through the program's client; want 6 and 6", len(reqs), ct.n.Load())
	}
	for i, r := range reqs {
		if want := i%2 == 1; r.Stream != want {
			t.Errorf("request %d (%s): stream %v, want %v", i, r.Path, r.Stream, want)
		}
	}
}
