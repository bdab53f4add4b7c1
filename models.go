package deputy

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/provider"
	"github.com/deputy-run/deputy/llm/retry"
)

// ProgramModel is the spec a program's own model (Options.Model) is
// recorded and priced under when Options.ModelSpec names none. Only a
// runtime opened with that model runs (or resumes) a root on it: a run on
// it fails if another runtime resumes it (deputy worker, a fleet's other
// process, a program opened without Model), which is why Enqueue refuses
// such a root.
const ProgramModel = "deputy:program"

// ErrScenarioNotFake is in Open's error when Options.Scenario is given and
// a model that is not the fake one is asked for.
var ErrScenarioNotFake = errors.New("a scenario applies only to the fake model")

// IsFake reports whether spec names deputy's built-in scripted model:
// "fake", or "fake:NAME" (a tier's second scripted model, playing the
// same scenario).
func IsFake(spec string) bool { return spec == "fake" || strings.HasPrefix(spec, "fake:") }

// ProviderOptions are how the runtime reaches model APIs, for every
// provider:model it opens, the roots' and their children's tiers alike.
// The zero value reads no environment variable, so a provider's key must
// be given here (Ollama needs none).
type ProviderOptions struct {
	// HTTPClient sends every model request the runtime makes; nil: the
	// SDKs' default, net/http's default transport, which keeps two idle
	// connections per host (too few for a parent with many children
	// calling at once).
	HTTPClient *http.Client
	// BaseURL and APIKey are the endpoint and key of Options.ModelSpec's
	// provider only (empty BaseURL: the provider's own): a tier or a
	// definition's model: (definitions may come from a cloned repository)
	// naming another provider must not carry this key to that provider's
	// host. Any other provider's models need Endpoints or Getenv.
	BaseURL, APIKey string
	// Endpoints, by provider name (anthropic, openai, ollama), are each
	// provider's endpoint and key, winning over BaseURL and APIKey: for
	// tiers that mix providers.
	Endpoints map[string]Endpoint
	// Retry is the retry policy of every model call; nil: retry.Default().
	Retry *retry.Policy
	// Getenv, when set, is asked for what the fields above leave empty
	// (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OPENAI_API_KEY,
	// OPENAI_BASE_URL): os.LookupEnv reads the process's environment, as
	// the CLI does. nil: no variable is read.
	Getenv func(string) (string, bool)
}

// Endpoint is one provider's API root and key (ProviderOptions.Endpoints).
type Endpoint struct{ BaseURL, APIKey string }

// models opens the models of one runtime: the roots', and any other a
// definition or a tier names for a child. Fake specs all play the same
// scenario, so a scripted parent and its scripted children are one story.
type models struct {
	own     llm.Model // Options.Model, under ownSpec
	ownSpec string
	// script is the fake's scenario; nil: the built-in demo, made when a
	// fake model is first opened. scripted: the program gave one.
	script    *fake.Scenario
	scripted  bool
	noLatency bool
	provider  ProviderOptions
	// keyed is the provider ProviderOptions.BaseURL and APIKey are for:
	// Options.ModelSpec's ("" when it names none).
	keyed string
	// nonStreaming: nothing consumes deltas (Options.Stream is off), so
	// providers make the plain call.
	nonStreaming bool

	mu     sync.Mutex // children open models concurrently
	opened map[string]opened
}

type opened struct {
	model llm.Model
	name  string
}

// newModels is o's model opener; the scenario is parsed here, so a bad one
// is Open's error.
func newModels(o *Options) (*models, error) {
	ms := &models{own: o.Model, ownSpec: o.ModelSpec, noLatency: !o.FakeLatency, provider: o.Provider,
		nonStreaming: !o.Stream, scripted: o.Scenario != nil}
	if p, _, err := provider.Parse(o.ModelSpec); err == nil && !IsFake(o.ModelSpec) {
		ms.keyed = p
	}
	if o.Model != nil && ms.ownSpec == "" {
		ms.ownSpec = ProgramModel
	}
	if o.Scenario != nil {
		name := o.ScenarioName
		if name == "" {
			name = "Options.Scenario"
		}
		s, err := fake.ParseScenario(o.Scenario, name)
		if err != nil {
			return nil, err
		}
		ms.script = s
	}
	return ms, nil
}

// open returns the model a spec names and the model name its requests
// carry: the provider's own name (claude-sonnet-4-5, not
// anthropic:claude-sonnet-4-5), or "" for a program's own model, which
// names itself. One model per spec.
func (ms *models) open(spec string) (llm.Model, string, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if o, ok := ms.opened[spec]; ok {
		return o.model, o.name, nil
	}
	m, name, err := ms.make(spec)
	if err != nil {
		return nil, "", err
	}
	if ms.opened == nil {
		ms.opened = map[string]opened{}
	}
	ms.opened[spec] = opened{m, name}
	return m, name, nil
}

func (ms *models) make(spec string) (llm.Model, string, error) {
	switch {
	case spec == "":
		return nil, "", errors.New("no model: Options.ModelSpec and Options.Model are empty and the task names none")
	case spec == agent.PlannerModel:
		return agent.Planner{}, spec, nil // a program's fan-out root, whoever resumes it
	case ms.own != nil && spec == ms.ownSpec:
		return ms.own, "", nil
	case spec == ProgramModel:
		return nil, "", fmt.Errorf("%s is a program's own model (Options.Model): only a runtime opened with it runs it", spec)
	case IsFake(spec):
		if ms.script == nil {
			ms.script = fake.DemoScenario()
		}
		var opts []fake.ModelOption
		if ms.noLatency {
			opts = append(opts, fake.WithoutLatency())
		}
		return fake.NewModel(ms.script, opts...), spec, nil
	case ms.scripted:
		return nil, "", ErrScenarioNotFake
	}
	p, name, err := provider.Parse(spec)
	if err != nil {
		return nil, "", err
	}
	po := ms.provider
	var base, key string
	if p == ms.keyed {
		base, key = po.BaseURL, po.APIKey
	}
	if ep, ok := po.Endpoints[p]; ok {
		base, key = ep.BaseURL, ep.APIKey
	}
	if key == "" && po.Getenv == nil && p != ms.keyed && p != "ollama" {
		return nil, "", fmt.Errorf("model %s: no key for provider %s: ProviderOptions.APIKey is only for Options.ModelSpec's provider; give Endpoints[%q] or Getenv", spec, p, p)
	}
	m, err := provider.New(spec, provider.Options{HTTPClient: po.HTTPClient, Retry: po.Retry, BaseURL: base, APIKey: key,
		NonStreaming: ms.nonStreaming, Getenv: po.Getenv})
	if err != nil {
		return nil, "", err
	}
	return m, name, nil
}

// runnerModels is the opener in agent.Runner's shape, for children.
func (ms *models) runnerModels(spec string) (llm.Model, error) {
	m, _, err := ms.open(spec)
	return m, err
}
