// Package deputy runs managed subagents from Go: open a Runtime on a
// database, start an instance with a task, and its model delegates parts
// of it to child agents (spawn_subagent, fan_out) that work in their own
// context windows and relay back bounded reports. Every instance is
// persisted and runs durably: a process that dies picks its instances up
// where they stopped when it opens the runtime again.
//
//	rt, err := deputy.Open(ctx, deputy.Options{Model: "anthropic:claude-sonnet-4-5"})
//	...
//	defer rt.Close()
//	in, err := rt.Run(ctx, deputy.Task{Text: "Compare the two config loaders"})
//	fmt.Println(in.Report)
//
// The CLI (cmd/deputy) is this runtime with flags; a program that needs
// more than this package offers uses the packages under it (agent,
// durable, store) directly.
package deputy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/internal/setup"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
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
	Completed = store.Completed
	Failed    = store.Failed
	TimedOut  = store.TimedOut
	Cancelled = store.Cancelled
	Asking    = store.Asking
	Paused    = store.Paused
)

// DefaultSystem is a root's system prompt when neither Options nor Task
// names one.
const DefaultSystem = "You are deputy, an agent that completes the user's task by working in a workspace " +
	"directory with tools. Read before you change anything; make the smallest change that does the job; " +
	"check your work. When you are done, answer with a short report of what you did and what you found."

// Options configure a Runtime. Only Model is required.
type Options struct {
	// DB is a SQLite file or a postgres:// URL. Default: $DEPUTY_DB, else
	// .deputy/deputy.db under Workspace.
	DB string
	// Model is the roots' model: provider:model (anthropic:claude-sonnet-4-5,
	// openai:gpt-4.1, ollama:llama3.1) or "fake", deputy's built-in
	// scripted model, which needs no network.
	Model string
	// Scenario is the fake model's script (YAML, see llm/fake); nil: the
	// built-in demo. FakeLatency keeps the fake's simulated latency.
	Scenario    []byte
	FakeLatency bool
	// Workspace is the directory the built-in tools work in and where
	// .deputy/agents, .claude/agents, skills and deputy.yaml are read.
	// Default: the current directory.
	Workspace string
	// Config is deputy.yaml's content; nil: Workspace's deputy.yaml, if any.
	Config *Config
	// Tools are given to every root beside the built-ins; a child gets
	// those its definition allows. Register them here, before Open, so a
	// run recovered at Open finds them.
	Tools []Tool
	// Definitions are subagent types of the program's own, above the
	// workspace's files of the same name.
	Definitions []*Definition
	// System is the roots' system prompt; default DefaultSystem.
	System string
	// MaxRuns caps the runs this process carries at once (durable.DefaultMaxRuns
	// when 0).
	MaxRuns int
	// ExecutorID, on Postgres, makes this process one of the database's
	// workers (several processes, on several machines): it works under
	// this id, which must be its own, holds a lease, and takes over the
	// runs of workers that die (setup.ExecutorID picks one). Empty: the
	// process holds the database alone, and another Open of it is refused
	// while it runs. SQLite is held by one process at a time.
	ExecutorID string
	// Lease is a worker's lease (durable.DefaultLease when 0).
	Lease time.Duration
}

// Task is a root instance's work and limits. Zero limits take deputy's
// defaults.
type Task struct {
	Text   string
	System string // default: Options.System
	// Model is what the root runs on: provider:model, fake, or a tier
	// (haiku, sonnet, opus: through deputy.yaml; Options.Model when it
	// maps none). Default: its type's model when it has a Type that names
	// one, else Options.Model.
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
	// MaxTurns bounds the root's model calls (default 30); MaxDepth how
	// deep its tree may grow (default 1: only the root spawns; negative:
	// no spawning); MaxParallel how many children of one parent run at
	// once (default 8).
	MaxTurns, MaxDepth, MaxParallel int
	Budget                          Budget
	// WallTime bounds the time the root spends running, over all its runs.
	WallTime time.Duration
}

// Runtime runs instances on one database. It is safe for concurrent use.
// One process at a time runs instances on a database, unless each is a
// worker under its own Options.ExecutorID (Postgres).
type Runtime struct {
	eng     *durable.Engine
	st      *store.Store
	control durable.Control
	opts    Options
	ws      string
	cfg     *Config
	unlock  func()
	// closeTel ends the spans still open and flushes them (package
	// telemetry; a no-op when traces are off).
	closeTel func() error

	// problems are what Open skipped or could not do without failing:
	// a definition or skill file that does not parse, a failed clean-up.
	problems []error

	mu   sync.Mutex
	subs map[int]func(Event)
	next int
}

// Problems returns what Open skipped or could not do without failing: a
// definition or skill file of the workspace that does not parse (file:line),
// a failed clean-up after a dead process.
func (rt *Runtime) Problems() []error { return slices.Clone(rt.problems) }

// Open opens the database (creating it when it is a new SQLite file),
// starts the engine and resumes the instances a previous process left
// running.
func Open(ctx context.Context, o Options) (*Runtime, error) {
	if o.Model == "" {
		return nil, errors.New("deputy: Options.Model is empty (a provider:model, or fake)")
	}
	ws, err := filepath.Abs(cmp.Or(o.Workspace, "."))
	if err != nil {
		return nil, fmt.Errorf("deputy: workspace: %w", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("deputy: workspace %s is not a directory", ws)
	}
	ms := &setup.Models{NoLatency: !o.FakeLatency}
	if o.Scenario != nil {
		if ms.Script, err = fake.ParseScenario(o.Scenario, "Options.Scenario"); err != nil {
			return nil, fmt.Errorf("deputy: %w", err)
		}
	}
	if _, _, err := ms.Open(o.Model); err != nil {
		return nil, fmt.Errorf("deputy: model %s: %w", o.Model, err)
	}
	cfg := o.Config
	if cfg == nil {
		if cfg, err = setup.LoadConfig(ws, "", o.Model); err != nil {
			return nil, fmt.Errorf("deputy: %w", err)
		}
	}
	runner, issues, err := setup.Runner(ws, cfg, ms, o.Definitions)
	if err != nil {
		return nil, fmt.Errorf("deputy: definitions: %w", err)
	}
	url := o.DB
	if url == "" {
		url = cmp.Or(os.Getenv("DEPUTY_DB"), filepath.Join(ws, ".deputy", "deputy.db"))
	}
	st, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		return nil, fmt.Errorf("deputy: %w", err)
	}
	unlock := func() {}
	switch {
	case o.ExecutorID != "" && st.Dialect() != store.Postgres:
		st.Close()
		return nil, errors.New("deputy: Options.ExecutorID needs a Postgres database: SQLite is held by one process at a time")
	case o.ExecutorID == "":
		if unlock, err = setup.LockEngine(ctx, st, url); err != nil {
			st.Close()
			return nil, fmt.Errorf("deputy: %w", err)
		}
	}
	// Traces, when an OTLP endpoint variable or deputy.yaml asks for them.
	tel, closeTel, err := setup.Telemetry(ctx, cfg, st, nil)
	if err != nil {
		unlock()
		st.Close()
		return nil, fmt.Errorf("deputy: %w", err)
	}
	rt := &Runtime{st: st, opts: o, ws: ws, cfg: cfg, unlock: unlock, subs: map[int]func(Event){}}
	for _, is := range issues {
		rt.problems = append(rt.problems, is)
	}
	pgURL := ""
	if st.Dialect() == store.Postgres {
		pgURL = url
	}
	rt.eng, err = durable.Open(ctx, durable.Options{
		Store:   st,
		URL:     pgURL,
		Models:  ms.Open,
		Tools:   setup.Tools(o.Tools...),
		Fence:   setup.Fence(),
		Runner:  *runner,
		OnEvent: tel.Hook(rt.publish),
		MaxRuns: o.MaxRuns,
		// A worker of a fleet; alone on the database, "local".
		ExecutorID: o.ExecutorID,
		Lease:      leaseOf(o),
	})
	if err != nil {
		_ = closeTel()
		unlock()
		st.Close()
		return nil, fmt.Errorf("deputy: %w", err)
	}
	rt.closeTel = closeTel
	rt.control = durable.Control{Store: st, URL: pgURL, Engine: rt.eng}
	// What a process that died left in the workspace's repository; a
	// failure to clean up is no reason not to run, but it is said.
	if _, err := setup.Recover(ctx, st, ws); err != nil {
		rt.problems = append(rt.problems, fmt.Errorf("cleaning up after a dead process: %w", err))
	}
	// Roots recorded but never started (a process died in between, or
	// `deputy run --detach` queued them) start now. Failing that leaves
	// them recorded, for the next Open or a worker: the runtime is still
	// good for everything else, so it is a problem, not a failed Open.
	if _, err := rt.eng.Adopt(ctx); err != nil {
		rt.problems = append(rt.problems, fmt.Errorf("starting roots recorded but never started: %w", err))
	}
	return rt, nil
}

func leaseOf(o Options) time.Duration {
	if o.ExecutorID == "" {
		return 0
	}
	return cmp.Or(o.Lease, durable.DefaultLease)
}

// Close stops the engine, letting running steps end for up to
// durable.DefaultDrain; unfinished instances resume at the next Open.
func (rt *Runtime) Close() error {
	_, err := rt.CloseContext(context.Background(), durable.DefaultDrain)
	return err
}

// CloseContext is Close with the drain's bound given: steps still running
// after drain, or when ctx ends (a second signal), are cut off and
// reported interrupted when their runs resume. drained reports whether
// every running step finished within the drain (a cut drain is not an
// error: nothing is lost, the runs resume); err is closing the store's
// and the telemetry's. Later calls report the first's drained.
func (rt *Runtime) CloseContext(ctx context.Context, drain time.Duration) (drained bool, err error) {
	drained = rt.eng.CloseContext(ctx, drain)
	telErr := rt.closeTel() // after the engine: its last events are spans too
	rt.unlock()
	return drained, errors.Join(rt.st.Close(), telErr)
}

// Start records a root instance and starts it in the background; its id
// names it to Wait and the controls.
func (rt *Runtime) Start(ctx context.Context, t Task) (string, error) {
	return rt.eng.Start(ctx, t.Text, rt.spec(t))
}

func (rt *Runtime) spec(t Task) durable.Spec {
	model := t.Model
	if tier, _, ok := agentdef.ParseModel(model); ok && tier != "" && model != "" {
		// A tier, as a spawn may name one: its model through deputy.yaml,
		// the runtime's when it has none.
		model, _ = rt.cfg.ResolveModel(model)
		model = cmp.Or(model, rt.opts.Model)
	}
	var def *Definition
	if t.Type != "" {
		// Looked up once, here: the engine records this snapshot (an
		// unknown type is left to its Start to refuse).
		var ok bool
		if def, ok = rt.Definition(t.Type); ok && model == "" {
			if pm, inherit := rt.cfg.ResolveModel(def.Model); !inherit {
				model = pm
			}
		}
	}
	return durable.Spec{
		Type:        t.Type,
		Definition:  def,
		System:      cmp.Or(t.System, rt.opts.System, DefaultSystem),
		Model:       cmp.Or(model, rt.opts.Model),
		Workspace:   rt.ws,
		MaxTurns:    t.MaxTurns,
		MaxDepth:    t.MaxDepth,
		MaxParallel: t.MaxParallel,
		Budget:      t.Budget,
		WallTime:    t.WallTime,
		Config:      rt.cfg,
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
// someone (Asking: Question says what, Answer goes on; Paused: Resume).
func (rt *Runtime) Wait(ctx context.Context, id string) (*Instance, error) {
	return rt.eng.Settle(ctx, id)
}

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
