package durable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// fanOutCreateGoal is issue 19's bound on a 1,000-task fan_out's listing on
// SQLite: from the call to every child recorded.
const fanOutCreateGoal = time.Second

// stalledKids answers a root with script and never answers a child (an
// explorer): the benchmark times the listing of a fan-out's children, not
// their runs.
type stalledKids struct{ script llm.Model }

func (m stalledKids) Generate(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
	if strings.Contains(req.System, "read-only explorer") {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return m.script.Generate(ctx, req, stream)
}

// fanOutPlan is a root's script whose first answer is a fan_out of n
// independent explorer tasks.
func fanOutPlan(n int) string {
	var b strings.Builder
	b.WriteString("rules:\n  - match: {turn: 1}\n    tool_calls:\n      - name: fan_out\n        input:\n          tasks:\n")
	for i := range n {
		fmt.Fprintf(&b, "            - {id: t%d, subagent_type: explorer, task: \"look at part %d\"}\n", i, i)
	}
	b.WriteString("  - match: {turn: 2}\n    text: done\n")
	return b.String()
}

// BenchmarkFanOutCreate times a root's fan_out of 1,000 tasks (100 with
// -short) on SQLite from the root's model response holding the call to
// every child in the store (once the last child's EventCreated came). It prints one JSON line per run with the goal (fanOutCreateGoal).
func BenchmarkFanOutCreate(b *testing.B) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	s, err := fake.ParseScenario([]byte(fanOutPlan(n)), "fanout-create.yaml")
	if err != nil {
		b.Fatal(err)
	}
	model := stalledKids{fake.NewModel(s, fake.WithoutLatency())}
	var took []time.Duration
	for b.Loop() {
		took = append(took, fanOutCreate(b, model, n))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	med := took[len(took)/2]
	b.ReportMetric(float64(med.Milliseconds()), "ms-to-list")
	line, _ := json.Marshal(map[string]any{"figure": "fan_out_create", "dialect": "sqlite", "tasks": n,
		"runs": len(took), "median_ms": med.Milliseconds(), "min_ms": took[0].Milliseconds(),
		"max_ms": took[len(took)-1].Milliseconds(), "goal_ms": fanOutCreateGoal.Milliseconds(),
		"met": n < 1000 || med <= fanOutCreateGoal})
	fmt.Println(string(line))
}

// fanOutCreate runs one fan-out of n tasks on a fresh database until its
// children are listed, and returns how long that took.
func fanOutCreate(b *testing.B, model llm.Model, n int) time.Duration {
	ctx := context.Background()
	dir := b.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "deputy.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var (
		mu      sync.Mutex
		start   time.Time
		last    time.Time
		listed  time.Time
		created int
		root    string
		all     = make(chan struct{})
	)
	e, err := durable.Open(ctx, durable.Options{
		Store:   st,
		Models:  func(string) (llm.Model, string, error) { return model, "fake", nil },
		Tools:   func(durable.Spec) (*tool.Set, error) { return tool.NewSet() },
		MaxRuns: n + 8,
		OnEvent: func(ev agent.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ev.Kind == agent.EventStep && ev.Parent == "" && ev.Loop.Kind == loop.EventModelResponse && start.IsZero():
				start = time.Now()
			case ev.Kind == agent.EventListed:
				listed = time.Now()
			case ev.Kind == agent.EventCreated:
				if created++; created == n {
					last = time.Now()
					close(all)
				}
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	root, err = e.Start(ctx, "fan out", durable.Spec{Model: "fake", Workspace: dir, MaxParallel: n, MaxOutputTokens: 64 * n})
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(2 * time.Minute):
		b.Fatalf("%d of %d children listed after 2 minutes", created, n)
	}
	// A child's EventCreated may come before its write commits (it did
	// before children were listed in one write): the end is when the
	// store holds them all.
	for {
		var k int
		if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM deputy_instances WHERE parent = ?`, root).Scan(&k); err != nil {
			b.Fatal(err)
		}
		if k == n {
			break
		}
		time.Sleep(2 * time.Millisecond) // a poll of the store, which has no wake-up for it
	}
	mu.Lock()
	last = time.Now()
	took := last.Sub(start)
	if os.Getenv("DEPUTY_BENCH_PHASES") != "" && !listed.IsZero() {
		fmt.Printf("prepare %v, write %v\n", listed.Sub(start), last.Sub(listed))
	}
	mu.Unlock()
	kids, err := st.ListInstances(ctx, store.Filter{Parent: root})
	if err != nil || len(kids) != n {
		b.Fatalf("%d children in the store once listed, want %d (%v)", len(kids), n, err)
	}
	e.Close(10 * time.Millisecond) // the children's runs are cut: what is timed is done
	_ = os.RemoveAll(dir)
	return took
}
