package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/deputy-run/deputy/llm"
)

// Tx is a transaction on the store's own database that its caller began
// and will commit: the durable engine's, whose step checkpoint commits in
// the same transaction as the store's writes (one commit for a model call
// and its transcript row, progress and events, not two). Its SQL arrives
// in the store's dialect (placeholders rebound already). The interface is
// the store's, not DBOS's: durable adapts dbos.Tx to it.
type Tx interface {
	Exec(ctx context.Context, query string, args ...any) (TxResult, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// TxResult is what a write through a Tx reports.
type TxResult interface {
	RowsAffected() (int64, error)
}

// Rows is a result set: *sql.Rows, or one read through a Tx.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Row is one row not yet scanned. Through a Tx its Scan may say
// pgx.ErrNoRows or sql.ErrNoRows when none matched; the store reads both
// as sql.ErrNoRows.
type Row interface {
	Scan(dest ...any) error
}

// txResult is a Tx's TxResult as the sql.Result the package's code takes.
type txResult struct{ TxResult }

func (txResult) LastInsertId() (int64, error) {
	return 0, errors.New("store: LastInsertId through a caller's transaction")
}

// txRow maps a Tx row's "no rows" onto database/sql's, which the
// package's code tests for.
type txRow struct{ r Row }

func (r txRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if err != nil && errors.Is(err, pgx.ErrNoRows) && !errors.Is(err, sql.ErrNoRows) {
		return sql.ErrNoRows
	}
	return err
}

// AppendWithTx is AppendWith on the caller's transaction tx: the same
// checks, writes and idempotence, committed (or not) with whatever else
// tx holds. The caller calls EventsCommitted once tx has committed, so
// that this process's event watchers wake (on Postgres the commit
// announces itself as well).
func (s *Store) AppendWithTx(ctx context.Context, tx Tx, id string, turn, firstSeq int, msgs []llm.Message, w With) error {
	content, err := encodeAppend(id, firstSeq, msgs, w.Events)
	if err != nil {
		return err
	}
	var events bool
	if err := s.appendWith(ctx, querier{d: s.dialect, tx: tx, events: &events}, id, turn, firstSeq, msgs, content, w); err != nil {
		return fmt.Errorf("append messages %d..%d to %s: %w", firstSeq, firstSeq+len(msgs)-1, id, classify(s.dialect, s.busy, err))
	}
	return nil
}

// EventsCommitted wakes this process's EventsWritten waiters after a
// caller's transaction that wrote events (AppendWithTx) committed.
func (s *Store) EventsCommitted() { s.eventsCommitted() }
