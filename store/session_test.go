package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/deputy-run/deputy/internal/pgdial"
	"github.com/deputy-run/deputy/internal/pgtest"
)

// A worker cut off from the database in the middle of a transaction, the
// event feed's lock taken, must not stall the others' writes: the server
// ends its session (pgdial's idle_in_transaction_session_timeout), and a
// writer waiting on the lock gets it within its own wait. Without the
// setting the waiter fails with ErrLocked after 5 s.
func TestPostgresCutOffSessionLetsGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	cut, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	tx, err := cut.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", pgEventLock)); err != nil {
		t.Fatal(err)
	}
	// From here the cut-off worker says nothing more, as across a
	// partition: its session sits idle in the transaction.

	other, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	began := time.Now()
	if err := other.CreateInstance(ctx, &Instance{ID: "i-after-the-cut", Task: "write past a cut-off worker's lock"}); err != nil {
		t.Fatalf("a write waiting on a cut-off session's lock: %v", err)
	}
	if waited := time.Since(began); waited < pgdial.IdleInTransaction/2 {
		t.Fatalf("the write took %v: it did not wait for the lock, so the test tests nothing", waited)
	}
	// The cut-off session was ended: its transaction can do nothing more.
	if _, err := tx.ExecContext(ctx, "SELECT 1"); err == nil {
		t.Fatal("the idle session's transaction lived on")
	}
}
