// Package deputy runs managed subagents from Go. Open a Runtime on a
// database with a model and the tools its agents may use, start a root
// instance with a task, and its model hands parts of the task to child
// agents (spawn_subagent, fan_out) that work in their own context windows
// and relay back bounded reports. Every instance is persisted and runs
// durably: a process that dies picks its instances up where they stopped
// when it opens the runtime again.
//
//	rt, err := deputy.Open(ctx, deputy.Options{
//		ModelSpec: "anthropic:claude-sonnet-4-5",
//		Provider:  deputy.ProviderOptions{APIKey: key, HTTPClient: client},
//		Tools:     tools, // what roots hold, exactly
//	})
//	if err != nil { ... }
//	defer rt.Close()
//	in, err := rt.Run(ctx, deputy.Task{Text: "Compare the two config loaders"})
//	fmt.Println(in.Report)
//
// ModelSpec "fake" is deputy's scripted model (Options.Scenario), which
// needs no network: every example here runs on it.
//
// # What Open reads
//
// Only what Options name. No environment variable of deputy's own: the
// database is Options.DB (default .deputy/deputy.db under Workspace), a
// provider's key and endpoint are Options.Provider's
// (ProviderOptions.Getenv reads ANTHROPIC_API_KEY and the rest only when
// the program sets it), there are no traces without Options.Telemetry.
// Two things do reach the process environment: a definition's MCP servers
// resolve ${VAR} in their settings from it, and bash runs with its
// allowlisted part (deputy.yaml's bash.env). No directory of definitions or
// skills but Options.Sources', no deputy.yaml but Options.Config
// (FindConfig and LoadConfig read one for a program that wants it). The
// command deputy (cmd/deputy) is this runtime with flags: reading its
// environment ($DEPUTY_DB, $DEPUTY_MODEL, ~/.deputy, the workspace's
// .deputy/ and .claude/, deputy.yaml, OTEL_*, $DEPUTY_LOG) is one step of
// its own that builds Options with the helpers exported here, as a program
// would.
//
// # Tools
//
// A root holds exactly Options.Tools (and Options.RunTools'), and its
// model is offered all of them with deputy's own coordination tools
// (spawn_subagent and fan_out while its depth allows, ask_parent, the
// subagent_* tools), unless Task.Offer (or Options.Offer) names what it is
// offered: a parent can hold tools for its children that its own model
// never sees. A child gets the held tools its definition allows. The
// built-in tools (files, bash, web) are not given unless asked for:
// BuiltinTools returns them. A fenced child (isolation: sandbox or
// container, worktree: true) runs fenced versions of only the built-ins
// its parent holds (a child of a root without bash gets no bash in its
// sandbox); the program's own tools keep running in the program.
//
// Tools are code, not data, so a root's later run (after an answer, a
// resume, a crash) rebuilds them: Options.Tools as the runtime running it
// has them (register them before Open, since runs recovered at Open start
// at once), and Options.RunTools from the Site the root recorded (its
// workspace, search URL and bash grants), for a process such as deputy
// worker that carries runs of many workspaces. What the model is offered,
// its system prompt, limits, model and deputy.yaml are recorded with the
// root, so a resumed run offers and does the same.
//
// # One process, or a fleet
//
// A runtime holds its database alone (LockEngine; another Open of it fails
// with ErrBusy) unless it is a worker of a fleet: Options.Fleet on
// Postgres. A worker works under Options.ExecutorID, or, when that is
// empty, this machine's id kept in Options.ExecutorIDFile (so a restarted
// worker recovers its own runs at once; a fresh id when a live process on
// this machine has it); it holds a lease and takes over the runs of workers
// that die. SQLite is always held by one process. The CLI makes every
// process on Postgres a worker; a program decides.
//
// A program that needs more than this package offers uses the packages
// under it (agent, durable, store) directly.
package deputy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// The types a program meets, from the packages that define them.
type (
	// Instance is an instance as stored: its state, report, usage.
	Instance = store.Instance
	// Definition is a subagent type.
	Definition = agentdef.Definition
	// Event is something an instance did (Subscribe).
	Event = agent.Event
	// Tool is a tool a program gives its agents.
	Tool = tool.Tool
	// Budget bounds a whole tree of instances in tokens and/or USD.
	Budget = agent.TreeBudget
	// Config maps model tiers to models and holds prices (deputy.yaml).
	Config = agentdef.Config
)

// States an instance settles in (Wait returns at these).
const (
	Completed = store.Completed // it answered: Report is its answer
	Failed    = store.Failed    // its model or a step of deputy's failed: Error says why
	TimedOut  = store.TimedOut  // its wall time ran out: Report is partial
	Cancelled = store.Cancelled // Cancel ended it, or its parent's end did
	Asking    = store.Asking    // it waits for an answer (Question, Answer)
	Paused    = store.Paused    // it waits for Resume
)

// DefaultSystem is a root's system prompt when neither Options nor Task
// names one.
const DefaultSystem = "You are deputy, an agent that completes the user's task by working in a workspace " +
	"directory with tools. Read before you change anything; make the smallest change that does the job; " +
	"check your work. When you are done, answer with a short report of what you did and what you found."

// Options configure a Runtime. The zero value is a runtime with no model
// of its own, no tools and no files read: one that carries runs others
// started (a worker). A program sets ModelSpec (or Model), and the Tools
// its roots hold.
type Options struct {
	// ModelSpec is the roots' model: provider:model (anthropic:claude-sonnet-4-5,
	// openai:gpt-4.1, ollama:llama3.1), reached through Provider, or
	// "fake", deputy's built-in scripted model, which needs no network.
	// With Model set, it is only the name Model is recorded and priced
	// under (default ProgramModel). Empty, with no Model: Start needs a
	// Task.Model.
	ModelSpec string
	// Model is the roots' model already opened, any llm.Model; a root on
	// it resumes only in a runtime opened with it. Children of a type that
	// inherits its parent's model run on it too.
	Model llm.Model
	// Provider is how every model the runtime opens by spec is reached
	// (the roots', and the tiers and models definitions name for
	// children): one HTTP client, endpoints and keys in code. The
	// environment is read only through Provider.Getenv.
	Provider ProviderOptions
	// Stream asks for streamed model calls, their deltas reaching OnEvent
	// and Subscribe as model_delta events, for a program that shows text
	// as it comes. Off (the default), providers make the plain call, which
	// costs less to read, with a trade-off: a plain answer shows no sign of
	// life until it is whole, so a hung connection is found only by the
	// retry policy's PlainTimeout (10 minutes by default), not by its
	// 5-minute StallTimeout, and an Anthropic call whose max_tokens the SDK
	// refuses without streaming streams anyway (no deltas passed on). The
	// CLI turns it on.
	Stream bool
	// Scenario is the fake model's script (YAML, see docs/scenarios.md);
	// nil: the built-in demo. ScenarioName names it in errors (a file's
	// path; default "Options.Scenario"). Given a Scenario, a model other
	// than the fake one is refused (ErrScenarioNotFake). FakeLatency keeps
	// the scenario's simulated latency (default off: as fast as it goes).
	//
	// A root on the fake model records the scenario it starts on (at most
	// durable.MaxScenarioBytes), so its later runs play the same answers:
	// Open refuses a database whose active roots were started on another
	// one (ErrScenarioMismatch; RecordedScenario reads theirs, for a
	// runtime that only carries runs), and a root that reaches the runtime
	// later on another one fails its run with that error.
	Scenario     []byte
	ScenarioName string
	FakeLatency  bool

	// Workspace is the roots' directory, recorded with each (Site): where
	// RunTools and the built-in tools work and fenced children's worktrees
	// and sandboxes are made. Default: the current directory. A workspace
	// where a fenced child's tripwire fired (.deputy/untrusted) is refused
	// until its user has reviewed the files it names.
	Workspace string
	// DB is a SQLite file (made when new) or a postgres:// URL. Default:
	// .deputy/deputy.db under Workspace.
	DB string

	// Tools are what every root of this runtime holds, exactly; a child
	// gets those its definition allows. Register them here, before Open,
	// so a run recovered at Open finds them. Default: none (BuiltinTools
	// gives deputy's own).
	Tools []Tool
	// RunTools, when set, gives each run of a root more tools, before
	// Tools: built from the Site the root recorded when it started, so a
	// runtime carrying runs of many workspaces (deputy worker) builds each
	// its own. BuiltinTools is one (the CLI's).
	RunTools func(Site) ([]Tool, error)
	// SearchURL is recorded as every root's Site.SearchURL: the
	// SearXNG-compatible search API that RunTools' web_search asks.
	SearchURL string
	// Offer is the default of Task.Offer: the names of the tools a root's
	// model is offered, out of those it holds and deputy's own. nil:
	// everything held, and deputy's coordination tools.
	Offer []string
	// System is the roots' system prompt; default DefaultSystem.
	System string

	// Definitions are subagent types of the program's own, above every
	// file of the same name (project level); one that does not check is
	// Open's error.
	Definitions []*Definition
	// Sources are the directories definitions and skills are read from
	// (Problems names a file that does not parse). Default: none; the
	// built-in types, the database's definitions and Definitions only.
	Sources Sources
	// Config is deputy.yaml's content (tiers to models, prices, isolation
	// limits, bash grants, MCP variables), recorded with every root it
	// starts; nil: an empty one (every tier inherits its parent's model,
	// costs unknown). Its telemetry section is not read: Telemetry asks
	// for traces.
	Config *Config

	// MaxTurns, MaxDepth, MaxParallel and Budget are the defaults of every
	// Task that sets none (see Task): MaxTurns 30 (loop.DefaultMaxTurns),
	// MaxDepth 1 (agent.DefaultMaxDepth: only the root spawns; negative:
	// no spawning), MaxParallel 8 (agent.DefaultMaxParallel: children of
	// one parent at once), Budget none.
	MaxTurns, MaxDepth, MaxParallel int
	Budget                          Budget
	// AskParent offers ask_parent to every managed instance that can be
	// answered, whatever its definition's tools allowlist says (its deny
	// list still removes it); off, a type asks only when its tools are
	// unlisted or list ask_parent (agent.Runner.AskParent).
	AskParent bool
	// Permissions, when set, are enforced on every call of every tree
	// (LoadPermissions reads a workspace's): each child's narrowed from
	// its parent's, a call an ask rule or the mode holds waits for
	// approval (Runtime.Approval, Approve, Deny). nil: nothing is enforced.
	Permissions *Permissions
	// Home anchors `~/` permission rules ("" for none).
	Home string
	// Hooks, when set, are the Claude Code hooks every instance runs
	// (agent.Hooks): the CLI loads them from Claude Code's settings files
	// (LoadHooks).
	Hooks *agent.Hooks
	// MaxRuns caps the runs this process carries at once, roots' and
	// children's over every tree (default durable.DefaultMaxRuns, 64); a
	// run waiting for its children gives its place up meanwhile.
	MaxRuns int

	// OnEvent, when set, hears every event of every instance this runtime
	// runs from Open on, those of the runs Open resumes included (Subscribe
	// adds listeners later); as Subscribe's, it must be quick and safe for
	// concurrent use.
	OnEvent func(Event)
	// Telemetry, when set, traces every instance (OpenTelemetry, OTLP/HTTP).
	// Default: no traces, whatever the environment says.
	Telemetry *Telemetry
	// Logger hears the durable engine's own log (DBOS's recovery, queues,
	// workflow errors, drains); nil: discarded.
	Logger *slog.Logger

	// Fleet, on Postgres, makes this process one of the database's
	// workers: it works under ExecutorID, or when that is empty under this
	// machine's id (kept in ExecutorIDFile; a fresh one when a live process
	// on this machine works under it), holds a lease and takes over the
	// runs of workers that die. Without it (and on SQLite, which is held
	// by one process at a time) the runtime holds the database alone, and
	// another Open of it fails with ErrBusy.
	Fleet bool
	// ExecutorID is this worker's id among the database's workers
	// (letters, digits, '.', '_', '-'), which must be its own; it makes the
	// runtime a worker of a fleet, and is refused on SQLite.
	ExecutorID string
	// ExecutorIDFile keeps this machine's executor id; default
	// UserDir()/executor-id.
	ExecutorIDFile string
	// Lease is a worker's lease (default durable.DefaultLease, 15 s): once
	// it has not renewed it for this long, another worker takes its runs
	// over.
	Lease time.Duration
	// FleetMaxRuns caps the queued runs all the workers carry at once
	// (give every worker the same); 0: only each worker's MaxRuns.
	FleetMaxRuns int
	// OnLeaseLost is called once if the worker is cut off from the
	// database long enough to lose its lease, after its runs here were
	// stopped: nothing it runs may write again. nil: durable's default,
	// which says why on stderr and exits the process with status
	// durable.ExitLeaseLost (5).
	OnLeaseLost func(error)

	// Failpoint is for deputy's crash tests only: it makes the process
	// kill itself at a step boundary (durable.Options.Failpoint).
	Failpoint string
}

// Task is a root instance's work and limits. Zero limits take the
// runtime's (Options), then deputy's defaults.
type Task struct {
	// Text is the task, the root's first message.
	Text string
	// System is the root's system prompt; default Options.System.
	System string
	// Model is what the root runs on: provider:model, fake, or a tier
	// (haiku, sonnet, opus: through deputy.yaml; Options' model when it
	// maps none). Default: its type's model when it has a Type that names
	// one, else Options.ModelSpec (or Model).
	Model string
	// Type, when set, names the subagent type (Definitions) the root runs
	// as, exactly as an agent's spawn of it would: the type's system
	// prompt and report bound, its skills, its allowed tools, model,
	// limits, tool choice and spawn rights (System is unused). An unknown
	// type, or one that asks for isolation or a worktree (which deputy
	// builds only for spawned children), is refused by Start with nothing
	// recorded. The instance's type is the definition's name and its
	// report is capped like a child's.
	Type string
	// Offer names the tools the root's model is offered, out of those it
	// holds (Options.Tools, RunTools') and deputy's own (spawn_subagent,
	// fan_out, ask_parent, subagent_*); the rest it holds stay for its
	// children. A name that is neither fails the run at its start. nil:
	// Options.Offer; both nil: everything it holds, with deputy's tools
	// while its depth allows.
	Offer []string
	// MaxTurns bounds the root's model calls (default Options.MaxTurns,
	// else 30); MaxDepth how deep its tree may grow (default
	// Options.MaxDepth, else 1: only the root spawns; negative: no
	// spawning); MaxParallel how many children of one parent run at once
	// (default Options.MaxParallel, else 8).
	MaxTurns, MaxDepth, MaxParallel int
	// Budget bounds the whole tree (default Options.Budget, else none).
	Budget Budget
	// WallTime bounds the time the root spends running, over all its runs.
	WallTime time.Duration
}

// Runtime runs instances on one database. It is safe for concurrent use.
// One process at a time runs instances on a database, unless each is a
// worker of a fleet (Options.Fleet, Postgres).
type Runtime struct {
	*prepared
	eng      *durable.Engine
	st       *store.Store
	control  durable.Control
	unlock   func()
	executor string
	fresh    bool
	// closeTel ends the spans still open and flushes them (a no-op when
	// traces are off).
	closeTel func() error
	// problems are what Open skipped or could not do without failing;
	// cleaned the instances whose worktrees it removed.
	problems []error
	cleaned  []string

	closeOnce sync.Once
	drained   bool
	closeErr  error

	mu   sync.Mutex
	subs map[int]func(Event)
	next int
}

// ErrSkipped is in each of Problems' errors about a definition or skill
// file left out because it does not parse (file:line).
var ErrSkipped = errors.New("skipped")

// Problems returns what Open skipped or could not do without failing: a
// definition or skill file of Sources that does not parse (ErrSkipped,
// with its file:line), a failed clean-up after a dead process, roots
// recorded but never started that could not be started.
func (rt *Runtime) Problems() []error { return slices.Clone(rt.problems) }

// CleanedUp returns the instances whose worktrees Open removed: a process
// that died left them, and they have ended (their branches stay, for
// deputy merge).
func (rt *Runtime) CleanedUp() []string { return slices.Clone(rt.cleaned) }

// ExecutorID is the id this runtime works under among the database's
// workers ("" when it holds the database alone). fresh: this machine's id
// was in use by a live process, so it works under a fresh one, not kept.
func (rt *Runtime) ExecutorID() (id string, fresh bool) { return rt.executor, rt.fresh }

// prepared is what Open and Enqueue make of Options before a database is
// touched: the workspace, the model opener (the roots' model checked), the
// configuration and the catalog of files.
type prepared struct {
	o      Options
	ws     string
	cfg    *Config
	ms     *models
	cat    *agentdef.Catalog
	skills map[string]*agentdef.Skill
	issues []agentdef.Issue
	db     string
}

func prepare(o Options) (*prepared, error) {
	// The runtime keeps its own copies: a program changing its slices or
	// its Config after Open would otherwise race with the runs reading
	// them.
	o.Tools, o.Definitions, o.Offer = slices.Clone(o.Tools), slices.Clone(o.Definitions), slices.Clone(o.Offer)
	if o.Config != nil {
		c := *o.Config
		c.Tiers, c.Prices = maps.Clone(c.Tiers), maps.Clone(c.Prices)
		o.Config = &c
	}
	if o.ExecutorID != "" {
		if err := checkExecutorID(o.ExecutorID); err != nil {
			return nil, fmt.Errorf("deputy: Options.ExecutorID: %w", err)
		}
	}
	ws, err := filepath.Abs(cmp.Or(o.Workspace, "."))
	if err != nil {
		return nil, fmt.Errorf("deputy: workspace: %w", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("deputy: workspace %s is not a directory", ws)
	}
	if err := checkTrusted(ws, o.Sources.Project); err != nil {
		return nil, fmt.Errorf("deputy: %w", err)
	}
	ms, err := newModels(&o)
	if err != nil {
		return nil, fmt.Errorf("deputy: %w", err)
	}
	// The roots' model is opened now, so a bad spec or a missing key is
	// one error before anything is recorded.
	if spec := ms.ownSpec; spec != "" && o.Model == nil {
		if _, _, err := ms.open(spec); err != nil {
			return nil, fmt.Errorf("deputy: %w", err) // the error names the model already
		}
	}
	p := &prepared{o: o, ws: ws, cfg: cmp.Or(o.Config, &Config{}), ms: ms,
		db: cmp.Or(o.DB, filepath.Join(ws, ".deputy", "deputy.db"))}
	if p.cat, p.skills, p.issues, err = loadCatalog(o.Sources, o.Definitions); err != nil {
		return nil, fmt.Errorf("deputy: definitions: %w", err)
	}
	return p, nil
}

// Open opens the database (creating it when it is a new SQLite file),
// starts the engine, resumes the instances a previous process left
// running, and starts roots recorded but never started (a process died in
// between, or they were queued with Enqueue).
func Open(ctx context.Context, o Options) (*Runtime, error) {
	p, err := prepare(o)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, p.db, store.Options{})
	if err != nil {
		return nil, fmt.Errorf("deputy: %w", err)
	}
	rt := &Runtime{prepared: p, st: st, unlock: func() {}, subs: map[int]func(Event){}}
	if err := rt.hold(ctx); err != nil {
		st.Close()
		return nil, err
	}
	// Before the engine opens, which resumes the active roots at once. A
	// worker of a fleet carries only some of them, found later: its guard
	// (guardTools) checks each as it comes.
	if rt.executor == "" {
		if err := p.ms.checkScenarios(ctx, st); err != nil {
			rt.unlock()
			st.Close()
			return nil, err
		}
	}
	tel, closeTel, err := startTelemetry(ctx, o.Telemetry, st)
	if err != nil {
		rt.unlock()
		st.Close()
		return nil, fmt.Errorf("deputy: %w", err)
	}
	for _, is := range p.issues {
		rt.problems = append(rt.problems, fmt.Errorf("%w: %w", ErrSkipped, is))
	}
	pgURL := ""
	if st.Dialect() == store.Postgres {
		pgURL = p.db
	}
	opts := durable.Options{
		Store:  st,
		URL:    pgURL,
		Logger: o.Logger,
		Models: p.ms.open,
		Tools:  p.ms.guardTools(toolsOf(&p.o)),
		Fence:  fenceOf,
		// MaxDepth and MaxParallel come with each run's spec.
		Runner: agent.Runner{Catalog: p.cat, Skills: p.skills, Config: p.cfg, Models: p.ms.runnerModels, Stream: o.Stream,
			AskParent: o.AskParent, Permissions: agentPermissions(o), Hooks: o.Hooks},
		// Every event of the runs Open resumes too: the engine starts
		// them as it opens.
		OnEvent:      tel.Hook(rt.publish),
		MaxRuns:      o.MaxRuns,
		FleetMaxRuns: o.FleetMaxRuns,
		OnLeaseLost:  o.OnLeaseLost,
		Failpoint:    o.Failpoint,
	}
	if rt.executor != "" {
		opts.ExecutorID, opts.Lease = rt.executor, cmp.Or(o.Lease, durable.DefaultLease)
	}
	if rt.eng, err = durable.Open(ctx, opts); err != nil {
		_ = closeTel()
		rt.unlock()
		st.Close()
		return nil, fmt.Errorf("deputy: %w", err)
	}
	rt.closeTel = closeTel
	rt.control = durable.Control{Store: st, URL: pgURL, Engine: rt.eng}
	// What a process that died left in the workspace's repository; a
	// failure to clean up is no reason not to run, but it is said.
	if rt.cleaned, err = recoverFences(ctx, st, p.ws); err != nil {
		rt.problems = append(rt.problems, fmt.Errorf("cleaning up after a dead process: %w", err))
	}
	// Failing to start the roots recorded but never started leaves them
	// recorded, for the next Open or a worker: the runtime is still good
	// for everything else, so it is a problem, not a failed Open.
	if _, err := rt.eng.Adopt(ctx); err != nil {
		rt.problems = append(rt.problems, fmt.Errorf("starting roots recorded but never started: %w", err))
	}
	return rt, nil
}

// hold takes the database for this runtime: as a worker of a fleet under
// its executor id (Postgres, Options.Fleet or ExecutorID), else alone,
// under the engine lock.
func (rt *Runtime) hold(ctx context.Context) error {
	o := rt.o
	pg := rt.st.Dialect() == store.Postgres
	switch {
	case o.ExecutorID != "" && !pg:
		return errors.New("deputy: Options.ExecutorID needs a Postgres database: SQLite is held by one process at a time")
	case o.ExecutorID != "":
		rt.executor = o.ExecutorID
		return nil
	case o.Fleet && pg:
		file := o.ExecutorIDFile
		if file == "" {
			dir, err := UserDir()
			if err != nil {
				return fmt.Errorf("deputy: executor id: %w", err)
			}
			file = filepath.Join(dir, "executor-id")
		}
		var err error
		if rt.executor, rt.fresh, err = machineExecutorID(ctx, rt.st, file); err != nil {
			return fmt.Errorf("deputy: %w", err)
		}
		return nil
	}
	unlock, err := LockEngine(ctx, rt.st, rt.db)
	if err != nil {
		return fmt.Errorf("deputy: %w", err)
	}
	rt.unlock = unlock
	return nil
}

// Close stops the engine, letting running steps end for up to
// durable.DefaultDrain; unfinished instances resume at the next Open.
func (rt *Runtime) Close() error {
	_, err := rt.CloseContext(context.Background(), durable.DefaultDrain)
	return err
}

// CloseContext is Close with the drain's bound given: no step starts any
// more, and steps still running after drain, or when ctx ends (a second
// signal), are cut off and reported interrupted when their runs resume.
// drained reports whether every running step finished within the drain (a
// cut drain is not an error: nothing is lost, the runs resume); err is
// closing the store's and the telemetry's. Later calls do nothing and
// report the first's.
func (rt *Runtime) CloseContext(ctx context.Context, drain time.Duration) (drained bool, err error) {
	rt.closeOnce.Do(func() {
		rt.drained = rt.eng.CloseContext(ctx, drain)
		telErr := rt.closeTel() // after the engine: its last events are spans too
		rt.unlock()
		rt.closeErr = errors.Join(rt.st.Close(), telErr)
	})
	return rt.drained, rt.closeErr
}

// Start records a root instance and starts it in the background; its id
// names it to Wait and the controls. A task the runtime cannot run (an
// unknown type, a model that cannot be opened) is refused with ErrRefused
// and nothing recorded.
func (rt *Runtime) Start(ctx context.Context, t Task) (string, error) {
	spec := rt.spec(t, rt.Definition)
	if err := hasModel(spec); err != nil {
		return "", err
	}
	if err := rt.checkOffer(spec.Offer); err != nil {
		return "", err
	}
	return rt.eng.Start(ctx, t.Text, spec)
}

// checkOffer refuses an Offer naming a tool no root can be offered, before
// anything is recorded (the run's own check would end a recorded instance
// failed): what Options.Tools holds and deputy serves. With RunTools, the
// names may be its tools, known only when it builds them for the root's
// Site: the run's start checks them then.
func (p *prepared) checkOffer(offer []string) error {
	if offer == nil || p.o.RunTools != nil {
		return nil
	}
	known := map[string]bool{"task": true} // spawn_subagent's other name (agent's alias)
	for _, n := range agentdef.RuntimeTools() {
		known[n] = true
	}
	for _, t := range p.o.Tools {
		if t != nil {
			known[t.Spec().Name] = true
		}
	}
	var bad []string
	for _, n := range offer {
		if !known[n] {
			bad = append(bad, n)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("deputy: %w: Task.Offer (or Options.Offer) names %s: neither in Options.Tools (and there is no Options.RunTools) nor one of deputy's own tools", ErrRefused, strings.Join(bad, ", "))
	}
	return nil
}

// hasModel refuses a root that would run on no model: the runtime has none
// of its own and the task names none.
func hasModel(s durable.Spec) error {
	if s.Model == "" {
		return fmt.Errorf("deputy: %w: no model: the runtime has none (Options.ModelSpec, Options.Model) and the task names none (Task.Model)", ErrRefused)
	}
	return nil
}

// Enqueue records a root instance and queues its run for the workers of
// the database (a Runtime opened on it, deputy worker), without an engine
// here: it takes no lock, so it works while another process holds the
// database. Its Options are those a Runtime would be opened with; the
// roots' model is checked as Open checks it, and a Task's Type is looked up
// by the worker that runs it. A root on Options.Model is refused
// (ErrRefused): no worker holds the program's model.
func Enqueue(ctx context.Context, o Options, t Task) (string, error) {
	p, err := prepare(o)
	if err != nil {
		return "", err
	}
	spec := p.spec(t, p.cat.Lookup)
	if err := hasModel(spec); err != nil {
		return "", err
	}
	if err := p.checkOffer(spec.Offer); err != nil {
		return "", err
	}
	if o.Model != nil && spec.Model == p.ms.ownSpec {
		// The workers that take queued runs are other runtimes: none has
		// this program's model object, so the root would fail there.
		return "", fmt.Errorf("deputy: %w: the root would run on Options.Model, a program's own model, which only a runtime opened with it runs, and Enqueue leaves the run to the database's workers: name a model by spec (Options.ModelSpec without Model, or Task.Model), or Start it on a Runtime", ErrRefused)
	}
	st, err := store.Open(ctx, p.db, store.Options{})
	if err != nil {
		return "", fmt.Errorf("deputy: %w", err)
	}
	defer st.Close()
	pgURL := ""
	if st.Dialect() == store.Postgres {
		pgURL = p.db
	}
	id, err := durable.Enqueue(ctx, st, pgURL, t.Text, spec)
	if err != nil {
		return "", fmt.Errorf("deputy: %w", err)
	}
	return id, nil
}

// spec is what a root of task t records: t's choices, the runtime's
// defaults for what it leaves out. lookup finds its type.
func (p *prepared) spec(t Task, lookup func(string) (*Definition, bool)) durable.Spec {
	o := p.o
	model := t.Model
	if tier, _, ok := agentdef.ParseModel(model); ok && tier != "" && model != "" {
		// A tier, as a spawn may name one: its model through deputy.yaml,
		// the runtime's when it has none.
		model, _ = p.cfg.ResolveModel(model)
		model = cmp.Or(model, p.ms.ownSpec)
	}
	var def *Definition
	if t.Type != "" {
		// Looked up once, here: the engine records this snapshot (an
		// unknown type is left to its Start to refuse).
		var ok bool
		if def, ok = lookup(t.Type); ok && model == "" {
			if pm, inherit := p.cfg.ResolveModel(def.Model); !inherit {
				model = pm
			}
		}
	}
	offer := t.Offer
	if offer == nil {
		offer = o.Offer
	}
	budget := t.Budget
	if budget == (Budget{}) {
		budget = o.Budget
	}
	return durable.Spec{
		Type:        t.Type,
		Definition:  def,
		System:      cmp.Or(t.System, o.System, DefaultSystem),
		Model:       cmp.Or(model, p.ms.ownSpec),
		Workspace:   p.ws,
		SearchURL:   o.SearchURL,
		Offer:       offer,
		MaxTurns:    cmp.Or(t.MaxTurns, o.MaxTurns),
		MaxDepth:    cmp.Or(t.MaxDepth, o.MaxDepth),
		MaxParallel: cmp.Or(t.MaxParallel, o.MaxParallel),
		Budget:      budget,
		WallTime:    t.WallTime,
		Config:      p.cfg,
		Scenario:    p.ms.scenarioOf(cmp.Or(model, p.ms.ownSpec)),
	}
}

// Run starts a root instance and waits for it to settle.
func (rt *Runtime) Run(ctx context.Context, t Task) (*Instance, error) {
	id, err := rt.Start(ctx, t)
	if err != nil {
		return nil, err
	}
	return rt.Wait(ctx, id)
}

// Wait blocks until instance id settles: it ended, or it waits for
// someone (Asking: Question says what, Answer goes on; Paused: Resume). It
// follows the instance over its runs: an answer or a resume starts the
// next one, which Wait waits for too.
func (rt *Runtime) Wait(ctx context.Context, id string) (*Instance, error) {
	return rt.eng.Settle(ctx, id)
}

// WaitRun blocks until the current run of root instance id ends (it
// ended, it asks, it was paused) and returns the instance as stored. Unlike
// Wait it does not follow the instance into a later run; its error says
// when the run itself failed (then Resumable tells whether a worker
// carries it on).
func (rt *Runtime) WaitRun(ctx context.Context, id string) (*Instance, error) {
	return rt.eng.Wait(ctx, id)
}

// Resumable reports whether root instance id stopped without ending and a
// worker will carry it on from its last finished step: this process
// stopping (a drain) or dying leaves its runs so.
func (rt *Runtime) Resumable(ctx context.Context, id string) (bool, error) {
	return rt.eng.Resumable(ctx, id)
}

// Idle reports whether nothing is left for this runtime to do: no instance
// created or running and no run queued or in progress. An instance asking
// or paused waits for someone else, and does not count.
func (rt *Runtime) Idle(ctx context.Context) (bool, error) { return rt.eng.Idle(ctx) }

// Get returns instance id as stored now.
func (rt *Runtime) Get(ctx context.Context, id string) (*Instance, error) {
	return rt.st.GetInstance(ctx, id)
}

// Children returns the instances parent spawned, oldest first.
func (rt *Runtime) Children(ctx context.Context, parent string) ([]*Instance, error) {
	return rt.st.ListInstances(ctx, store.Filter{Parent: parent})
}

// Transcript returns everything instance id read and wrote.
func (rt *Runtime) Transcript(ctx context.Context, id string) ([]llm.Message, error) {
	return rt.st.Transcript(ctx, id)
}

// Question returns the open question of an instance that asks, or "".
func (rt *Runtime) Question(ctx context.Context, id string) (string, error) {
	q, err := rt.control.Question(ctx, id)
	if err != nil || q == nil {
		return "", err
	}
	return q.Body, nil
}

// Answer answers an asking root instance; its next run starts with the
// answer. (A child's question is its parent's to answer.)
func (rt *Runtime) Answer(ctx context.Context, id, answer string) error {
	if err := rt.root(ctx, id, "answered"); err != nil {
		return err
	}
	return rt.control.Answer(ctx, id, answer)
}

// Send gives a root instance a message it reads at its next turn.
func (rt *Runtime) Send(ctx context.Context, id, text string) error {
	if err := rt.root(ctx, id, "sent messages"); err != nil {
		return err
	}
	return rt.control.Send(ctx, id, durable.Operator, text)
}

// Pause stops an instance at its next turn boundary; Resume goes on.
func (rt *Runtime) Pause(ctx context.Context, id string) error { return rt.control.Pause(ctx, id) }

// Resume starts the next run of a paused instance.
func (rt *Runtime) Resume(ctx context.Context, id string) error { return rt.control.Resume(ctx, id) }

// Cancel ends an instance and its descendants, keeping their transcripts
// and partial reports (a fenced child's worktree or snapshot is dropped,
// as for any child that did not complete).
func (rt *Runtime) Cancel(ctx context.Context, id string) error { return rt.control.Cancel(ctx, id) }

// root refuses what only a root's person may do to a child (its parent
// answers and steers it).
func (rt *Runtime) root(ctx context.Context, id, what string) error {
	in, err := rt.st.GetInstance(ctx, id)
	if err != nil {
		return err
	}
	if in.Parent != "" {
		return fmt.Errorf("deputy: %w: %s is a subagent of %s: only its parent may be %s with it", ErrNotRoot, id, in.Parent, what)
	}
	return nil
}

// ErrNotRoot refuses to a program what only a child's parent may do:
// answer it, send it messages.
var ErrNotRoot = errors.New("not a root instance")

// ErrRefused is in the error of a Start refused for what it asked (an
// unknown type, one that cannot run as a root, a model that cannot be
// opened), with nothing recorded.
var ErrRefused = durable.ErrRefused

// Subscribe calls fn with every event of every instance this runtime
// runs, from the goroutines that run them (fn must be quick and safe for
// concurrent use), until the returned function is called.
func (rt *Runtime) Subscribe(fn func(Event)) (unsubscribe func()) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := rt.next
	rt.next++
	rt.subs[n] = fn
	return func() {
		rt.mu.Lock()
		delete(rt.subs, n)
		rt.mu.Unlock()
	}
}

func (rt *Runtime) publish(e Event) {
	if rt.o.OnEvent != nil {
		rt.o.OnEvent(e)
	}
	rt.mu.Lock()
	fns := make([]func(Event), 0, len(rt.subs))
	for _, fn := range rt.subs {
		fns = append(fns, fn)
	}
	rt.mu.Unlock()
	for _, fn := range fns {
		fn(e)
	}
}
