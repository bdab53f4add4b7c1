package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/store"
)

// schemaRows reads deputy_schema as "version@applied_at" strings.
func schemaRows(t *testing.T, e *env) []string {
	t.Helper()
	rows, err := e.raw().QueryContext(e.ctx, `SELECT version, applied_at FROM deputy_schema ORDER BY version`)
	noErr(t, "read deputy_schema", err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v, at int64
		noErr(t, "scan deputy_schema", rows.Scan(&v, &at))
		out = append(out, fmt.Sprintf("%d@%d", v, at))
	}
	noErr(t, "read deputy_schema", rows.Err())
	return out
}

// createOld inserts an instance as every schema before migration 5 could
// hold it (the store's own insert names columns added since).
func createOld(t *testing.T, e *env, id, parent string) {
	t.Helper()
	root, depth, par := id, 0, "NULL"
	if parent != "" {
		root, depth, par = parent, 1, "'"+parent+"'"
	}
	at := Epoch.UnixMicro()
	_, err := e.raw().ExecContext(e.ctx, fmt.Sprintf(`INSERT INTO deputy_instances
		(id, parent, root, depth, type, task, mode, model, state, created_at, updated_at)
		VALUES ('%[1]s', %[2]s, '%[3]s', %[4]d, 'worker', 'task of %[1]s', 'isolated', 'fake:m', 'created', %[5]d, %[5]d)`,
		id, par, root, depth, at))
	noErr(t, "insert "+id, err)
	_, err = e.raw().ExecContext(e.ctx, fmt.Sprintf(`INSERT INTO deputy_transitions
		(instance_id, seq, from_state, to_state, cause, at) VALUES ('%s', 1, '', 'created', 'create', %d)`, id, at))
	noErr(t, "insert the creation of "+id, err)
}

func testMigrations(t *testing.T, h Harness) {
	latest := store.LatestSchemaVersion()
	if latest < 2 {
		t.Fatalf("LatestSchemaVersion() = %d; the suite needs an older version to migrate from", latest)
	}
	for from := 1; from < latest; from++ {
		t.Run(fmt.Sprint("from ", from), func(t *testing.T) {
			e := &env{t: t, h: h, url: h.NewURL(t), clock: clock.NewFake(Epoch), ctx: context.Background()}
			old := e.open(store.Options{MigrateTo: from})
			if v, err := old.SchemaVersion(e.ctx); err != nil || v != from {
				t.Fatalf("database built at version %d reports %d, %v", from, v, err)
			}
			// Data written by the older schema.
			e.s = old
			// Rows as the schema at from holds them: before migration 5
			// inserted behind the store's back, since then by the store.
			mk := func(id, parent string) {
				if from >= 5 {
					e.create(id, parent)
				} else {
					createOld(t, e, id, parent)
				}
			}
			mk("r", "")
			mk("c", "r")
			e.move("c", instance.Running)
			noErr(t, "append", old.AppendMessages(e.ctx, "c", 1, 0, conversation()))
			_, err := old.Post(e.ctx, store.Mail{InstanceID: "c", Kind: "answer", Body: "42"})
			noErr(t, "post", err)
			// Spending recorded before the tree totals (migration 6) is
			// back-filled; a usage that does not decode counts nothing
			// and does not stop the migration.
			backfill := from < 6
			if backfill {
				mk("z", "")
				for _, set := range []string{
					`usage = '{"input_tokens":3,"output_tokens":4,"cache_read_tokens":10}', cost = 0.5 WHERE id = 'c'`,
					`usage = '{"input_tokens":1}' WHERE id = 'r'`,
					`usage = 'not json' WHERE id = 'z'`,
				} {
					_, err = e.raw().ExecContext(e.ctx, `UPDATE deputy_instances SET `+set)
					noErr(t, "set "+set, err)
				}
			}
			noErr(t, "close the old store", old.Close())

			e.clock.Advance(time.Hour)
			e.s = e.open(store.Options{})
			if v, err := e.s.SchemaVersion(e.ctx); err != nil || v != latest {
				t.Fatalf("after migrating: version %d, %v; want %d", v, err, latest)
			}
			rows := schemaRows(t, e)
			if len(rows) != latest {
				t.Fatalf("deputy_schema rows %v, want one per version", rows)
			}
			for i, r := range rows {
				at := Epoch
				if i >= from {
					at = Epoch.Add(time.Hour)
				}
				if want := fmt.Sprintf("%d@%d", i+1, at.UnixMicro()); r != want {
					t.Fatalf("deputy_schema row %d = %s, want %s", i, r, want)
				}
			}
			// The old data is there and the new schema's queries work on it.
			if got, err := e.s.TreeSpent(e.ctx, "r"); backfill && (err != nil || got != (store.TreeTotal{Tokens: 18, USD: 0.5})) {
				t.Fatalf("tree total after migrating: %+v, %v; want 18 tokens, 0.5 USD", got, err)
			}
			if got, err := e.s.TreeSpent(e.ctx, "z"); backfill && (err != nil || got != (store.TreeTotal{})) {
				t.Fatalf("tree total of a damaged root after migrating: %+v, %v", got, err)
			}
			if c := e.get("c"); c.State != instance.Running || c.Root != "r" || c.Depth != 1 {
				t.Fatalf("migrated instance: %+v", c)
			}
			if list, err := e.s.ListInstances(e.ctx, store.Filter{Parent: "r", Active: true}); err != nil || len(list) != 1 {
				t.Fatalf("list after migrating: %v, %v", list, err)
			}
			// Old rows keep the order they were listed in (created_at,
			// then id: r and c share an instant), and a new one follows
			// them (on Postgres the sequence starts past the old rows).
			e.create("b", "r")
			want := []string{"c", "r", "b"}
			if from >= 5 {
				want = []string{"r", "c", "b"} // numbered as they were inserted
			}
			if got := listIDs(t, e, store.Filter{Root: "r"}); !slices.Equal(got, want) {
				t.Fatalf("tree after migrating: %v, want %v", got, want)
			}
			if got, err := e.s.Transcript(e.ctx, "c"); err != nil || !reflect.DeepEqual(got, conversation()) {
				t.Fatalf("transcript after migrating: %v", err)
			}
			if m, err := e.s.Pending(e.ctx, "c"); err != nil || len(m) != 1 || m[0].Body != "42" {
				t.Fatalf("mail after migrating: %+v, %v", m, err)
			}
			e.move("c", instance.Completed)
			// Opening an up-to-date database changes nothing.
			e.clock.Advance(time.Hour)
			e.open(store.Options{})
			if again := schemaRows(t, e); !reflect.DeepEqual(again, rows) {
				t.Fatalf("reopening changed deputy_schema: %v, was %v", again, rows)
			}
		})
	}
	e := &env{t: t, h: h, url: h.NewURL(t), clock: clock.NewFake(Epoch), ctx: context.Background()}
	if _, err := e.tryOpen(store.Options{MigrateTo: latest + 1}); err == nil {
		t.Fatal("MigrateTo past the latest version: no error")
	}
}

func testConcurrentOpen(t *testing.T, h Harness) {
	// Several processes starting on one new database: one migrates, the
	// others find it done.
	e := &env{t: t, h: h, url: h.NewURL(t), clock: clock.NewFake(Epoch), ctx: context.Background()}
	errs := make([]error, 4)
	stores := make([]*store.Store, len(errs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stores[i], errs[i] = store.Open(e.ctx, e.url, store.Options{Clock: e.clock})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	e.s = stores[0]
	if rows := schemaRows(t, e); len(rows) != store.LatestSchemaVersion() {
		t.Fatalf("deputy_schema after concurrent opens: %v", rows)
	}
	e.create("i", "")
	if _, err := stores[3].GetInstance(e.ctx, "i"); err != nil {
		t.Fatal(err)
	}
}

func testNewerSchema(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.createIn("canary", instance.Running)
	noErr(t, "append", e.s.AppendMessages(e.ctx, "canary", 1, 0, conversation()[:2]))
	noErr(t, "close", e.s.Close())
	future := store.LatestSchemaVersion() + 1
	if _, err := e.raw().ExecContext(e.ctx, fmt.Sprintf(`INSERT INTO deputy_schema (version, applied_at) VALUES (%d, 0)`, future)); err != nil {
		t.Fatalf("pretend a newer deputy migrated: %v", err)
	}
	before := schemaRows(t, e)

	e.clock.Advance(time.Hour)
	_, err := e.tryOpen(store.Options{})
	wantErr(t, "open a newer database", err, store.ErrNewerSchema)
	for _, want := range []string{fmt.Sprint("version ", future), fmt.Sprint("up to ", store.LatestSchemaVersion()), "nothing was changed"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	if after := schemaRows(t, e); !reflect.DeepEqual(after, before) {
		t.Fatalf("deputy_schema changed: %v, was %v", after, before)
	}
	var state string
	var n int
	raw := e.raw()
	noErr(t, "read canary", raw.QueryRowContext(e.ctx, `SELECT state FROM deputy_instances WHERE id = 'canary'`).Scan(&state))
	noErr(t, "count messages", raw.QueryRowContext(e.ctx, `SELECT COUNT(*) FROM deputy_messages`).Scan(&n))
	if state != string(instance.Running) || n != 2 {
		t.Fatalf("data changed: canary %s, %d messages", state, n)
	}
}

func testLocked(t *testing.T, h Harness) {
	if h.Lock == nil {
		t.Fatal("the harness has no Lock")
	}
	e := newEnv(t, h)
	e.create("i", "")
	noErr(t, "close", e.s.Close())

	release := h.Lock(t, e.url)
	const wait = 150 * time.Millisecond
	start := time.Now()
	_, err := e.tryOpen(store.Options{BusyTimeout: wait})
	took := time.Since(start)
	release()
	wantErr(t, "open a locked database", err, store.ErrLocked)
	if !strings.Contains(err.Error(), "locked") {
		t.Fatalf("error %q does not say the database is locked", err)
	}
	// It waited for the lock, up to the busy timeout, before failing.
	if took < wait {
		t.Fatalf("failed after %v, before the %v busy timeout", took, wait)
	}
	var ue interface{ Unwrap() []error }
	if !errors.As(err, &ue) {
		t.Fatalf("error %v does not keep the driver's error", err)
	}

	e.s = e.open(store.Options{BusyTimeout: wait})
	if in := e.get("i"); in.State != instance.Created {
		t.Fatalf("after the lock: %+v", in)
	}
	// A writer locked out mid-life gets ErrLocked too, not a bare driver error.
	release = h.Lock(t, e.url)
	err = e.s.Transition(e.ctx, "i", instance.Running, "locked out")
	release()
	wantErr(t, "transition while locked", err, store.ErrLocked)
	noErr(t, "transition after", e.s.Transition(e.ctx, "i", instance.Running, "free"))
}
