package main

import (
	"errors"
	"os"
	"strings"
	"sync"

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

// models opens the models of one CLI run: the root's, and any other a
// definition or a tier names for a child. Fake specs ("fake", "fake:NAME")
// all play the same scenario, so a scripted parent and its scripted
// children are one story.
type models struct {
	scenario string // --scenario

	mu     sync.Mutex // children open models concurrently
	played *fake.Scenario
	opened map[string]opened // by spec: one client (and connection pool) per model
}

type opened struct {
	model llm.Model
	name  string
}

// open returns the model a spec names and the model name its requests
// carry: the provider's own name (claude-sonnet-4-5, not
// anthropic:claude-sonnet-4-5).
func (ms *models) open(spec string) (llm.Model, string, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if o, ok := ms.opened[spec]; ok {
		return o.model, o.name, nil
	}
	m, name, err := ms.openLocked(spec)
	if err != nil {
		return nil, "", err
	}
	if ms.opened == nil {
		ms.opened = map[string]opened{}
	}
	ms.opened[spec] = opened{m, name}
	return m, name, nil
}

func (ms *models) openLocked(spec string) (llm.Model, string, error) {
	if spec == "fake" || strings.HasPrefix(spec, "fake:") {
		if ms.played == nil {
			s, err := loadScenario(ms.scenario)
			if err != nil {
				return nil, "", err
			}
			if s == nil {
				s = fake.DemoScenario()
			}
			ms.played = s
		}
		var opts []fake.ModelOption
		if os.Getenv("DEPUTY_FAKE_LATENCY") == "off" {
			opts = append(opts, fake.WithoutLatency()) // scripts and tests that want speed, not realism
		}
		return fake.NewModel(ms.played, opts...), spec, nil
	}
	if ms.scenario != "" {
		return nil, "", usageErr("--scenario applies only to --model fake")
	}
	_, name, err := provider.Parse(spec)
	if err == nil {
		var m llm.Model
		if m, err = provider.New(spec, provider.Options{}); err == nil {
			return m, name, nil
		}
	}
	if errors.Is(err, provider.ErrBadSpec) {
		return nil, "", usageErr("%v; or fake, for the offline scripted model", err)
	}
	return nil, "", usageErr("%v", err)
}

// rootSpec is the --model value, or $DEPUTY_MODEL.
func rootSpec(flag string) (string, error) {
	if flag == "" {
		flag = os.Getenv("DEPUTY_MODEL")
	}
	if flag == "" {
		return "", usageErr("%s", noModelHelp)
	}
	return flag, nil
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
