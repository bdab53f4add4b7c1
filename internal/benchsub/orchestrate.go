package benchsub

// The orchestration benchmarks of issue 7: a root agent launches a planned
// batch of subagents through ONE fan_out call (not one spawn per child),
// either a flat fan-out (one level of independent tasks) or a dependency
// graph (levels, each task depending on a few of the level below), in
// memory (agent.Runner) or under the durable engine on SQLite or Postgres.
// The plan, the model's behaviour and the checks are the same in every way;
// only where the tree runs differs.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for the scratch databases

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/benchloop"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// Where an orchestration workload's tree runs.
const (
	// OrchMemory: agent.Runner, in memory, no engine.
	OrchMemory = "memory"
	// OrchSQLite: the durable engine (durable.Open) over a fresh SQLite
	// file: every model call, tool call and transcript message checkpointed.
	OrchSQLite = "sqlite"
	// OrchPostgres: the same over a fresh database made on the Postgres
	// server at OrchConfig.Postgres, dropped after the run.
	OrchPostgres = "postgres"
)

// OrchVias lists the ways, in the order the command runs them.
var OrchVias = []string{OrchMemory, OrchSQLite, OrchPostgres}

// OrchConfig sizes an orchestration workload. The plan has len(Levels)
// levels of Levels[l] tasks; a task of level l > 0 depends on
// Levels[l-1]/Levels[l] consecutive tasks of level l-1 (so each level's
// size must divide the one below's), and receives their reports. One
// level is a flat fan-out. Every task is a worker of Turns model calls (a
// no-op tool call on each but the last, which answers), at most
// MaxParallel at once (the root's max_parallel, which fan_out's tasks
// share as spawns do), every response delayed by Latency (the fake
// server's first-byte latency, on the real clock).
type OrchConfig struct {
	Levels      []int         `json:"levels"`
	Turns       int           `json:"turns"`
	MaxParallel int           `json:"max_parallel"`
	Latency     time.Duration `json:"latency_ns"`
	// Postgres is the server OrchPostgres makes its scratch database on (a
	// URL whose user may create databases). Never printed: it may hold a
	// password.
	Postgres string `json:"-"`
}

// DefaultOrchFan is issue 7's fan-out: 1,000 tasks × 3 turns at 200 ms,
// max_parallel 200.
var DefaultOrchFan = OrchConfig{Levels: []int{1000}, Turns: 3, MaxParallel: 200, Latency: 200 * time.Millisecond}

// DefaultOrchDAG is issue 7's dependency graph of 100 tasks in 3 levels: 60
// leaves; 30 middle tasks, each after two leaves; 10 top tasks, each after
// three middle ones. max_parallel 200 holds every level at once, so the
// critical path (3 tasks of 3 turns) is the ideal.
var DefaultOrchDAG = OrchConfig{Levels: []int{60, 30, 10}, Turns: 3, MaxParallel: 200, Latency: 200 * time.Millisecond}

// Check says what is wrong with c's sizes, if anything, so a command can
// refuse them before it runs anything.
func (c OrchConfig) Check() error {
	if len(c.Levels) == 0 || c.Turns < 2 || c.MaxParallel < 1 || c.Latency < 0 {
		// Not %+v of c: Postgres may hold a password.
		return fmt.Errorf("orchestration: need at least one level, 2 turns, 1 parallel, a latency >= 0: levels %v, turns %d, parallel %d, latency %v",
			c.Levels, c.Turns, c.MaxParallel, c.Latency)
	}
	for l, n := range c.Levels {
		if n < 1 {
			return fmt.Errorf("orchestration: level %d has %d tasks", l+1, n)
		}
		if l > 0 && c.Levels[l-1]%n != 0 {
			return fmt.Errorf("orchestration: level %d's %d tasks do not divide level %d's %d", l+1, n, l, c.Levels[l-1])
		}
	}
	return nil
}

// Tasks is the plan's number of tasks.
func (c OrchConfig) Tasks() int {
	n := 0
	for _, k := range c.Levels {
		n += k
	}
	return n
}

// Ideal is the run's wall time from latency alone: the root's two turns
// (the fan_out call, then the answer) plus, level by level, its waves of
// MaxParallel tasks of Turns calls. For one level it is exact
// (⌈tasks/max_parallel⌉ × turns × latency); for a graph whose levels each
// fit in MaxParallel it is the critical path (levels × turns × latency).
// (A graph with a level wider than MaxParallel could overlap levels and
// beat it; the benchmark's graphs do not.)
func (c OrchConfig) Ideal() time.Duration {
	waves := 0
	for _, n := range c.Levels {
		waves += (n + c.MaxParallel - 1) / c.MaxParallel
	}
	return time.Duration(waves*c.Turns+2) * c.Latency
}

// orchTask is one task of the plan and the report its worker must send.
type orchTask struct {
	agent.FanTask
	want string
}

// plan builds the fan_out tasks, in level order.
func (c OrchConfig) plan() []orchTask {
	id := func(level, j int) string { return fmt.Sprintf("l%d-%d", level+1, j+1) }
	var out []orchTask
	for l, n := range c.Levels {
		k := 0
		if l > 0 {
			k = c.Levels[l-1] / n
		}
		for j := range n {
			t := agent.FanTask{ID: id(l, j), Type: orchWorker, Task: "Work on task " + id(l, j)}
			var heads strings.Builder
			for d := range k {
				t.DependsOn = append(t.DependsOn, id(l-1, j*k+d))
				heads.WriteString("## " + id(l-1, j*k+d) + "\n")
			}
			out = append(out, orchTask{FanTask: t, want: orchReport(t.ID, c.Turns, heads.String())})
		}
	}
	return out
}

// orchReport is the report the scenario's worker writes: its task id, its
// turns and the headings of the reports it was given (so that each
// dependency's report is seen to have reached it), quoted on one line so
// that a report passed on to the next level adds no heading line there.
func orchReport(id string, turns int, heads string) string {
	return fmt.Sprintf("Done %s after %d turns, on %q: ok.", id, turns, heads)
}

const orchWorker = "worker"

// orchScenario: workers call the no-op tool until their last turn, then
// report (orchReport); the root makes one fan_out call with the whole plan,
// then answers. The task id is the end of a worker's first message
// (fan_out puts context and dependencies' reports before the task).
func orchScenario(c OrchConfig, tasks []orchTask) (string, error) {
	fan := struct {
		Tasks []agent.FanTask `json:"tasks"`
	}{}
	for _, t := range tasks {
		fan.Tasks = append(fan.Tasks, t.FanTask)
	}
	input, err := json.Marshal(fan) // JSON is YAML's flow style
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`
name: bench-orchestrate
latency: {first_byte: %[1]s}
rules:
  - match: {system: "fan-out worker", turn: "1-%[2]d"}
    tool_calls: [{name: noop, input: {path: '{{find "l[0-9]+-[0-9]+$" .Task}}/{{.Turn}}'}}]
  - match: {system: "fan-out worker"}
    text: 'Done {{find "l[0-9]+-[0-9]+$" .Task}} after {{.Turn}} turns, on {{printf "%%q" (grep "^## " .Task)}}: {{.Result "noop"}}.'
  - match: {turn: 1}
    tool_calls: [{name: fan_out, input: %[3]s}]
  - match: {turn: 2}
    text: "Merged the reports."
`, c.Latency, c.Turns-1, input), nil
}

// orchCatalog holds the one type the plan uses, and nothing else, so the
// root's prompt is the same in every way.
func orchCatalog() (*agentdef.Catalog, error) {
	base, _ := agentdef.Load(agentdef.LoadOptions{NoBuiltins: true})
	return base.With(&agentdef.Definition{Name: orchWorker, Description: "Works on one task.", SystemPrompt: fanSystem,
		Tools: []string{"noop"}, Mode: agentdef.ModeIsolated})
}

// OrchResult is one orchestration run. Its Wall is Runner.Run's, or the
// engine's Start to Wait; its Ideal is OrchConfig.Ideal; PeakRunning
// counts tasks, from the runner's events (a task runs from its start to
// its end); the root's first turn is the request and the fan_out call
// streamed back.
type OrchResult struct {
	Wire  string `json:"wire"`
	Via   string `json:"via"`
	Tasks int    `json:"tasks"`
	Timing
	// Steps is, for a durable run, the steps DBOS checkpointed for it
	// (rows of its operation_outputs): model calls, tool calls and the
	// engine's own (load, start, inbox, end...).
	Steps int `json:"steps,omitempty"`
}

// Orchestrate runs the workload once on wire, via one of OrchVias.
func Orchestrate(ctx context.Context, wire, via string, c OrchConfig) (*OrchResult, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	tasks := c.plan()
	scen, err := orchScenario(c, tasks)
	if err != nil {
		return nil, err
	}
	srv, err := startServer(scen, "bench-orchestrate.yaml", 0, c.MaxParallel+8)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	model, err := srv.model(wire)
	if err != nil {
		return nil, err
	}
	cat, err := orchCatalog()
	if err != nil {
		return nil, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	dir, err := os.MkdirTemp("", "deputy-orchestrate")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	obs := &orchObserver{reports: map[string]string{}}
	res := &OrchResult{Wire: wire, Via: via, Tasks: len(tasks), Timing: Timing{Ideal: c.Ideal()}}
	switch via {
	case OrchMemory:
		err = orchMemory(ctx, model, cat, c, obs, res)
	case OrchSQLite:
		err = orchDurable(ctx, model, cat, c, obs, res, filepath.Join(dir, "deputy.db"), "", dir)
	case OrchPostgres:
		if c.Postgres == "" {
			return nil, errors.New("orchestration via postgres: no server URL given")
		}
		var dbURL string
		var drop func() error
		dbURL, drop, err = scratchPostgres(ctx, c.Postgres)
		if err != nil {
			return nil, err
		}
		err = orchDurable(ctx, model, cat, c, obs, res, dbURL, dbURL, dir)
		err = errors.Join(err, drop())
	default:
		err = fmt.Errorf("unknown orchestration via %q (have: %s)", via, strings.Join(OrchVias, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("orchestration %s %s: %w", wire, via, err)
	}
	if err := obs.check(tasks, c, res); err != nil {
		return nil, fmt.Errorf("orchestration %s %s: %w", wire, via, err)
	}
	if err := res.settle(srv, len(tasks)*c.Turns+2); err != nil {
		return nil, fmt.Errorf("orchestration %s %s: %w", wire, via, err)
	}
	return res, nil
}

// orchObserver follows a run through its events: the root's phases, the
// tasks running at once, and each task's report.
type orchObserver struct {
	mu      sync.Mutex
	start   time.Time
	phases  []time.Duration // root turn 1 start, its response, turn 2 start, its response
	now     int
	most    int
	ended   int
	reports map[string]string // task id → the report its relay carried
	dup     []string
}

func (o *orchObserver) begin() {
	o.mu.Lock()
	o.start = time.Now()
	o.mu.Unlock()
}

func (o *orchObserver) event(e agent.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case e.Depth == 0 && e.Kind == agent.EventStep &&
		(e.Loop.Kind == loop.EventTurnStarted || e.Loop.Kind == loop.EventModelResponse):
		o.phases = append(o.phases, time.Since(o.start))
	case e.Depth == 1 && e.Kind == agent.EventSpawned:
		o.now++
		o.most = max(o.most, o.now)
	case e.Depth == 1 && e.Kind == agent.EventEnded:
		o.now--
		o.ended++
		if e.Relay == nil || e.Final == nil {
			return
		}
		id := e.Final.Description // fan_out describes a task's child by its id
		if _, ok := o.reports[id]; ok {
			o.dup = append(o.dup, id)
		}
		o.reports[id] = e.Relay.Report
	}
}

// check holds the run to its design: every task ran once, completed, and
// reported what its worker was given (its dependencies' reports); at most
// MaxParallel ran at once; the root made two turns.
func (o *orchObserver) check(tasks []orchTask, c OrchConfig, res *OrchResult) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.dup) > 0 || o.ended != len(tasks) || len(o.reports) != len(tasks) {
		return fmt.Errorf("%d task ends for %d tasks (%d reports, ended twice: %v)", o.ended, len(tasks), len(o.reports), o.dup)
	}
	var errs []error
	for _, t := range tasks {
		if got := o.reports[t.ID]; got != t.want {
			errs = append(errs, fmt.Errorf("task %s reported %q, want %q", t.ID, got, t.want))
			if len(errs) == 5 {
				break
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if o.most > c.MaxParallel || o.now != 0 {
		return fmt.Errorf("%d tasks ran at once (max_parallel %d), %d still running", o.most, c.MaxParallel, o.now)
	}
	if len(o.phases) != 4 {
		return fmt.Errorf("the root's turns left %d events, want 4", len(o.phases))
	}
	res.PeakRunning = o.most
	res.phases(o.phases)
	return nil
}

const orchTask0 = "Work through the plan."

// orchRootOutput is the root's per-call output cap: its first answer is
// the whole plan in one fan_out call, about 16 output tokens a task here
// (some 16,000 for 1,000 tasks), past the default 8,192.
func orchRootOutput(tasks int) int {
	return max(loop.DefaultMaxOutputTokens, 32*tasks)
}

func orchMemory(ctx context.Context, model llm.Model, cat *agentdef.Catalog, c OrchConfig, obs *orchObserver, res *OrchResult) error {
	r := &agent.Runner{Catalog: cat, MaxParallel: c.MaxParallel, OnEvent: obs.event}
	task := agent.Task{Task: orchTask0, System: fanRootSystem, Model: model, ModelName: ModelName,
		Tools: tool.MustSet(benchloop.Noop{}), Limits: loop.Limits{MaxOutputTokens: orchRootOutput(res.Tasks)}}
	obs.begin()
	start := time.Now()
	o, err := r.Run(ctx, task)
	res.Wall = time.Since(start)
	if err != nil {
		return err
	}
	if o.Result.Turns != 2 || o.Result.StopReason != loop.StopCompleted || len(o.Instances) != 1+res.Tasks {
		return fmt.Errorf("root: %d turns, %s; %d instances, want 2 turns and %d", o.Result.Turns, o.Result.StopReason, len(o.Instances), 1+res.Tasks)
	}
	for _, in := range o.Instances[1:] {
		if in.State != instance.Completed || in.Turns != c.Turns {
			return fmt.Errorf("task %s: %s after %d turns (%s)", in.Description, in.State, in.Turns, in.Error)
		}
	}
	return nil
}

// orchDurable runs the workload as a durable root on the store at dbURL
// (pgURL: the same, for Postgres; empty for SQLite). Opening the store and
// the engine (migrations, DBOS's launch) is not timed: the run is, from
// Start to Wait.
func orchDurable(ctx context.Context, model llm.Model, cat *agentdef.Catalog, c OrchConfig, obs *orchObserver, res *OrchResult, dbURL, pgURL, workspace string) error {
	st, err := store.Open(ctx, dbURL, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := durable.Open(ctx, durable.Options{
		Store: st, URL: pgURL,
		Models: func(string) (llm.Model, string, error) { return model, ModelName, nil },
		Tools:  func(durable.Spec) (*tool.Set, error) { return tool.NewSet(benchloop.Noop{}) },
		Runner: agent.Runner{Catalog: cat},
		// The engine's cap on runs at once must not be the cap measured:
		// the root and max_parallel tasks, with room to spare.
		MaxRuns: c.MaxParallel + 8,
		OnEvent: obs.event,
	})
	if err != nil {
		return err
	}
	defer eng.Close(10 * time.Second)
	table := "operation_outputs"
	if pgURL != "" {
		table = "dbos.operation_outputs"
	}
	steps := func() (int, error) {
		var n int
		err := st.DB().QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n)
		return n, err
	}
	before, err := steps()
	if err != nil {
		return fmt.Errorf("count steps: %w", err)
	}
	spec := durable.Spec{System: fanRootSystem, Model: "bench", Workspace: workspace, MaxParallel: c.MaxParallel,
		MaxOutputTokens: orchRootOutput(res.Tasks)}
	obs.begin()
	start := time.Now()
	id, err := eng.Start(ctx, orchTask0, spec)
	if err != nil {
		return err
	}
	in, err := eng.Wait(ctx, id)
	res.Wall = time.Since(start)
	if err != nil {
		return err
	}
	if in.State != store.Completed || in.Turns != 2 {
		return fmt.Errorf("root: %s after %d turns (%s), want completed after 2", in.State, in.Turns, in.Error)
	}
	after, err := steps()
	if err != nil {
		return fmt.Errorf("count steps: %w", err)
	}
	res.Steps = after - before
	kids, err := st.ListInstances(ctx, store.Filter{Parent: id})
	if err != nil {
		return err
	}
	if len(kids) != res.Tasks {
		return fmt.Errorf("%d children recorded, want %d", len(kids), res.Tasks)
	}
	for _, k := range kids {
		if k.State != store.Completed || k.Turns != c.Turns || !strings.HasPrefix(k.Report, "Done l") {
			return fmt.Errorf("child %s: %s after %d turns, report %q (%s)", k.ID, k.State, k.Turns, k.Report, k.Error)
		}
	}
	return nil
}

// scratchPostgres makes a new database on the server at base and returns
// its URL and how to drop it, so every run starts from empty tables as a
// SQLite run does from a new file.
func scratchPostgres(ctx context.Context, base string) (string, func() error, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, errors.New("the Postgres URL does not parse") // it may hold a password: not quoted
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "deputy_bench_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create a scratch database on %s: %w", u.Redacted(), err)
	}
	drop := func() error {
		defer admin.Close()
		// FORCE ends the sessions a closed pool may still be ending.
		if _, err := admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop scratch database %s: %w", name, err)
		}
		return nil
	}
	db := *u
	db.Path = "/" + name
	return db.String(), drop, nil
}
