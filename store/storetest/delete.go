package storetest

import (
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

// Delete is the conformance suite of DeleteTree and EndedTrees (deputy rm
// and deputy prune), run by both dialects' tests beside Run.
func Delete(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"DeleteTree", testDeleteTree},
		{"DeleteRefusesLive", testDeleteRefusesLive},
		{"EndedTrees", testEndedTrees},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// fill gives instance id (running) a row in every table an instance has
// rows in: a run with its workflow, messages, a compaction, an attempt,
// mail, an event of its own (transitions and state events come with
// every move).
func (e *env) fill(id string) {
	e.t.Helper()
	noErr(e.t, "set workflow", e.s.SetWorkflow(e.ctx, id, "wf-"+id))
	run, err := e.s.StartRun(e.ctx, id, "wf-"+id)
	noErr(e.t, "start run", err)
	noErr(e.t, "end run", e.s.EndRun(e.ctx, run.ID, "suspended"))
	_, err = e.s.StartRun(e.ctx, id, "wf-"+id+"-2")
	noErr(e.t, "start run 2", err)
	noErr(e.t, "append", e.s.AppendMessages(e.ctx, id, 1, 0, conversation()))
	noErr(e.t, "compact", e.s.RecordCompaction(e.ctx, store.Compaction{InstanceID: id, Turn: 3, ThroughSeq: 2, Summary: "s"}))
	_, err = e.s.RecordAttempt(e.ctx, id, 1, llm.Attempt{Provider: "fake", Model: "m", Status: 529, Reason: "overloaded", Retry: true})
	noErr(e.t, "attempt", err)
	_, err = e.s.Post(e.ctx, store.Mail{InstanceID: id, Sender: "operator", Kind: "note", Body: "hi"})
	noErr(e.t, "post", err)
	_, err = e.s.AppendEvent(e.ctx, id, "tool_call", []byte(`{"name":"read_file"}`))
	noErr(e.t, "event", err)
}

// end finishes instance id, running, as completed.
func (e *env) end(id string) {
	e.t.Helper()
	noErr(e.t, "finish "+id, e.s.Finish(e.ctx, id, store.Result{State: instance.Completed, StopReason: "completed", Report: "done"}))
}

// instanceTables lists the tables with an instance_id column, found in
// the schema itself, so that a table added later is checked without
// anyone remembering to list it.
func (e *env) instanceTables() []string {
	e.t.Helper()
	query := `SELECT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) c
		WHERE m.type = 'table' AND c.name = 'instance_id' ORDER BY m.name`
	if e.s.Dialect() == store.Postgres {
		query = `SELECT table_name FROM information_schema.columns
			WHERE table_schema = current_schema() AND column_name = 'instance_id' ORDER BY table_name`
	}
	rows, err := e.raw().QueryContext(e.ctx, query)
	noErr(e.t, "list tables", err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		noErr(e.t, "scan table name", rows.Scan(&name))
		out = append(out, name)
	}
	noErr(e.t, "list tables", rows.Err())
	if len(out) < 7 {
		e.t.Fatalf("found only %v with an instance_id column", out)
	}
	return out
}

// rowsOf counts, for each table with rows of instances, the rows of each
// of ids ("table/id" → count), deputy_instances' own included.
func (e *env) rowsOf(db *sql.DB, tables []string, ids ...string) map[string]int {
	e.t.Helper()
	out := map[string]int{}
	count := func(table, column, id string) {
		var n int
		q := fmt.Sprintf(`SELECT COUNT(*) FROM %s WHERE %s = `, table, column)
		if e.s.Dialect() == store.Postgres {
			q += "$1"
		} else {
			q += "?"
		}
		noErr(e.t, "count "+table, db.QueryRowContext(e.ctx, q, id).Scan(&n))
		out[table+"/"+id] = n
	}
	for _, id := range ids {
		count("deputy_instances", "id", id)
		for _, t := range tables {
			count(t, "instance_id", id)
		}
	}
	return out
}

func testDeleteTree(t *testing.T, h Harness) {
	e := newEnv(t, h)
	// r ─ c1 ─ g1, r ─ c2; and a tree of its own, o, that must not be
	// touched.
	for _, in := range [][2]string{{"r", ""}, {"c1", "r"}, {"g1", "c1"}, {"c2", "r"}, {"o", ""}, {"oc", "o"}} {
		e.create(in[0], in[1])
		e.move(in[0], instance.Running)
		e.fill(in[0])
	}
	for _, id := range []string{"g1", "c1", "c2", "r", "oc", "o"} {
		e.end(id)
	}
	db := e.raw()
	tables := e.instanceTables()
	all := []string{"r", "c1", "g1", "c2", "o", "oc"}
	before := e.rowsOf(db, tables, all...)
	for k, n := range before {
		if n == 0 {
			t.Fatalf("the fixture has no row in %s: the test would prove nothing there", k)
		}
	}

	// TreeWorkflows names what DeleteTree will delete of the engine's and
	// deletes nothing (rm and prune forget those runs first).
	wfs, err := e.s.TreeWorkflows(e.ctx, "c1")
	noErr(t, "workflows of c1", err)
	if again := e.rowsOf(db, tables, all...); !maps.Equal(again, before) {
		t.Errorf("TreeWorkflows changed rows: %v, was %v", again, before)
	}
	d, err := e.s.DeleteTree(e.ctx, "c1")
	noErr(t, "delete c1", err)
	if !slices.Equal(slices.Sorted(slices.Values(wfs)), slices.Sorted(slices.Values(d.Workflows))) {
		t.Errorf("TreeWorkflows %v, DeleteTree's workflows %v", wfs, d.Workflows)
	}
	rows := d.Rows
	if !slices.Equal(d.Instances, []string{"c1", "g1"}) || d.Rows == 0 {
		t.Fatalf("deleted %+v, want c1 then g1", d)
	}
	if want := []string{"wf-c1", "wf-c1-2", "wf-g1", "wf-g1-2"}; !slices.Equal(slices.Sorted(slices.Values(d.Workflows)), want) {
		t.Errorf("workflows %v, want %v", d.Workflows, want)
	}
	d, err = e.s.DeleteTree(e.ctx, "r")
	noErr(t, "delete r", err)
	if !slices.Equal(d.Instances, []string{"r", "c2"}) {
		t.Fatalf("deleted %v, want r, c2", d.Instances)
	}
	after := e.rowsOf(db, tables, all...)
	var total int64
	for _, k := range slices.Sorted(maps.Keys(after)) {
		gone := k[len(k)-2:] != "/o" && k[len(k)-3:] != "/oc"
		switch {
		case gone && after[k] != 0:
			t.Errorf("%s: %d rows left after the delete", k, after[k])
		case !gone && after[k] != before[k]:
			t.Errorf("%s: %d rows, %d before another tree's delete", k, after[k], before[k])
		}
		if gone {
			total += int64(before[k])
		}
	}
	if rows+d.Rows != total {
		t.Errorf("rows reported %d + %d, counted %d", rows, d.Rows, total)
	}
	for _, id := range []string{"r", "c1", "g1", "c2"} {
		if _, err := e.s.GetInstance(e.ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("get %s after its delete: %v", id, err)
		}
	}
	if o := e.get("oc"); o.State != instance.Completed {
		t.Errorf("the other tree changed: %+v", o)
	}
	_, err = e.s.DeleteTree(e.ctx, "r")
	wantErr(t, "delete again", err, store.ErrNotFound)
}

func testDeleteRefusesLive(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("r", "")
	e.move("r", instance.Running)
	e.create("c", "r")
	e.move("c", instance.Running)
	e.create("g", "c")
	e.move("g", instance.Running)
	e.move("g", instance.Paused)
	db := e.raw()
	tables := e.instanceTables()
	before := e.rowsOf(db, tables, "r", "c", "g")

	var ae *store.ActiveError
	_, err := e.s.DeleteTree(e.ctx, "r")
	if !errors.As(err, &ae) || !errors.Is(err, store.ErrActive) || ae.ID != "r" || ae.State != instance.Running || ae.Parent {
		t.Fatalf("delete a running root: %v (%+v)", err, ae)
	}
	e.end("g")
	e.end("c")
	// c has ended, its parent has not.
	_, err = e.s.DeleteTree(e.ctx, "c")
	if !errors.As(err, &ae) || ae.ID != "r" || !ae.Parent {
		t.Fatalf("delete a child of a running parent: %v (%+v)", err, ae)
	}
	// A live child under an ended parent (a cancel on its way down).
	e.create("r2", "")
	e.move("r2", instance.Running)
	e.create("k", "r2")
	e.move("k", instance.Running)
	e.end("r2")
	_, err = e.s.DeleteTree(e.ctx, "r2")
	if !errors.As(err, &ae) || ae.ID != "k" || ae.State != instance.Running {
		t.Fatalf("delete an ended root with a live child: %v (%+v)", err, ae)
	}
	got := e.rowsOf(db, tables, "r", "c", "g")
	for k, n := range before {
		if k[len(k)-2:] != "/c" && k[len(k)-2:] != "/g" && got[k] != n {
			t.Errorf("%s: %d rows after refused deletes, %d before", k, got[k], n)
		}
	}
	if got["deputy_instances/c"] != 1 || got["deputy_instances/g"] != 1 {
		t.Errorf("a refused delete deleted: %v", got)
	}
	_, err = e.s.DeleteTree(e.ctx, "nobody")
	wantErr(t, "delete an unknown id", err, store.ErrNotFound)
}

func testEndedTrees(t *testing.T, h Harness) {
	e := newEnv(t, h)
	tree := func(root string, live bool) {
		e.create(root, "")
		e.move(root, instance.Running)
		e.create(root+"-c", root)
		e.move(root+"-c", instance.Running)
		e.end(root + "-c")
		if !live {
			e.end(root)
		}
	}
	tree("a", false) // ends at Epoch
	e.clock.Advance(time.Hour)
	tree("b", false) // an hour later
	tree("live", true)
	e.clock.Advance(time.Hour)
	tree("c", false) // two hours later

	list := func(before time.Time) []string {
		t.Helper()
		ts, err := e.s.EndedTrees(e.ctx, before)
		noErr(t, "ended trees", err)
		var out []string
		for _, tr := range ts {
			if tr.Instances != 2 {
				t.Errorf("tree %s: %d instances, want 2", tr.Root, tr.Instances)
			}
			out = append(out, tr.Root)
		}
		return out
	}
	if got := list(Epoch.Add(90 * time.Minute)); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("ended before 1h30: %v, want a, b", got)
	}
	if got := list(Epoch.Add(3 * time.Hour)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("ended before 3h (the live tree never): %v", got)
	}
	if got := list(Epoch); len(got) != 0 {
		t.Errorf("ended before the first end: %v", got)
	}
	ts, _ := e.s.EndedTrees(e.ctx, Epoch.Add(time.Minute))
	if len(ts) != 1 || !ts[0].EndedAt.Equal(Epoch) {
		t.Errorf("tree a: %+v, want ended at %v", ts, Epoch)
	}
}
