package store_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

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
