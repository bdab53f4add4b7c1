package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/internal/benchsub"
)

// `deputy-bench orchestration`: the macro benchmarks of issue 7. A root
// launches a planned batch of subagents through one fan_out call: a flat
// fan-out (1,000 tasks) and a 3-level dependency graph (100 tasks), in
// memory, beside a bare SDK loop of the same fan-out, and under the
// durable engine on SQLite and Postgres. Each figure is one JSON line with
// its goal. The workloads live in internal/benchsub (orchestrate.go), where
// a quick test runs them at small sizes.

// benchOrchFlags are orchestration's flags as given.
type benchOrchFlags struct {
	figures  string
	vias     string
	tasks    int
	turns    int
	par      int
	latency  time.Duration
	dag      string
	postgres string
}

// benchPostgresEnv names the variable --postgres defaults to.
const benchPostgresEnv = "DEPUTY_BENCH_POSTGRES_URL"

// orchFigures are the figures orchestration can run.
var orchFigures = []string{"fanout", "dag"}

func newOrchestrationCmd(repeats *int) *cobra.Command {
	o := &benchOrchFlags{}
	cmd := &cobra.Command{
		Use:   "orchestration [--orch-figures fanout,dag] [--orch-vias memory,sqlite,postgres] [--wires anthropic,openai] [--repeats R]",
		Short: "Issue 7's figures: a fan_out of many tasks and a dependency graph, in memory and durably",
		Long: `Runs issue 7's benchmarks: a root's one fan_out call of many tasks, and a
3-level dependency graph, in memory beside a bare SDK loop of the same
fan-out, and durably on SQLite and Postgres, against a fake server in this
process on loopback. Prints one JSON object per figure with its goal.`,
		Args: cobra.NoArgs,
	}
	wires := addWiresFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runBenchOrchestration(cmd.Context(), cmd.OutOrStdout(), *wires, o, *repeats)
	}
	d, g := benchsub.DefaultOrchFan, benchsub.DefaultOrchDAG
	f := cmd.Flags()
	f.StringVar(&o.figures, "orch-figures", "fanout,dag", "comma-separated: fanout, dag")
	f.StringVar(&o.vias, "orch-vias", "", "comma-separated: memory, sqlite, postgres (default memory,sqlite, and postgres with --postgres)")
	f.IntVar(&o.tasks, "orch-tasks", d.Levels[0], "tasks of the fan-out")
	f.IntVar(&o.turns, "orch-turns", d.Turns, "model calls per task")
	f.IntVar(&o.par, "orch-parallel", d.MaxParallel, "the root's max_parallel")
	f.DurationVar(&o.latency, "orch-latency", d.Latency, "first-byte latency of every response (real clock)")
	f.StringVar(&o.dag, "orch-dag", joinInts(g.Levels), "tasks per level of the graph, leaves first; each level's size divides the one below's")
	f.StringVar(&o.postgres, "postgres", "", "a Postgres server URL whose user may create databases (a scratch database is made per run); default $"+benchPostgresEnv)
	return cmd
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func runBenchOrchestration(ctx context.Context, out io.Writer, wiresFlag string, o *benchOrchFlags, repeats int) error {
	if o.postgres == "" {
		o.postgres = os.Getenv(benchPostgresEnv)
	}
	vias := []string{benchsub.OrchMemory, benchsub.OrchSQLite}
	if o.postgres != "" {
		vias = append(vias, benchsub.OrchPostgres)
	}
	if o.vias != "" {
		var err error
		if vias, err = parseChoices("--orch-vias", o.vias, benchsub.OrchVias); err != nil {
			return err
		}
	}
	if slices.Contains(vias, benchsub.OrchPostgres) && o.postgres == "" {
		return usageErr("via postgres needs --postgres URL (or $%s)", benchPostgresEnv)
	}
	figures, err := parseChoices("--orch-figures", o.figures, orchFigures)
	if err != nil {
		return err
	}
	wires, err := parseChoices("--wires", wiresFlag, benchsub.Wires)
	if err != nil {
		return err
	}
	var levels []int
	for _, s := range splitList(o.dag) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return usageErr("--orch-dag: %q is not a number of tasks", s)
		}
		levels = append(levels, n)
	}
	if o.tasks < 1 || o.turns < 2 || o.par < 1 || o.latency <= 0 || len(levels) == 0 {
		return usageErr("--orch-tasks and --orch-parallel must be at least 1, --orch-turns at least 2, --orch-latency positive, --orch-dag not empty")
	}
	fan := benchsub.OrchConfig{Levels: []int{o.tasks}, Turns: o.turns, MaxParallel: o.par, Latency: o.latency, Postgres: o.postgres}
	dag := benchsub.OrchConfig{Levels: levels, Turns: o.turns, MaxParallel: o.par, Latency: o.latency, Postgres: o.postgres}
	if err := dag.Check(); err != nil {
		return usageErr("--orch-dag %s: %v", o.dag, err)
	}
	emit := figureWriter(out)
	for _, f := range figures {
		for _, w := range wires {
			var err error
			if f == "fanout" {
				err = benchOrchFan(ctx, w, vias, fan, repeats, emit)
			} else {
				err = benchOrchDAG(ctx, w, vias, dag, repeats, emit)
			}
			if err != nil {
				return failed(fmt.Errorf("orchestration %s on %s: %w", f, w, err))
			}
		}
	}
	return nil
}

// orchSeries is one way's runs of a figure.
type orchSeries struct {
	viaSeries
	steps []float64
	ideal time.Duration
}

func (s *orchSeries) add(r *benchsub.OrchResult, cpu time.Duration) {
	s.viaSeries.add(&r.Timing, cpu)
	s.steps = append(s.steps, float64(r.Steps))
	s.ideal = r.Ideal
}

// orchViaDetail is one way's medians, in a figure's detail.
type orchViaDetail struct {
	viaMedians
	// The root's first turn (the fan_out call streamed back), the tasks'
	// phase, the root's last turn: medians.
	RootFirstMS  float64 `json:"root_first_turn_ms,omitempty"`
	ChildrenMS   float64 `json:"children_phase_ms,omitempty"`
	RootSecondMS float64 `json:"root_second_turn_ms,omitempty"`
	// Durable only: the steps DBOS checkpointed per run, and what each
	// cost on the run's wall time: (durable wall - in-memory wall) / steps,
	// medians.
	Steps      float64 `json:"steps,omitempty"`
	StepCostMS float64 `json:"step_cost_ms,omitempty"`
}

func (s *orchSeries) detail(memWall float64) orchViaDetail {
	d := orchViaDetail{viaMedians: s.medians(s.ideal)}
	d.RootFirstMS, d.ChildrenMS, d.RootSecondMS = s.phases()
	if d.Steps, _, _ = stats(s.steps); d.Steps > 0 && memWall > 0 {
		d.StepCostMS = (d.WallMS - memWall) / d.Steps
	}
	return d
}

// orchRound runs c once via each way, the ways taking turns so load that
// comes and goes hits them alike.
func orchRound(ctx context.Context, wire string, vias []string, c benchsub.OrchConfig, runs map[string]*orchSeries) error {
	for _, via := range vias {
		c0 := cpuTime()
		var r *benchsub.OrchResult
		var err error
		if via == benchsub.ViaBareSDK {
			// Issue 4's bare loop of the same fan-out: goroutines streaming
			// through the official SDK, max_parallel at once, no root.
			var b *benchsub.FanOutResult
			b, err = benchsub.FanOut(ctx, wire, via, bareConfig(c))
			if err == nil {
				r = &benchsub.OrchResult{Timing: b.Timing}
			}
		} else {
			r, err = benchsub.Orchestrate(ctx, wire, via, c)
		}
		if err != nil {
			return err
		}
		s := runs[via]
		if s == nil {
			s = &orchSeries{}
			runs[via] = s
		}
		s.add(r, cpuTime()-c0)
	}
	return nil
}

// bareConfig is the flat fan-out c as the bare loop's workload.
func bareConfig(c benchsub.OrchConfig) benchsub.FanOutConfig {
	return benchsub.FanOutConfig{Children: c.Levels[0], Turns: c.Turns, MaxParallel: c.MaxParallel, Latency: c.Latency}
}

// orchWarm is a small untimed round first, so that no way pays alone for
// the process's first connections, code paths and database files.
func orchWarm(ctx context.Context, wire string, vias []string, c benchsub.OrchConfig) error {
	w := c
	w.Levels, w.Turns, w.Latency = []int{min(c.MaxParallel, 20)}, 2, time.Millisecond
	return orchRound(ctx, wire, vias, w, map[string]*orchSeries{})
}

// orchStepCost is the store's cost of one checkpointed step with nothing
// else running: a durable run of 40 tasks one at a time, no latency,
// against the same in memory: (durable wall - in-memory wall) / steps,
// the median of five.
func orchStepCost(ctx context.Context, wire, via string, c benchsub.OrchConfig) (float64, error) {
	cal := c
	cal.Levels, cal.MaxParallel, cal.Latency = []int{40}, 1, 0
	var costs []float64
	for range 5 {
		mem, err := benchsub.Orchestrate(ctx, wire, benchsub.OrchMemory, cal)
		if err != nil {
			return 0, err
		}
		dur, err := benchsub.Orchestrate(ctx, wire, via, cal)
		if err != nil {
			return 0, err
		}
		costs = append(costs, ms(dur.Wall-mem.Wall)/float64(dur.Steps))
	}
	m, _, _ := stats(costs)
	return m, nil
}

// orchDetail is a figure's detail: the workload and each way's medians.
type orchDetail struct {
	Config benchsub.OrchConfig      `json:"config"`
	Tasks  int                      `json:"tasks"`
	Vias   map[string]orchViaDetail `json:"vias"`
	// SQLite's bound (see sqliteBound), when SQLite ran.
	SQLite *sqliteBound `json:"sqlite_bound,omitempty"`
}

// sqliteBound is the wall time SQLite's measured step cost implies.
// SQLite takes one writer at a time, so the steps of the tasks running
// together are done one after another: a wave of k tasks of s steps each
// (s = steps / tasks) takes at least k × s × step_cost, and at least its
// turns' latency plus one task's own s steps, which its chain waits for.
// Waves are each level's ⌈tasks/max_parallel⌉, one after another, and the
// root adds its two turns:
//
//	bound = 2 × latency + Σ waves max(turns × latency + s × step_cost, k × s × step_cost)
//
// with step_cost measured with nothing else running (orchStepCost).
type sqliteBound struct {
	StepCostMS float64 `json:"step_cost_alone_ms"`
	Steps      float64 `json:"steps"`
	BoundMS    float64 `json:"bound_ms"`
	Ratio      float64 `json:"bound_over_ideal"`
	Formula    string  `json:"formula"`
}

func newSQLiteBound(c benchsub.OrchConfig, costMS, steps float64) *sqliteBound {
	lat := ms(c.Latency)
	s := steps / float64(c.Tasks())
	b := 2 * lat
	for _, n := range c.Levels {
		for left := n; left > 0; left -= c.MaxParallel {
			k := float64(min(left, c.MaxParallel))
			b += max(float64(c.Turns)*lat+s*costMS, k*s*costMS)
		}
	}
	return &sqliteBound{StepCostMS: costMS, Steps: steps, BoundMS: b, Ratio: b / ms(c.Ideal()),
		Formula: "2 × latency + Σ waves max(turns × latency + s × step_cost, k × s × step_cost), s = steps/tasks, k = tasks in the wave"}
}

// orchMeasure runs the repeats of c and the SQLite calibration, and
// returns the detail.
func orchMeasure(ctx context.Context, wire string, vias []string, c benchsub.OrchConfig, repeats int) (*orchDetail, error) {
	if err := orchWarm(ctx, wire, vias, c); err != nil {
		return nil, err
	}
	runs := map[string]*orchSeries{}
	for range repeats {
		if err := orchRound(ctx, wire, vias, c, runs); err != nil {
			return nil, err
		}
	}
	d := &orchDetail{Config: c, Tasks: c.Tasks(), Vias: map[string]orchViaDetail{}}
	memWall := 0.0
	if s := runs[benchsub.OrchMemory]; s != nil {
		memWall, _, _ = stats(s.wall)
	}
	for via, s := range runs {
		d.Vias[via] = s.detail(memWall)
	}
	if s := runs[benchsub.OrchSQLite]; s != nil {
		cost, err := orchStepCost(ctx, wire, benchsub.OrchSQLite, c)
		if err != nil {
			return nil, err
		}
		steps, _, _ := stats(s.steps)
		d.SQLite = newSQLiteBound(c, cost, steps)
	}
	return d, nil
}

// emitOrch emits the figure of each way that ran: wall over ideal, with
// its goal: in memory and on Postgres, the issue's; on SQLite, within the
// same 15% as Postgres, of the bound its step cost implies rather than of
// the ideal. The first line carries the detail.
func emitOrch(name, wire string, d *orchDetail, repeats int, emit func(figure) error) error {
	first := true
	for _, via := range benchsub.OrchVias {
		v, ok := d.Vias[via]
		if !ok {
			continue
		}
		f := figure{Benchmark: "orchestration", Figure: name, Wire: wire, Via: via, Value: v.Ratio, Unit: "x",
			Repeats: repeats, Min: v.MinR, Max: v.MaxR}
		switch via {
		case benchsub.OrchMemory:
			f.Goal, f.Met = "<= 1.05", v.Ratio <= 1.05
		case benchsub.OrchPostgres:
			f.Goal, f.Met = "<= 1.15", v.Ratio <= 1.15
		case benchsub.OrchSQLite:
			b := d.SQLite
			f.Goal = fmt.Sprintf("beside the bound its step cost implies, %.3f (%s; a step %.3f ms alone, %.0f steps): <= 1.15 x bound",
				b.Ratio, b.Formula, b.StepCostMS, b.Steps)
			f.Met = v.Ratio <= b.Ratio*1.15
		}
		if first {
			f.Detail, first = d, false
		}
		if err := emit(f); err != nil {
			return err
		}
	}
	return nil
}

func benchOrchFan(ctx context.Context, wire string, vias []string, c benchsub.OrchConfig, repeats int, emit func(figure) error) error {
	withBare := slices.Contains(vias, benchsub.OrchMemory)
	if withBare {
		// Right after the in-memory run in each round.
		i := slices.Index(vias, benchsub.OrchMemory)
		vias = slices.Insert(slices.Clone(vias), i+1, benchsub.ViaBareSDK)
	}
	d, err := orchMeasure(ctx, wire, vias, c, repeats)
	if err != nil {
		return err
	}
	if err := emitOrch("fanout_wall_over_ideal", wire, d, repeats, emit); err != nil || !withBare {
		return err
	}
	// Each over its own ideal: deputy's includes the root's two turns,
	// which the bare loop does not have.
	md, bd := d.Vias[benchsub.OrchMemory], d.Vias[benchsub.ViaBareSDK]
	v := md.Ratio / bd.Ratio
	return emit(figure{Benchmark: "orchestration", Figure: "fanout_deputy_vs_bare_sdk", Wire: wire, Via: benchsub.OrchMemory,
		Value: v, Unit: "x", Goal: fmt.Sprintf("<= 1 (deputy %.3f, bare SDK %.3f, each over its own ideal)", md.Ratio, bd.Ratio),
		Met: v <= 1, Repeats: repeats, Min: v, Max: v})
}

func benchOrchDAG(ctx context.Context, wire string, vias []string, c benchsub.OrchConfig, repeats int, emit func(figure) error) error {
	d, err := orchMeasure(ctx, wire, vias, c, repeats)
	if err != nil {
		return err
	}
	return emitOrch("dag_wall_over_critical_path", wire, d, repeats, emit)
}
