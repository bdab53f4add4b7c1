package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
)

// Not parallel: it checks that Close leaves no goroutine of the store's
// behind, with no other test's running.
func TestSQLiteTuning(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "d.db"), Options{CheckpointEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Commits do not checkpoint; the checkpointer does, every 4 of them.
	var auto int
	if err := s.db.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("wal_autocheckpoint = %d, %v; want 0", auto, err)
	}
	if err := s.CreateInstance(ctx, &instance.Record{ID: "i"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Transition(ctx, "i", instance.Running, "test"); err != nil {
		t.Fatal(err)
	}
	for n := range 6 {
		if err := s.UpdateProgress(ctx, "i", n, 0, llm.Usage{OutputTokens: int64(n)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-s.wal.ran:
	case <-time.After(20 * time.Second): // a guard against a hang, not a wait for time to pass
		t.Fatal("no checkpoint after 8 commits")
	}
	if n := s.wal.runs.Load(); n < 1 || n > 2 {
		t.Fatalf("%d checkpoints after 8 commits, want 1 or 2", n)
	}

	// A statement is prepared after its first run, and then used, in a
	// transaction too, with the same results.
	const get = `SELECT ` + instanceColumns + ` FROM deputy_instances WHERE id = ?`
	first, err := s.GetInstance(ctx, "i")
	if err != nil {
		t.Fatal(err)
	}
	s.stmts.wg.Wait()
	s.stmts.mu.Lock()
	st := s.stmts.m[get]
	s.stmts.mu.Unlock()
	if st == nil {
		t.Fatalf("the instance read was not prepared; prepared: %d", len(s.stmts.m))
	}
	again, err := s.GetInstance(ctx, "i")
	if err != nil || again.Usage != first.Usage || again.Turns != 5 {
		t.Fatalf("read through the statement: %+v, %v; first %+v", again, err, first)
	}
	err = s.tx(ctx, func(q querier) error {
		in, err := getInstance(ctx, q, "i")
		if err == nil && in.Turns != 5 {
			t.Errorf("read in a transaction: %+v", in)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSizePool(t *testing.T) {
	t.Parallel()
	s := &Store{dialect: SQLite, db: openTestDB(t)}
	s.SizePool(500)
	if got := s.db.Stats().MaxOpenConnections; got != 0 {
		t.Fatalf("SQLite's pool resized to %d", got)
	}
	for _, c := range []struct{ runs, want int }{{1, pgPoolMin}, {64, 32}, {100, 50}, {1000, pgPoolMax}} {
		s := &Store{dialect: Postgres, db: openTestDB(t)}
		s.SizePool(c.runs)
		if got := s.db.Stats().MaxOpenConnections; got != c.want {
			t.Errorf("%d runs: a pool of %d, want %d", c.runs, got, c.want)
		}
	}
}

// openTestDB is a handle that never connects, to look at its settings.
func openTestDB(t *testing.T) *sql.DB {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "never.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
