package durable_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/benchloop"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// commitCounters counts the write transactions committed on SQLite files,
// by path: a commit hook on every connection the driver opens to one.
// SQLite calls it for every transaction that took the write lock (the
// store's BEGIN IMMEDIATE, DBOS's), not for reads.
var commitCounters = struct {
	mu sync.Mutex
	by map[string]*atomic.Int64
}{by: map[string]*atomic.Int64{}}

// The driver's hook list is not guarded: it is set before any test opens
// a connection.
func init() {
	sqlite.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, dsn string) error {
		commitCounters.mu.Lock()
		n := commitCounters.by[strings.SplitN(dsn, "?", 2)[0]]
		commitCounters.mu.Unlock()
		if h, ok := c.(sqlite.HookRegisterer); ok && n != nil {
			h.RegisterCommitHook(func() int32 { n.Add(1); return 0 })
		}
		return nil
	})
}

// countCommits counts the commits on the SQLite file at path from now on.
func countCommits(path string) *atomic.Int64 {
	n := &atomic.Int64{}
	commitCounters.mu.Lock()
	commitCounters.by[path] = n
	commitCounters.mu.Unlock()
	return n
}

// TestTurnCommits counts the commits a durable turn costs on SQLite (a
// model call, one read-only tool call, and what the run records of them):
// runs of two lengths, the difference per turn, so a run's own steps (load,
// start, finish) do not count. Issue 19's goal is two: one for the model
// call, one for the batch of tool calls; the test holds the count where
// the engine has brought it, so a change that adds a write to every turn
// fails here (5 a turn before issue 19, 4 with the model call folded).
func TestTurnCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "deputy.db")
	commits := countCommits(path)
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var scenario atomic.Pointer[fake.Model]
	eng, err := durable.Open(ctx, durable.Options{Store: st,
		// DBOS's queue poll takes SQLite's write lock (BEGIN IMMEDIATE)
		// each time, a commit that comes with the clock, not the turns:
		// these runs are started, not queued, so it is put off.
		PollInterval: time.Hour,
		Models:       func(string) (llm.Model, string, error) { return scenario.Load(), "fake", nil },
		Tools:        func(durable.Spec) (*tool.Set, error) { return tool.NewSet(benchloop.Noop{}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(5 * time.Second)
	run := func(turns int) int64 {
		t.Helper()
		scen, err := fake.ParseScenario([]byte(benchloop.Scenario(turns)), "bench-loop.yaml")
		if err != nil {
			t.Fatal(err)
		}
		scenario.Store(fake.NewModel(scen, fake.WithoutLatency()))
		before := commits.Load()
		id, err := eng.Start(ctx, "count", durable.Spec{System: "s", Model: "fake", Workspace: t.TempDir(), MaxTurns: 100, MaxDepth: -1})
		if err != nil {
			t.Fatal(err)
		}
		in, err := eng.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if in.State != instance.Completed || in.Turns != turns {
			t.Fatalf("run of %d turns: %s after %d (%s)", turns, in.State, in.Turns, in.Error)
		}
		return commits.Load() - before
	}
	run(2) // warm: DBOS's first writes of its own
	short, long := run(2), run(14)
	if short == 0 {
		t.Fatal("no commit counted: the hook is not on the store's connections")
	}
	perTurn := float64(long-short) / 12
	t.Logf("commits: %d for 2 turns, %d for 14: %.2f a turn", short, long, perTurn)
	// The model call 1 (its message, progress and events with its
	// checkpoint), the tool call 1, its results 1, the inbox step 1.
	// DBOS's own monitors commit with the clock, not the turns (its
	// timeouts and delayed workflows, about one a second), hence the half:
	// one more write a turn is 5.
	const most = 4.5
	if perTurn > most {
		t.Errorf("a turn commits %.2f transactions; at most 4 expected (%.1f with DBOS's background commits)", perTurn, most)
	}
}
