package serve_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/retry"
)

// failingScenario: a survey's first model call is overloaded once (529,
// retried after the backoff), then it spawns two researchers in order:
// alpha reports, beta's every call is a 500, so it fails when its retries
// run out; the root reports with one researcher lost. A second kind of
// run asks a question and waits.
const failingScenario = `
rules:
  - match: {system: "field researcher", last_user: "Break"}
    fault: {kind: server_error}
    text: unused
  - match: {system: "field researcher"}
    text: "Notes: all in order."
  - match: {last_user: "Survey", turn: 1}
    times: 1
    fault: {kind: overloaded}
    text: unused
  - match: {last_user: "Survey", turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: researcher, description: "alpha", task: "Collect the notes."}}
      - {name: spawn_subagent, input: {subagent_type: researcher, description: "beta", task: "Break the build."}}
  - match: {last_user: "Summarize", turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "Which week?"}}]
  - match: {turn: 2}
    text: "Survey done: one researcher failed."
`

// retryWait is the backoff before a retry (no jitter): the attempts
// record it.
const retryWait = 40 * time.Millisecond

var researcher = &deputy.Definition{Name: "researcher", Description: "Researches one question and reports.",
	SystemPrompt: "You are a field researcher. Report what you find."}

// wireRuntime opens a runtime whose model is Anthropic's wire on the fake
// server (real HTTP, deputy's retry policy), so model calls record their
// attempts; the in-process scripted model makes none.
func wireRuntime(t *testing.T, scenario string) *deputy.Runtime {
	t.Helper()
	const key = "sk-serve-test-0123456789"
	script, err := fake.ParseScenario([]byte(scenario), "wire.yaml")
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := fake.NewServer(fake.Options{APIKey: key, Responder: script}).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	dir := t.TempDir()
	policy := retry.Policy{MaxAttempts: 2, BaseDelay: retryWait, MaxDelay: time.Second}
	rt, err := deputy.Open(context.Background(), deputy.Options{
		ModelSpec: "anthropic:fake", Provider: deputy.ProviderOptions{BaseURL: url, APIKey: key, Retry: &policy},
		Definitions: []*deputy.Definition{researcher}, DB: filepath.Join(dir, "deputy.db"), Workspace: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	return rt
}
