package main

import (
	"errors"
	"os"
	"strings"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/provider"
)

// modelFlagHelp documents --model for every command that runs agents.
const modelFlagHelp = `model to run: "fake" (offline demo), anthropic:MODEL, openai:MODEL or ollama:MODEL (default $DEPUTY_MODEL)`

// noModelHelp is printed when no model is configured: it says exactly what
// to do, because this is the first thing a new user sees.
const noModelHelp = `no model configured.

  Try deputy offline, on its built-in scripted model:
      deputy run --model fake "summarize this directory"

  Use a real model with --model or $DEPUTY_MODEL:
      export ANTHROPIC_API_KEY=...   then  --model anthropic:claude-sonnet-4-5
      export OPENAI_API_KEY=...      then  --model openai:gpt-4.1
      (Ollama on localhost:11434)    then  --model ollama:llama3.1
  ANTHROPIC_BASE_URL / OPENAI_BASE_URL point the clients at another server,
  such as one started with "deputy fakellm".`

// resolveModel turns a --model value into a model and the name to send in
// requests. scenario, for the fake model, replaces the built-in demo.
func resolveModel(spec, scenario string) (llm.Model, string, error) {
	if spec == "" {
		spec = os.Getenv("DEPUTY_MODEL")
	}
	if spec == "" {
		return nil, "", usageErr("%s", noModelHelp)
	}
	if spec == "fake" || strings.HasPrefix(spec, "fake:") {
		s, err := loadScenario(scenario)
		if err != nil {
			return nil, "", err
		}
		if s == nil {
			s = fake.DemoScenario()
		}
		var opts []fake.ModelOption
		if os.Getenv("DEPUTY_FAKE_LATENCY") == "off" {
			opts = append(opts, fake.WithoutLatency()) // scripts and tests that want speed, not realism
		}
		return fake.NewModel(s, opts...), spec, nil
	}
	if scenario != "" {
		return nil, "", usageErr("--scenario applies only to --model fake")
	}
	m, err := provider.New(spec, provider.Options{})
	if errors.Is(err, provider.ErrBadSpec) {
		return nil, "", usageErr("%v; or fake, for the offline scripted model", err)
	}
	if err != nil {
		return nil, "", usageErr("%v", err)
	}
	return m, spec, nil
}

// loadScenario reads a scenario file; "demo" names the built-in demo and ""
// means none (nil).
func loadScenario(path string) (*fake.Scenario, error) {
	switch path {
	case "":
		return nil, nil
	case "demo":
		return fake.DemoScenario(), nil
	}
	s, err := fake.LoadScenario(path)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return s, nil
}
