// Package durable runs deputy's instances as durable workflows: DBOS
// Transact checkpoints every model call and tool call of a run in the
// database, deputy's store keeps the instances, their states and their
// transcripts, and a process that dies mid-run is resumed from its last
// finished step by the next process with the same executor id.
//
// The package is called durable rather than runtime (the name in the
// target design) so that programs using it need not rename Go's own
// runtime package on import.
package durable

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite" // SQLite as DBOS's system database
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/durable/internal/dbosclient"
	"github.com/deputy-run/deputy/internal/pgdial"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// AppVersion is the application version deputy pins in DBOS. DBOS's
// default is a hash of the binary, and a rebuilt binary would then never
// recover the pending workflows of the one before. It changes only when
// the workflow's step sequence changes incompatibly.
const AppVersion = "deputy-wf-1"

// WorkflowName is the registered name of the instance workflow.
const WorkflowName = "deputy.instance"

// QueueName is the queue detached runs wait in for a worker.
const QueueName = "deputy"

// Spec is what a root instance runs with, kept as its definition snapshot
// so a worker in another process can run or resume it.
type Spec struct {
	System string `json:"system"`
	// Model is what the root runs on: provider:model, or fake. For a root
	// of a type it is the caller's choice: the type's own model (its tier
	// through Config: agent.Config.ResolveModel) unless the task named one.
	Model string `json:"model"`
	// Type, when set, names the subagent type the root runs as, exactly
	// as a parent's spawn of it would (agent.Task.Type): its prompt,
	// tools, limits, report cap and spawn rights; System is then unused.
	// Start looks it up in the catalog (an unknown type, or one asking for
	// a fence, is refused and nothing is recorded) and keeps the
	// definition as it was then in Definition, so every later run of the
	// instance runs the same type. The instance's recorded type is its
	// name.
	Type        string               `json:"type,omitempty"`
	Definition  *agentdef.Definition `json:"definition,omitempty"`
	Workspace   string               `json:"workspace"`
	SearchURL   string               `json:"search_url,omitempty"`
	MaxTurns    int                  `json:"max_turns,omitempty"`
	MaxDepth    int                  `json:"max_depth,omitempty"`
	MaxParallel int                  `json:"max_parallel,omitempty"`
	Budget      agent.TreeBudget     `json:"budget,omitzero"`
	Compaction  loop.Compaction      `json:"compaction,omitzero"`
	// WallTime bounds the time the root spends running, over all its
	// runs: time asking, paused or down after a crash does not count.
	WallTime time.Duration `json:"wall_time,omitempty"`
	// MaxOutputTokens caps each of the root's model calls (default
	// loop.DefaultMaxOutputTokens): a root planning a large fan_out writes
	// every task into one call.
	MaxOutputTokens int `json:"max_output_tokens,omitempty"`
	// ChildModel, when set, is the model (provider:model) the root's
	// children run on when their type inherits one, instead of the root's
	// (agent.Task.Inherited).
	ChildModel string `json:"child_model,omitempty"`
	// Config is deputy.yaml as the run started (tiers and prices), so a
	// worker in another directory runs it the same way; nil: the
	// runner's.
	Config *agentdef.Config `json:"config,omitempty"`
	// Offer, when set, names the tools the root's model is offered, out of
	// those it holds and deputy's own (agent.Task.Offer); recorded so that
	// every later run of the root offers the same. nil: as agent.Task
	// decides without it. Not omitempty: an empty list (offer nothing)
	// must come back from the record as one, not as nil.
	Offer []string `json:"offer"`
	// Scenario is the fake model's script the root started with, when it
	// runs on the fake model, so a run resumed elsewhere (deputy worker)
	// plays the answers it began with. nil: none recorded (not on the fake
	// model, or recorded before deputy kept it): the runner's own.
	Scenario *Scenario `json:"scenario,omitempty"`
}

// Scenario is a fake-model script as a root records it. YAML is the file's
// bytes, at most MaxScenarioBytes since the spec is a row read at every run
// of the root; empty: the built-in demo. Name is what it was given as (a
// file's path, or "demo"), for messages.
type Scenario struct {
	Name string `json:"name"`
	YAML string `json:"yaml,omitempty"`
}

// MaxScenarioBytes bounds the scenario a root records (Spec.Scenario).
const MaxScenarioBytes = 1 << 20

// Options configure an Engine.
type Options struct {
	// Store is deputy's database; the engine does not close it. On SQLite
	// DBOS keeps its tables in the same file, through the same handle.
	Store *store.Store
	// URL is the Postgres URL the store was opened with (DBOS opens its own
	// pool on it); empty for SQLite.
	URL string
	// ExecutorID names this process's share of the work: a restarted
	// process recovers the pending workflows of its own executor id.
	// Default "local".
	ExecutorID string
	Clock      clock.Clock
	// Models opens a model by spec and returns the name its requests carry.
	Models func(spec string) (llm.Model, string, error)
	// Tools builds the tools of a root's workspace.
	Tools func(s Spec) (*tool.Set, error)
	// Fence, when set, builds the fences of a root's children that ask
	// for one (sandbox, container, worktree); s.Config is the run's
	// configuration. Without it such children are refused.
	Fence func(s Spec) agent.Fencer
	// Runner carries the catalog, skills and config for spawns; its
	// Steps, Clock and MaxDepth/MaxParallel are set per run.
	Runner agent.Runner
	// OnEvent receives every instance's events (as agent.Runner's).
	OnEvent func(agent.Event)
	// PollInterval is how often a worker looks for queued runs (DBOS polls
	// on SQLite, which has no notifications). Default 200 ms.
	PollInterval time.Duration
	// Failpoint, for crash tests only, names a step at whose boundary the
	// process kills itself with SIGKILL: "before:NAME", "during:NAME" (its
	// work done, its result not yet checkpointed) or "after:NAME" (see
	// steps.go for step names). "error:NAME" makes step NAME fail with
	// ErrFailpoint instead of running, as a step of deputy's own failing
	// (its store write refused, say) would; "error:record-end" fails the
	// recorder's write of a child's end.
	Failpoint string
	// Logger receives DBOS's logs; discarded when nil.
	Logger *slog.Logger
	// RefreshInterval is how often the catalog reads the definitions table
	// again, so a type put with `deputy agents put` needs no restart.
	// Default 60 s.
	RefreshInterval time.Duration
	// OnRefresh, when set, hears each refresh's problems (a stored
	// definition that no longer checks), or nil.
	OnRefresh func(errs []error)
	// Lease, when positive, makes this engine one worker of a fleet on a
	// shared database (store.Worker): it joins under ExecutorID (which
	// must then be its own), renews a lease of this length, stops starting
	// steps when it cannot, and takes over the work of workers whose lease
	// ran out (see lease.go). Zero: the engine is alone on its database.
	Lease time.Duration
	// ClaimInterval is how often a worker looks for leases that ran out.
	// Default 1 s.
	ClaimInterval time.Duration
	// OnLeaseLost is called once if the worker loses its lease, after its
	// runs here were cancelled. Nothing it runs may write again, so the
	// default prints why and exits the process with ExitLeaseLost.
	OnLeaseLost func(error)
	// OnLeaseWait hears that the executor id's lease is still held (by
	// this id's process before a restart), and until when: Open waits.
	OnLeaseWait func(until time.Time)
	// OnTakeover hears of each dead worker whose runs this one
	// re-enqueued, and how many.
	OnTakeover func(dead string, runs int)
	// FleetMaxRuns, for a worker of a fleet, caps the queued runs all the
	// workers carry at once (every worker must say the same); 0: no cap
	// but each worker's MaxRuns.
	FleetMaxRuns int
	// DrainClock times Close's drain; default the real clock, even when
	// Clock is a fake one: a test's clean-up must not wait on a clock
	// nobody advances. A test of the drain's bound passes a fake.
	DrainClock clock.Clock
	// MaxRuns caps the runs this engine carries at once, roots' and
	// children's, over every tree (DefaultMaxRuns when 0); a run waiting
	// for its children gives its place up meanwhile. Each parent's own cap
	// on its children is its spec's MaxParallel.
	MaxRuns int
	// endWritten, for tests only (export_test.go), hears each end written
	// by endRelayed: from that moment a parent's hold must find the relay.
	endWritten func(id string)
}

// Engine runs instances durably.
type Engine struct {
	opts  Options
	st    *store.Store
	dbos  dbos.Context
	queue dbos.Queue
	// handles of the runs this process started: waiting on one is a
	// channel receive, where a retrieved handle polls the database.
	handles  sync.Map // instance id → dbos.WorkflowHandle[string]
	launches launches // children's work, on its way to their workflows
	running  sync.Map // instance id → context.CancelCauseFunc of its run here
	recs     sync.Map // instance id → *recorder of its loop's events here (recorderOf)
	// ds is the store's database as DBOS's data source, on the very pool
	// DBOS's system database uses, so a transaction step (steps.generate)
	// is one transaction: its checkpoint with the store's writes.
	ds      *dbos.DataSource
	slots   slots // the cap on runs at once
	parents parentCaps

	chMu sync.Mutex
	ch   chan struct{} // closed and replaced when an instance moves (changed)

	mu      sync.Mutex                       // guards refresh
	base    *agentdef.Catalog                // built-ins and files
	catalog atomic.Pointer[agentdef.Catalog] // base plus the database's, as of the last refresh
	refresh clock.Timer
	closed  atomic.Bool

	gate      *gate     // admits steps: a drain closes it (drain.go)
	lease     *lease    // nil unless Options.Lease
	closeOnce sync.Once // Close's work, done by the first call
	drained   bool      // what the first Close's drain did
	log       func(msg string, args ...any)
}

// Open starts the durable engine: DBOS on the store's database, the
// instance workflow registered, and recovery of this executor's pending
// runs begun (they resume in the background).
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if opts.Store == nil || opts.Models == nil || opts.Tools == nil {
		return nil, errors.New("durable: Options.Store, Models and Tools are required")
	}
	opts = withDefaults(opts)
	// The store's pool follows the runs this engine carries at once.
	opts.Store.SizePool(opts.MaxRuns)
	cfg := dbosConfig(opts.Logger)
	cfg.ExecutorID = opts.ExecutorID
	if opts.Store.Dialect() == store.SQLite {
		cfg.SQLiteSystemDB = opts.Store.DB()
	} else {
		pool, err := dbosPool(ctx, opts.URL)
		if err != nil {
			return nil, err
		}
		cfg.SystemDBPool = pool
	}
	// DBOS's context lives as long as the engine, not as the call: a
	// cancelled ctx (a signal handler's, say) would otherwise cancel every
	// run with a cause other than its shutdown, which DBOS records as the
	// runs' durable cancellation, and nothing would ever resume them.
	dctx, err := dbosclient.New(context.WithoutCancel(ctx), opts.Store, cfg)
	if err != nil {
		if cfg.SystemDBPool != nil {
			cfg.SystemDBPool.Close() // DBOS closes it at its shutdown, not when it fails to start
		}
		return nil, fmt.Errorf("durable: start DBOS: %w", err)
	}
	// The data source of the turn's transaction steps (steps.generate) is
	// DBOS's own system database, the very handle: DBOS then runs such a
	// step as one transaction, its checkpoint with the store's writes. On
	// SQLite that is the store's handle; on Postgres DBOS's pool, whose
	// transaction the store's writes of the step run on (store.Tx).
	var ds *dbos.DataSource
	if cfg.SQLiteSystemDB != nil {
		ds, err = dbos.NewDataSource(dctx, cfg.SQLiteSystemDB, dbos.WithDataSourceName("deputy"))
	} else {
		ds, err = dbos.NewDataSource(dctx, cfg.SystemDBPool, dbos.WithDataSourceName("deputy"))
	}
	if err != nil {
		dbos.Shutdown(dctx, time.Second)
		return nil, fmt.Errorf("durable: DBOS's database as a data source: %w", err)
	}
	e := &Engine{opts: opts, st: opts.Store, dbos: dctx, base: opts.Runner.Catalog, ds: ds,
		slots: slots{ch: make(chan struct{}, opts.MaxRuns)}, ch: make(chan struct{}), gate: newGate(opts.Clock),
		log: func(msg string, args ...any) { opts.Logger.Warn("deputy: "+msg, args...) }}
	if e.base == nil {
		e.base, _ = agentdef.Load(agentdef.LoadOptions{})
	}
	if err := e.launch(ctx); err != nil {
		e.leave(time.Second)
		dbos.Shutdown(dctx, time.Second)
		return nil, err
	}
	e.scheduleRefresh()
	return e, nil
}

// withDefaults is opts with the defaults for what it leaves unset.
func withDefaults(opts Options) Options {
	opts.ExecutorID = cmp.Or(opts.ExecutorID, "local")
	opts.Clock, opts.DrainClock = cmp.Or(opts.Clock, clock.Real), cmp.Or(opts.DrainClock, clock.Real)
	opts.Logger = cmp.Or(opts.Logger, discard)
	opts.PollInterval = positive(opts.PollInterval, 200*time.Millisecond)
	opts.RefreshInterval = positive(opts.RefreshInterval, time.Minute)
	opts.ClaimInterval = positive(opts.ClaimInterval, time.Second)
	opts.MaxRuns = positive(opts.MaxRuns, DefaultMaxRuns)
	return opts
}

// positive is v, or def when v is not positive.
func positive[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// discard is the logger of an engine given none: DBOS's logs go nowhere.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// dbosConfig is what every DBOS context of deputy's says: its application,
// its pinned version, its logger.
func dbosConfig(logger *slog.Logger) dbos.Config {
	return dbos.Config{AppName: "deputy", ApplicationVersion: AppVersion, Logger: logger}
}

// launch is an engine's start once DBOS's context exists: the catalog's
// first read, the workflows and the queue registered, a worker's lease
// joined, and DBOS launched, which begins recovering this executor id's
// pending runs.
func (e *Engine) launch(ctx context.Context) error {
	if err := e.Refresh(ctx); err != nil {
		return err
	}
	dbos.RegisterWorkflow(e.dbos, e.runInstance, dbos.WithWorkflowName(WorkflowName))
	dbos.RegisterWorkflow(e.dbos, e.runChild, dbos.WithWorkflowName(ChildWorkflowName))
	qopts := []dbos.QueueOption{dbos.WithQueueBasePollingInterval(e.opts.PollInterval)}
	if e.opts.Lease > 0 {
		// A worker of a fleet dequeues no more than it runs at once, so
		// the queue's work spreads over the workers; FleetMaxRuns caps
		// the fleet. A queued run waiting for its own queued children
		// keeps its place meanwhile, so a tree whose waiting parents
		// fill every place of the fleet stalls: keep MaxRuns well above
		// the depth of background spawns.
		qopts = append(qopts, dbos.WithWorkerConcurrency(e.opts.MaxRuns))
		if e.opts.FleetMaxRuns > 0 {
			qopts = append(qopts, dbos.WithGlobalConcurrency(e.opts.FleetMaxRuns))
		}
	}
	var err error
	if e.queue, err = dbos.RegisterQueue(e.dbos, QueueName, qopts...); err != nil {
		return fmt.Errorf("durable: queue: %w", err)
	}
	if e.opts.Lease > 0 {
		// The lease first: DBOS's launch recovers this executor id's
		// pending runs, which a previous holder of the id may still run.
		if err := e.join(ctx); err != nil {
			return err
		}
	}
	if err := dbos.Launch(e.dbos); err != nil {
		return fmt.Errorf("durable: launch DBOS: %w", err)
	}
	return nil
}

// dbosPool is DBOS's own pool on url, its connections dialed through
// pgdial (so a worker that lost its lease can abort them, and the server
// ends a cut-off worker's sessions before others wait long on its locks).
func dbosPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("durable: the Postgres URL does not parse")
	}
	pgdial.Configure(&cfg.ConnConfig.Config)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("durable: DBOS's pool: %w", err)
	}
	return pool, nil
}

// Close stops the engine, waiting up to timeout for running steps:
// CloseContext without a way to cut the drain short.
func (e *Engine) Close(timeout time.Duration) { e.CloseContext(context.Background(), timeout) }

// CloseContext stops the engine after a drain: no step starts any more,
// the steps running finish within timeout (their outcomes checkpointed, so
// the next execution replays them rather than reporting a side-effecting
// call as interrupted), and only then does DBOS's shutdown cancel the runs,
// which stay pending for the next execution (`deputy worker`, or the next
// process with this executor id). A step waiting for children or mail is
// not waited for. ctx ending cuts the drain short (a second signal): the
// steps still running are cut off as at a crash. It reports whether every
// running step finished. Later calls do nothing and report the first's.
//
// A worker of a fleet is also marked draining, so the others see it take
// no new work, and gives its lease back once its runs are stopped, so they
// take those runs over at once instead of after the lease runs out.
func (e *Engine) CloseContext(ctx context.Context, timeout time.Duration) bool {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		e.stopRefresh()
		if e.lease != nil {
			if err := e.st.DrainWorker(context.Background(), e.opts.ExecutorID); err != nil {
				e.log("marking this worker draining failed", "err", err)
			}
		}
		e.drained = e.gate.drain(e.opts.DrainClock, timeout, ctx.Done())
		if !e.drained {
			e.log("steps still running after the drain; they are cut off", "timeout", timeout, "steps", e.gate.running())
		}
		dbos.Shutdown(e.dbos, timeout)
		e.leave(timeout)
	})
	return e.drained
}

// leave stops a worker's lease keeper and releases its lease, unless a
// run is still here (a step that outlived the shutdown's timeout): then
// the lease is left to run out, as a dead worker's would, so the run is
// not taken over while it may still write.
func (e *Engine) leave(timeout time.Duration) {
	if e.lease == nil {
		return
	}
	e.lease.close()
	if n := e.runsHere(); n > 0 {
		e.log("leaving with runs still here; the lease is left to run out", "runs", n)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := e.st.ReleaseLease(ctx, e.opts.ExecutorID); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		e.log("releasing the lease failed; it runs out instead", "err", err)
	}
}

// Refresh reads the definitions table and makes the catalog the base plus
// them (a stored definition yields to a project file of the same name).
// It runs at Open and every RefreshInterval; a run takes the catalog as it
// stands when it starts.
func (e *Engine) Refresh(ctx context.Context) error {
	stored, err := e.st.Definitions(ctx)
	if err != nil {
		return fmt.Errorf("durable: read definitions: %w", err)
	}
	defs := make([]*agentdef.Definition, 0, len(stored))
	var errs []error
	for _, s := range stored {
		d := &agentdef.Definition{}
		if err := json.Unmarshal(s.Definition, d); err != nil {
			errs = append(errs, fmt.Errorf("stored definition %s: %w", s.Name, err))
			continue
		}
		defs = append(defs, d)
	}
	cat, merrs := e.base.Merge(agentdef.LevelDatabase, defs)
	e.catalog.Store(cat)
	if h := e.opts.OnRefresh; h != nil {
		h(append(errs, merrs...))
	}
	return nil
}

// Catalog is the catalog as of the last refresh.
func (e *Engine) Catalog() *agentdef.Catalog { return e.catalog.Load() }

// scheduleRefresh arms the next refresh on the engine's clock.
func (e *Engine) scheduleRefresh() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return
	}
	e.refresh = e.opts.Clock.AfterFunc(e.opts.RefreshInterval, func() {
		_ = e.Refresh(context.Background()) // a failed refresh keeps the catalog it had
		e.scheduleRefresh()
	})
}

func (e *Engine) stopRefresh() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refresh != nil {
		e.refresh.Stop()
	}
}

// ErrRefused is in the error of a Start or Enqueue refused before anything
// was recorded, for what the caller asked: an unknown type, one that cannot
// run as a root, a model that cannot be opened. Other errors are the
// store's or the engine's.
var ErrRefused = errors.New("start refused")

// refusal marks err as ErrRefused without changing its message.
type refusal struct{ error }

func (r refusal) Is(target error) bool { return target == ErrRefused }
func (r refusal) Unwrap() error        { return r.error }

// Start records a new root instance and starts its run in this process.
func (e *Engine) Start(ctx context.Context, task string, spec Spec) (string, error) {
	spec, err := e.typed(spec)
	if err != nil {
		return "", refusal{err}
	}
	// A model that cannot be opened (unknown provider, no key) is refused
	// here, with nothing recorded, rather than failing the run later.
	if _, _, err := e.opts.Models(spec.Model); err != nil {
		return "", refusal{fmt.Errorf("model %s: %w", spec.Model, err)}
	}
	id, err := create(ctx, e.st, task, spec)
	if err != nil {
		return "", err
	}
	if err := e.startRoot(id, workflowID(id)); err != nil {
		return "", fmt.Errorf("start %s: %w", id, err)
	}
	return id, nil
}

// startRoot starts run wf of root instance id in this process, keeping its
// handle: waiting for it (Wait) is then a channel receive.
func (e *Engine) startRoot(id, wf string) error {
	h, err := dbos.RunWorkflow(e.dbos, e.runInstance, id, dbos.WithWorkflowID(wf))
	if err == nil {
		e.handles.Store(id, h)
	}
	return err
}

// Enqueue records a new root instance and queues its run for a worker
// (`deputy worker`), without starting an engine: it runs nothing and
// recovers nothing, so it may be used while a worker holds the database.
// url is the Postgres URL the store was opened with, empty for SQLite.
func Enqueue(ctx context.Context, st *store.Store, url, task string, spec Spec) (string, error) {
	if err := checkType(spec); err != nil {
		return "", refusal{err}
	}
	id, err := create(ctx, st, task, spec)
	if err != nil {
		return "", err
	}
	return id, enqueue(ctx, st, url, id, workflowID(id), WorkflowName)
}

// enqueue queues a run of instance id, as workflow wf of the named kind
// (a root's or a child's), for a worker, on a never-launched context.
func enqueue(ctx context.Context, st *store.Store, url, id, wf, name string) error {
	return dbosclient.With(ctx, st, url, dbosConfig(discard), func(dctx dbos.Context) error {
		if _, err := dbos.Enqueue[string](dctx, QueueName, name, id, dbos.WithEnqueueWorkflowID(wf),
			dbos.WithEnqueueApplicationVersion(AppVersion)); err != nil {
			return fmt.Errorf("queue %s: %w", id, err)
		}
		return nil
	})
}

// register makes the run of instance id cancellable by cancelRun until the
// returned function is called. A cancel posts its mail before it calls
// cancelRun, so one that came before this registration is found in the
// mailbox here: either cancelRun sees the run, or the run sees the mail
// (a run's first turn reads no inbox, and a blocking tool call could hold
// it past every later one).
func (e *Engine) register(ctx context.Context, id string, cancel context.CancelCauseFunc) (unregister func()) {
	e.running.Store(id, cancel)
	if mail, err := e.st.Pending(context.WithoutCancel(ctx), id); err == nil && cancelIn(mail) {
		cancel(errCancelled)
	}
	return func() { e.running.Delete(id) }
}

// cancelRun cancels the run of instance id if this engine carries it.
func (e *Engine) cancelRun(id string) {
	if c, ok := e.running.Load(id); ok {
		c.(context.CancelCauseFunc)(errCancelled)
	}
}

// Adopt queues every root instance still in state created, for a worker:
// a process that died between recording an instance and starting its run
// left it so. A root whose run exists already is left alone (starting a
// workflow id that exists returns the existing one).
func (e *Engine) Adopt(ctx context.Context) (int, error) {
	created, err := e.st.ListInstances(ctx, store.Filter{OnlyRoots: true, States: []store.State{store.Created}})
	if err != nil || len(created) == 0 {
		return 0, err
	}
	ids := make([]string, len(created))
	for i, in := range created {
		ids[i] = workflowID(in.ID)
	}
	// A run may exist already, started directly or queued: recovery or
	// the queue carries it, and starting it again under another queue is
	// an error.
	existing, err := dbos.ListWorkflows(e.dbos, dbos.WithFilterWorkflowIDs(ids...))
	if err != nil {
		return 0, fmt.Errorf("adopt: list runs: %w", err)
	}
	has := map[string]bool{}
	for _, w := range existing {
		has[w.ID] = true
	}
	n := 0
	for _, in := range created {
		if has[workflowID(in.ID)] {
			continue
		}
		if _, err := dbos.RunWorkflow(e.dbos, e.runInstance, in.ID, dbos.WithWorkflowID(workflowID(in.ID)), dbos.WithQueue(e.queue)); err != nil {
			return n, fmt.Errorf("adopt %s: %w", in.ID, err)
		}
		n++
	}
	return n, nil
}

// typed resolves a spec's Type: the catalog's definition, recorded in the
// spec, once checked that it can run as a root.
func (e *Engine) typed(spec Spec) (Spec, error) {
	if spec.Type == "" || spec.Definition != nil {
		return spec, checkType(spec)
	}
	def, ok := e.Catalog().Lookup(spec.Type)
	if !ok {
		return spec, fmt.Errorf("start: %w", agent.UnknownType(spec.Type, e.Catalog().List()))
	}
	spec.Definition = def
	return spec, checkType(spec)
}

// checkType refuses a spec whose definition cannot run as a root, or does
// not match its Type.
func checkType(spec Spec) error {
	d := spec.Definition
	switch {
	case d == nil:
		return nil
	case spec.Type != "" && spec.Type != d.Name:
		return fmt.Errorf("start: the spec's type %q and its definition's name %q differ", spec.Type, d.Name)
	}
	if err := agent.CheckRoot(d); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	return nil
}

func create(ctx context.Context, st *store.Store, task string, spec Spec) (string, error) {
	def, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	typ := "root"
	if spec.Definition != nil {
		typ = spec.Definition.Name
	} else if spec.Type != "" {
		typ = spec.Type // queued (Enqueue): the worker looks it up
	}
	in := &store.Instance{ID: agent.NewID(), Type: typ, Definition: def, Task: task, Model: spec.Model}
	if err := st.CreateInstance(ctx, in); err != nil {
		return "", fmt.Errorf("record instance: %w", err)
	}
	if err := st.SetWorkflow(ctx, in.ID, workflowID(in.ID)); err != nil {
		return "", err
	}
	return in.ID, nil
}

// Wait blocks until instance id's current run ends and returns the
// instance as stored.
func (e *Engine) Wait(ctx context.Context, id string) (*store.Instance, error) {
	var h dbos.WorkflowHandle[string]
	if v, ok := e.handles.LoadAndDelete(id); ok {
		h = v.(dbos.WorkflowHandle[string])
	} else {
		var err error
		if h, err = dbos.RetrieveWorkflow[string](e.dbos, workflowID(id)); err != nil {
			return nil, fmt.Errorf("wait for %s: %w", id, err)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := h.GetResult(dbos.WithHandlePollingInterval(e.opts.PollInterval)); done <- err }()
	select {
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case err := <-done:
		if err != nil {
			return nil, fmt.Errorf("run of %s: %w", id, err)
		}
	}
	return e.st.GetInstance(ctx, id)
}

// Settle blocks until instance id needs nothing more of this engine: it
// ended (and its last run too), it asks, or it is paused. Unlike Wait it
// follows the instance over its runs (an answer or a resume starts the
// next one), so it suits callers that answered or resumed it.
func (e *Engine) Settle(ctx context.Context, id string) (*store.Instance, error) {
	for {
		changed := e.changes() // before the read: a change after it wakes the wait
		in, err := e.st.GetInstance(ctx, id)
		if err != nil {
			return nil, err
		}
		if done, err := e.settled(ctx, in); err != nil || done {
			return in, err
		}
		if err := e.awaitOn(ctx, changed, nil); err != nil {
			return nil, err
		}
	}
}

func workflowID(instance string) string { return "deputy-" + instance }

// Resumable reports whether root instance id stopped without ending and
// a worker will carry it on: its record is created or running and its run
// is pending or queued, so DBOS recovers it (at the launch of an engine
// under this executor id, or through the queue) from its last finished
// step. A run whose workflow failed is not resumable: nothing carries it.
func (e *Engine) Resumable(ctx context.Context, id string) (bool, error) {
	in, err := e.st.GetInstance(ctx, id)
	if err != nil {
		return false, err
	}
	if in.State != store.Created && in.State != store.Running {
		return false, nil
	}
	wfs, err := e.pendingRuns(dbos.WithFilterWorkflowIDs(workflowID(id)))
	return len(wfs) > 0, err
}

// Idle reports whether nothing is left for this engine to do: no instance
// created or running, and no run queued or in progress (a resume or an
// answer queues the next run of an instance that is still paused or
// asking). An instance asking or paused waits for someone else.
func (e *Engine) Idle(ctx context.Context) (bool, error) {
	busy, err := e.st.ListInstances(ctx, store.Filter{States: []store.State{store.Created, store.Running}, Limit: 1})
	if err != nil || len(busy) > 0 {
		return false, err
	}
	// Only this version's runs: another version's pending workflows are
	// not this engine's to carry, and would keep it from ever idling.
	wfs, err := e.pendingRuns(dbos.WithFilterAppVersion(AppVersion), dbos.WithFilterLimit(1))
	return err == nil && len(wfs) == 0, err
}

// pendingRuns lists the runs queued or in progress that filters select
// (without their inputs and outputs).
func (e *Engine) pendingRuns(filters ...dbos.ListWorkflowsOption) ([]dbos.WorkflowStatus, error) {
	wfs, err := dbos.ListWorkflows(e.dbos, append(filters, dbos.WithFilterStatus(dbos.WorkflowStatusEnqueued,
		dbos.WorkflowStatusPending), dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return wfs, nil
}
