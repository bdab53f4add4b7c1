package benchsub

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The orchestration workloads at small sizes, each way. Orchestrate checks
// the run itself (every task once, completed, with its dependencies'
// reports in its context; the root's two turns; the request count); here,
// the figures: the tasks ran max_parallel at once, never more, and no run
// beat the ideal (with at most max_parallel workers, each turn taking at
// least the latency, none can). Postgres is the same code as SQLite on
// another URL; this package's tests have no server (`deputy-bench
// orchestration --postgres URL` runs it).
func TestOrchestrate(t *testing.T) {
	t.Parallel()
	fan := OrchConfig{Levels: []int{20}, Turns: 2, MaxParallel: 5, Latency: 5 * time.Millisecond}
	// A graph whose widest level is max_parallel: every level runs at once,
	// the ideal is its critical path, and the leaves fill the cap.
	dag := OrchConfig{Levels: []int{6, 3, 1}, Turns: 2, MaxParallel: 6, Latency: 5 * time.Millisecond}
	for _, tc := range []struct {
		name string
		c    OrchConfig
	}{{"fan", fan}, {"dag", dag}} {
		for _, wire := range Wires {
			for _, via := range []string{OrchMemory, OrchSQLite} {
				if via != OrchMemory && wire != "anthropic" {
					continue // the wire is the memory runs' concern; one durable run each is enough
				}
				t.Run(tc.name+"/"+wire+"/"+via, func(t *testing.T) {
					t.Parallel()
					c := tc.c
					if via != OrchMemory {
						// A durable task takes milliseconds to start (its
						// workflow, its load and start steps): with 5 ms
						// turns the first leaves would end before the last
						// start, and the cap would never be reached.
						c.Latency = raceSlowdown * 100 * time.Millisecond
					}
					r, err := Orchestrate(context.Background(), wire, via, c)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("%+v", *r)
					if r.Tasks != c.Tasks() || r.Requests != c.Tasks()*c.Turns+2 {
						t.Errorf("%d tasks, %d requests", r.Tasks, r.Requests)
					}
					switch {
					case r.PeakRunning > c.MaxParallel:
						t.Errorf("%d tasks ran at once, over max_parallel %d", r.PeakRunning, c.MaxParallel)
					case via == OrchMemory && r.PeakRunning != c.MaxParallel:
						t.Errorf("%d tasks ran at once, want max_parallel %d", r.PeakRunning, c.MaxParallel)
					case r.PeakRunning < 2:
						// Durably, a loaded machine may start the last
						// leaves after the first ended; they must still
						// overlap.
						t.Errorf("%d tasks ran at once: not in parallel", r.PeakRunning)
					}
					if r.Ideal != c.Ideal() || r.Wall < r.Ideal || r.Ratio < 1 {
						t.Errorf("wall %v, ideal %v, ratio %.3f", r.Wall, r.Ideal, r.Ratio)
					}
					levels := len(c.Levels)
					if c.Levels[0] > c.MaxParallel {
						levels = (c.Levels[0] + c.MaxParallel - 1) / c.MaxParallel
					}
					if r.RootFirst < c.Latency || r.RootSecond < c.Latency ||
						r.Children < time.Duration(levels*c.Turns)*c.Latency || r.RootFirst+r.Children+r.RootSecond > r.Wall {
						t.Errorf("phases %v + %v + %v, wall %v", r.RootFirst, r.Children, r.RootSecond, r.Wall)
					}
					if durable := via != OrchMemory; durable != (r.Steps > 0) {
						t.Errorf("%d steps checkpointed", r.Steps)
					} else if durable && r.Steps < c.Tasks()*c.Turns*2 {
						// At least a model step and a tool or inbox step a turn.
						t.Errorf("%d steps checkpointed for %d task turns", r.Steps, c.Tasks()*c.Turns)
					}
				})
			}
		}
	}
}

func TestOrchestratePlan(t *testing.T) {
	t.Parallel()
	tasks := DefaultOrchDAG.plan()
	if len(tasks) != 100 || DefaultOrchDAG.Tasks() != 100 {
		t.Fatalf("%d tasks", len(tasks))
	}
	deps := map[string][]string{}
	for _, x := range tasks {
		deps[x.ID] = x.DependsOn
	}
	if got := strings.Join(deps["l2-30"], ","); got != "l1-59,l1-60" {
		t.Errorf("l2-30 depends on %s", got)
	}
	if got := strings.Join(deps["l3-1"], ","); got != "l2-1,l2-2,l2-3" {
		t.Errorf("l3-1 depends on %s", got)
	}
	if len(deps["l1-1"]) != 0 || !strings.Contains(tasks[60].want, `on "## l1-1\n## l1-2\n": ok.`) {
		t.Errorf("l1-1 depends on %v; l2-1 wants %q", deps["l1-1"], tasks[60].want)
	}
	if DefaultOrchFan.Ideal() != 3400*time.Millisecond || DefaultOrchDAG.Ideal() != 2200*time.Millisecond {
		t.Errorf("ideals %v %v", DefaultOrchFan.Ideal(), DefaultOrchDAG.Ideal())
	}
	for _, bad := range []OrchConfig{{}, {Levels: []int{10, 3}, Turns: 2, MaxParallel: 1}, {Levels: []int{4}, Turns: 1, MaxParallel: 1}} {
		if _, err := Orchestrate(context.Background(), "anthropic", OrchMemory, bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	c := OrchConfig{Levels: []int{2}, Turns: 2, MaxParallel: 1}
	if _, err := Orchestrate(context.Background(), "anthropic", "nope", c); err == nil || !strings.Contains(err.Error(), "unknown orchestration via") {
		t.Errorf("unknown via: %v", err)
	}
	if _, err := Orchestrate(context.Background(), "anthropic", OrchPostgres, c); err == nil || !strings.Contains(err.Error(), "no server URL") {
		t.Errorf("postgres without a URL: %v", err)
	}
}
