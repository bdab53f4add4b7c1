package durable_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
)

// Forget deletes DBOS's rows of the workflows it is given (the root's and
// its child's, as rm hands them over from store.TreeWorkflows), leaves
// another run's alone, skips ids DBOS never had (a thousand of them first,
// so the real ones are in the last of its chunks), works beside the live
// engine, and on SQLite leaves the store's own handle open.
func TestForgetDeletesTheEngineRows(t *testing.T) {
	t.Parallel()
	for _, dialect := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			e, st, url := openOn(t, dialect)
			ctx := context.Background()
			gone, kept := finishedRun(t, e, "do it"), finishedRun(t, e, "do it again")
			wfs, err := st.TreeWorkflows(ctx, gone)
			if err != nil || len(wfs) < 2 {
				t.Fatalf("TreeWorkflows(%s): %v, %v; want the root's and its child's", gone, wfs, err)
			}
			for _, wf := range wfs {
				if engineRows(t, st, wf) == 0 {
					t.Fatalf("workflow %s has no engine rows before Forget: nothing to test", wf)
				}
			}
			ids := make([]string, 0, 1000+len(wfs))
			for i := range 1000 {
				ids = append(ids, fmt.Sprintf("deputy-never-was-%d", i))
			}
			if err := durable.Forget(ctx, st, url, append(ids, wfs...)); err != nil {
				t.Fatal(err)
			}
			for _, wf := range wfs {
				if n := engineRows(t, st, wf); n != 0 {
					t.Errorf("workflow %s: %d engine rows left after Forget", wf, n)
				}
			}
			runs, err := st.Runs(ctx, kept)
			if err != nil || len(runs) == 0 {
				t.Fatalf("the kept run's records: %v %v (is the store still open?)", runs, err)
			}
			if engineRows(t, st, runs[0].WorkflowID) == 0 {
				t.Errorf("Forget of %s deleted the engine rows of %s", gone, kept)
			}
			if err := durable.Forget(ctx, st, url, nil); err != nil {
				t.Errorf("Forget of nothing: %v", err)
			}
		})
	}
}

// openOn opens an engine on a new database of the dialect, and gives the
// URL Forget needs: the file's path on SQLite.
func openOn(t *testing.T, dialect store.Dialect) (*durable.Engine, *store.Store, string) {
	t.Helper()
	var runs atomic.Int64
	if dialect == store.SQLite {
		path := filepath.Join(t.TempDir(), "deputy.db")
		e, st := open(t, path, &runs)
		return e, st, path
	}
	s, err := fake.ParseScenario([]byte(scenario), "durable.yaml")
	if err != nil {
		t.Fatal(err)
	}
	url := pgtest.URL(t)
	w := openWorker(t, url, "forget", clock.Real, fake.NewModel(s, fake.WithoutLatency()), counter{&runs})
	return w.e, w.st, url
}

// finishedRun starts a root on the test scenario and waits for it to end
// completed (a child spawned and finished on the way).
func finishedRun(t *testing.T, e *durable.Engine, task string) string {
	t.Helper()
	ctx := context.Background()
	id, err := e.Start(ctx, task, durable.Spec{System: "root", Model: "fake", Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	in, err := e.Wait(ctx, id)
	if err != nil || in.State != instance.Completed {
		t.Fatalf("run %s: %+v %v", id, in, err)
	}
	return id
}

// engineRows counts DBOS's rows of workflow wf: its status row and its
// steps' checkpointed outputs (in the dbos schema on Postgres).
func engineRows(t *testing.T, st *store.Store, wf string) int {
	t.Helper()
	schema, arg := "", "?"
	if st.Dialect() == store.Postgres {
		schema, arg = "dbos.", "$1"
	}
	n := 0
	for _, table := range []string{"workflow_status", "operation_outputs"} {
		var c int
		q := "SELECT COUNT(*) FROM " + schema + table + " WHERE workflow_uuid = " + arg
		if err := st.DB().QueryRowContext(context.Background(), q, wf).Scan(&c); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		n += c
	}
	return n
}
