// Package store keeps deputy's own records of its instances: the instance
// rows and their state machine, runs, transcripts, compactions, model-call
// attempts, mailboxes, definitions and events. The durable engine (DBOS)
// keeps its own tables beside these; every table here starts with deputy_
// so the two never clash.
//
// One Store type serves both dialects through database/sql: SQLite
// (modernc.org/sqlite, pure Go, the embedded default) and Postgres (pgx).
// The differences are small and live in dialect.go and migrate.go; the
// conformance suite in store/storetest pins the behaviour both must share.
//
// Every write that must not be seen half-done (a transition and its record,
// a finish and its result, a batch of transcript messages) happens in one
// transaction. Writes the runtime may repeat after a crash (creating an
// instance, appending messages, recording a compaction, starting a run,
// posting mail with a key, finishing with the same result) are idempotent:
// the same content again is a no-op, different content is ErrConflict.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deputy-run/deputy/clock"
)

// Options tune Open. The zero value is the production setting.
type Options struct {
	// Clock stamps every recorded time. Default clock.Real. Times are kept
	// to the microsecond (what Postgres keeps), as UTC.
	Clock clock.Clock
	// BusyTimeout is how long a statement waits for a lock another
	// connection or process holds before failing with ErrLocked: SQLite's
	// busy_timeout, Postgres' lock_timeout. Default 5s.
	BusyTimeout time.Duration
	// MigrateTo stops the migrations at this schema version (0: the latest).
	// For tests that build an older database, and for a staged rollout.
	MigrateTo int
	// CheckpointEvery is how many of the store's commits pass between two
	// checkpoints of SQLite's WAL (DefaultCheckpointEvery when 0).
	CheckpointEvery int
}

// DefaultBusyTimeout is Options.BusyTimeout when unset.
const DefaultBusyTimeout = 5 * time.Second

// Store is deputy's database. It is safe for concurrent use.
type Store struct {
	db      *sql.DB
	dialect Dialect
	clock   clock.Clock
	busy    time.Duration

	evMu sync.Mutex
	evCh chan struct{} // closed when events are committed (see EventsWritten)

	pgcfg  *pgx.ConnConfig // Postgres: the listener's connection
	listen listener

	stmts *stmts      // SQLite's prepared statements (nil on Postgres)
	wal   *checkpoint // SQLite's WAL checkpoints, off the writers' path (nil on Postgres)
}

// Open opens (creating if needed) the database at url and migrates it to the
// latest schema this binary knows. url is a SQLite file path, "sqlite:PATH",
// or a "postgres://" / "postgresql://" URL.
//
// Open never overwrites anything: a file that is not a SQLite database is
// ErrCorrupt, a database whose schema is newer than this binary's is
// ErrNewerSchema, and a database another process holds locked past the busy
// timeout is ErrLocked; in each case nothing is changed.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if opts.MigrateTo < 0 || opts.MigrateTo > LatestSchemaVersion() {
		return nil, fmt.Errorf("open store: MigrateTo %d: this binary knows schema versions 1 to %d", opts.MigrateTo, LatestSchemaVersion())
	}
	d, target, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	var db *sql.DB
	var pgcfg *pgx.ConnConfig
	switch d {
	case SQLite:
		db, err = openSQLite(ctx, target, opts.BusyTimeout)
	case Postgres:
		db, pgcfg, err = openPostgres(ctx, target, opts.BusyTimeout)
	}
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, dialect: d, clock: opts.Clock, busy: opts.BusyTimeout, evCh: make(chan struct{}), pgcfg: pgcfg}
	if err := s.migrate(ctx, opts.MigrateTo); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", describe(d, target), err)
	}
	if d == SQLite {
		// After the migrations: a statement prepared before a schema
		// change would be compiled again at its first use anyway.
		s.stmts = newStmts(db)
		s.wal = startCheckpoints(db, opts.CheckpointEvery)
	}
	return s, nil
}

// DB returns the database handle, so the runtime can give the same SQLite
// connection pool to the durable engine (two pools on one SQLite file would
// only fight over its lock).
func (s *Store) DB() *sql.DB { return s.db }

// Dialect tells which database this is.
func (s *Store) Dialect() Dialect { return s.dialect }

// Close stops the event listener, if one was started, and closes the
// database handle.
func (s *Store) Close() error {
	s.listen.stop()
	s.wal.stop()
	s.stmts.close()
	return s.db.Close()
}

// now is the clock's time at the precision kept in the database.
func (s *Store) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// tx runs fn in one transaction, committed if fn returns nil. On SQLite the
// transaction takes the write lock at BEGIN (_txlock=immediate), so a
// read-then-write inside fn cannot be overtaken by another writer; on
// Postgres the read that must not be overtaken locks its row (forUpdate).
func (s *Store) tx(ctx context.Context, fn func(q querier) error) error {
	// Postgres may abort a transaction to break a deadlock or a
	// serialization conflict; its work was rolled back, so it is run
	// again (a few times: such aborts are rare and brief). A lock wait that
	// ran out is run again twice: the lock's holder may be a worker cut off
	// from the database, whose session the server ends within
	// pgdial.IdleInTransaction (10 s; two default waits are 10 s).
	for attempt := 1; ; attempt++ {
		err := s.tx1(ctx, fn)
		if s.dialect != Postgres || ctx.Err() != nil {
			return err
		}
		switch retryable(err) {
		case conflict:
			if attempt < 4 {
				continue
			}
		case lockWait:
			if attempt < 3 {
				continue
			}
		}
		return err
	}
}

type abort int

const (
	final    abort = iota // not to be run again
	conflict              // aborted to resolve a conflict
	lockWait              // a lock wait ran out, or the session was ended idle in it
)

// retryable says whether a Postgres error aborted the transaction with
// nothing committed, so that running it again is safe, and why:
// deadlock_detected and serialization_failure (conflict); lock_not_available
// (lock_timeout) and idle_in_transaction_session_timeout, the server ending
// this session while it sat in the transaction (lockWait).
func retryable(err error) abort {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return final
	}
	switch pe.Code {
	case "40P01", "40001":
		return conflict
	case "55P03", "25P03":
		return lockWait
	}
	return final
}

func (s *Store) tx1(ctx context.Context, fn func(q querier) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return classify(s.dialect, s.busy, err)
	}
	var events bool
	if err := fn(querier{d: s.dialect, x: tx, events: &events, c: s.stmts}); err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return classify(s.dialect, s.busy, err)
	}
	if err := tx.Commit(); err != nil {
		return classify(s.dialect, s.busy, fmt.Errorf("commit: %w", err))
	}
	s.wal.committed()
	if events {
		s.eventsCommitted()
	}
	return nil
}

// q runs single statements outside a transaction.
func (s *Store) q() querier { return querier{d: s.dialect, x: s.db, c: s.stmts} }
