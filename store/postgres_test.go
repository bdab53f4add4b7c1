package store_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/store/storetest"
)

var postgresHarness = storetest.Harness{
	NewURL: pgtest.URL,
	Raw:    rawPostgres,
	Lock: func(t testing.TB, url string) func() {
		// A session in the middle of a long transaction holding the tables
		// (a migration by another deputy, a manual ALTER, a dump).
		db := rawPostgres(t, url)
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("LOCK TABLE deputy_schema, deputy_instances IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatalf("lock: %v", err)
		}
		return func() {
			tx.Rollback()
			db.Close()
		}
	},
}

func rawPostgres(t testing.TB, url string) *sql.DB {
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	storetest.Run(t, postgresHarness)
}

func TestPostgresURLs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	for _, u := range []string{url, "postgresql" + strings.TrimPrefix(url, "postgres")} {
		s, err := store.Open(ctx, u, store.Options{})
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		if s.Dialect() != store.Postgres {
			t.Fatalf("dialect %s", s.Dialect())
		}
		s.Close()
	}
	// An unreachable server: a clear error that keeps the password out.
	_, err := store.Open(ctx, "postgres://deputy:s3cret-pw@127.0.0.1:1/deputy?connect_timeout=5", store.Options{})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("open an unreachable server: %v", err)
	}
	_, err = store.Open(ctx, "postgres://deputy:s3cret-pw@host:port-is-not-a-number/db", store.Options{})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("open a bad URL: %v", err)
	}
}

// On Postgres, EventsWritten wakes for another process's commits too
// (LISTEN/NOTIFY), not only for this one's: a dashboard on one machine
// follows a child running on another as it happens.
func TestPostgresEventsWrittenAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	reader, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	writer, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	within := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("never woken: %s", what)
		}
	}
	// The first call starts the listener, which wakes its waiters once
	// listening (what came before is for their read to find).
	within("the listener listening", reader.EventsWritten())
	woken := reader.EventsWritten()
	select {
	case <-woken:
		t.Fatal("woken with nothing committed")
	default:
	}
	// Another process's commit wakes the reader, though it wrote nothing
	// itself.
	if err := writer.CreateInstance(ctx, &instance.Record{ID: "i-elsewhere", Task: "written by another process"}); err != nil {
		t.Fatal(err)
	}
	within("another process's event", woken)
	evs, err := reader.ListEvents(ctx, store.EventFilter{})
	if err != nil || len(evs) == 0 || evs[len(evs)-1].InstanceID != "i-elsewhere" {
		t.Fatalf("events after the wake-up: %+v, %v", evs, err)
	}
}
