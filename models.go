package deputy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/provider"
	"github.com/deputy-run/deputy/llm/retry"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
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

// ErrScenarioMismatch is in Open's error when an active root of the
// database was started on the fake model with another scenario than the
// runtime plays (Options.Scenario, or the built-in demo), and in
// RecordedScenario's when active roots were started on several: a runtime
// plays one scenario, and a run finished on other answers than it began
// with is not the run it was. Nothing is resumed or changed.
var ErrScenarioMismatch = errors.New("started on another scenario")

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
	script   *fake.Scenario
	scripted bool
	// recorded is what the runtime's fake roots record they play
	// (durable.Spec.Scenario): Options.Scenario, or the demo.
	recorded  durable.Scenario
	noLatency bool
	provider  ProviderOptions
	// keyed is the provider ProviderOptions.BaseURL and APIKey are for:
	// Options.ModelSpec's ("" when it names none).
	keyed string
	// nonStreaming: nothing consumes deltas (Options.Stream is off), so
	// providers make the plain call.
	nonStreaming bool
	// responses are the openai: models deputy.yaml puts on the Responses
	// API (Config.OpenAI.Responses).
	responses []string

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
		nonStreaming: !o.Stream, scripted: o.Scenario != nil, recorded: durable.Scenario{Name: "demo"}}
	if p, _, err := provider.Parse(o.ModelSpec); err == nil && !IsFake(o.ModelSpec) {
		ms.keyed = account(p)
	}
	if o.Config != nil {
		ms.responses = o.Config.OpenAI.Responses
	}
	if o.Model != nil && ms.ownSpec == "" {
		ms.ownSpec = ProgramModel
	}
	if o.Scenario != nil {
		name := o.ScenarioName
		if name == "" {
			name = "Options.Scenario"
		}
		if len(o.Scenario) > durable.MaxScenarioBytes {
			return nil, fmt.Errorf("scenario %s: %d bytes, more than the %d a run records (durable.MaxScenarioBytes)", name, len(o.Scenario), durable.MaxScenarioBytes)
		}
		ms.recorded = durable.Scenario{Name: name, YAML: string(o.Scenario)}
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
		return nil, "", fmt.Errorf("model %s: %w", spec, ErrScenarioNotFake)
	}
	p, name, err := provider.Parse(spec)
	if err != nil {
		return nil, "", err
	}
	po := ms.provider
	var base, key string
	acct := account(p)
	if acct == ms.keyed {
		base, key = po.BaseURL, po.APIKey
	}
	if ep, ok := po.Endpoints[p]; ok {
		base, key = ep.BaseURL, ep.APIKey
	} else if ep, ok := po.Endpoints[acct]; ok {
		base, key = ep.BaseURL, ep.APIKey
	}
	if key == "" && po.Getenv == nil && acct != ms.keyed && p != "ollama" {
		return nil, "", fmt.Errorf("model %s: no key for provider %s: ProviderOptions.APIKey is only for Options.ModelSpec's provider; give Endpoints[%q] or Getenv", spec, p, p)
	}
	m, err := provider.New(spec, provider.Options{HTTPClient: po.HTTPClient, Retry: po.Retry, BaseURL: base, APIKey: key,
		NonStreaming: ms.nonStreaming, Getenv: po.Getenv, Responses: ms.responses})
	if err != nil {
		return nil, "", err
	}
	return m, name, nil
}

// account is the provider whose endpoint and key a spec's provider uses:
// openai-responses is OpenAI's other wire, on the same account.
func account(p string) string {
	if p == "openai-responses" {
		return "openai"
	}
	return p
}

// runnerModels is the opener in agent.Runner's shape, for children.
func (ms *models) runnerModels(spec string) (llm.Model, error) {
	m, _, err := ms.open(spec)
	return m, err
}

// scenarioOf is what a root on model spec records it plays: the runtime's
// scenario when the spec is fake, nothing otherwise.
func (ms *models) scenarioOf(spec string) *durable.Scenario {
	if !IsFake(spec) {
		return nil
	}
	sc := ms.recorded
	return &sc
}

// plays reports whether the runtime plays the scenario a root recorded; a
// root that recorded none (not fake, or from before roots kept it) plays
// whatever the runtime does.
func (ms *models) plays(sc *durable.Scenario) bool {
	return sc == nil || sc.YAML == ms.recorded.YAML
}

// mismatch is the error for a root (id, or "" when unknown) recorded on sc,
// which the runtime does not play.
func (ms *models) mismatch(id string, sc *durable.Scenario) error {
	who := "a root"
	if id != "" {
		who = "instance " + id
	}
	return fmt.Errorf("deputy: %w: %s was started on %s, and this runtime plays %s: give it that scenario "+
		"(Options.Scenario; deputy worker --scenario %s), or cancel it", ErrScenarioMismatch, who, scenarioText(sc),
		scenarioText(&ms.recorded), sc.Name)
}

func scenarioText(sc *durable.Scenario) string {
	if sc.YAML == "" {
		return "the built-in demo"
	}
	return "scenario " + sc.Name
}

// guardTools refuses, as its tools are built, the run of a root recorded
// on a scenario the runtime does not play: one that reached this runtime
// after Open checked the active roots (queued later, taken over from
// another worker). The run fails with the error, rather than playing
// answers it never began with.
func (ms *models) guardTools(tools func(durable.Spec) (*tool.Set, error)) func(durable.Spec) (*tool.Set, error) {
	return func(s durable.Spec) (*tool.Set, error) {
		if !ms.plays(s.Scenario) {
			return nil, ms.mismatch("", s.Scenario)
		}
		return tools(s)
	}
}

// rootScenario is an active root's recorded scenario.
type rootScenario struct {
	id string
	sc *durable.Scenario
}

// activeScenarios lists the scenarios the active roots of st recorded
// (those created, running, asking or paused), skipping roots that recorded
// none.
func activeScenarios(ctx context.Context, st *store.Store) ([]rootScenario, error) {
	roots, err := st.ListInstances(ctx, store.Filter{OnlyRoots: true,
		States: []store.State{store.Created, store.Running, store.Asking, store.Paused}})
	if err != nil {
		return nil, fmt.Errorf("deputy: the active roots' scenarios: %w", err)
	}
	var out []rootScenario
	for _, in := range roots {
		var spec durable.Spec
		if err := json.Unmarshal(in.Definition, &spec); err != nil {
			return nil, fmt.Errorf("deputy: instance %s: its spec does not decode: %w", in.ID, err)
		}
		if spec.Scenario != nil {
			out = append(out, rootScenario{in.ID, spec.Scenario})
		}
	}
	return out, nil
}

// checkScenarios refuses a runtime whose database holds active roots
// recorded on a scenario it does not play, before any of them resumes.
func (ms *models) checkScenarios(ctx context.Context, st *store.Store) error {
	recs, err := activeScenarios(ctx, st)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if !ms.plays(r.sc) {
			return ms.mismatch(r.id, r.sc)
		}
	}
	return nil
}

// RecordedScenario returns the scenario the active roots of o's database
// (Options.DB, or Workspace's default) were started on with the fake
// model, for a runtime that only carries runs to play (deputy worker
// without --scenario): its name and YAML, nil YAML when that is the
// built-in demo or no root recorded one. Roots started on different
// scenarios are ErrScenarioMismatch, naming two of them.
func RecordedScenario(ctx context.Context, o Options) (name string, yaml []byte, err error) {
	p, err := prepare(o)
	if err != nil {
		return "", nil, err
	}
	st, err := store.Open(ctx, p.db, store.Options{})
	if err != nil {
		return "", nil, fmt.Errorf("deputy: %w", err)
	}
	defer st.Close()
	recs, err := activeScenarios(ctx, st)
	if err != nil || len(recs) == 0 {
		return "", nil, err
	}
	first := recs[0]
	for _, r := range recs[1:] {
		if r.sc.YAML != first.sc.YAML {
			return "", nil, fmt.Errorf("deputy: %w: instance %s was started on %s and instance %s on %s: a runtime plays one; "+
				"give one Options.Scenario (deputy worker --scenario FILE) and cancel the others, or finish them one scenario at a time",
				ErrScenarioMismatch, first.id, scenarioText(first.sc), r.id, scenarioText(r.sc))
		}
	}
	if first.sc.YAML == "" {
		return first.sc.Name, nil, nil
	}
	return first.sc.Name, []byte(first.sc.YAML), nil
}
