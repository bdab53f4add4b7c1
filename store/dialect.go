package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/deputy-run/deputy/internal/pgdial"
	"modernc.org/sqlite" // registers database/sql driver "sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Dialect names the database behind a Store.
type Dialect string

// The dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// parseURL tells the dialect of url and returns what its driver opens: the
// file path for SQLite, the URL itself for Postgres.
func parseURL(raw string) (Dialect, string, error) {
	switch {
	case raw == "":
		return "", "", errors.New("open store: empty database URL: give a SQLite file path or a postgres:// URL")
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		return Postgres, raw, nil
	}
	path := raw
	if p, ok := strings.CutPrefix(path, "sqlite://"); ok {
		path = p
	} else if p, ok := strings.CutPrefix(path, "sqlite:"); ok {
		path = p
	}
	switch {
	case path == "":
		return "", "", fmt.Errorf("open store: %q names no SQLite file", raw)
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		// An in-memory database is one per connection of the pool, and a
		// file: URI would let its query override the pragmas set below.
		return "", "", fmt.Errorf("open store: %q: give a SQLite file path (in-memory databases and file: URIs are not supported)", raw)
	case strings.ContainsAny(path, "?#"):
		return "", "", fmt.Errorf("open store: SQLite path %q contains '?' or '#', which the driver would read as options", path)
	}
	return SQLite, path, nil
}

// SQLitePath returns the file a SQLite database URL names (a path,
// sqlite:PATH or sqlite://PATH); ok is false for a Postgres URL or a URL
// that names no file.
func SQLitePath(url string) (path string, ok bool) {
	d, p, err := parseURL(url)
	return p, err == nil && d == SQLite
}

// describe names the database in errors without leaking a password.
func describe(d Dialect, target string) string {
	if d == Postgres {
		if u, err := url.Parse(target); err == nil {
			return u.Redacted()
		}
		return "postgres database"
	}
	return target
}

// sqliteMaxConns matches the pool size DBOS opens for itself on SQLite, so
// handing it this pool changes nothing for it.
const sqliteMaxConns = 8

// pgMaxIdleConns is how many Postgres connections stay open between bursts.
const pgMaxIdleConns = 8

// pgMaxOpenConns caps the store's Postgres connections until the engine
// sizes the pool (SizePool). Without a cap a fan-out of 1,000 children
// opened hundreds at once, past the server's max_connections (100 by
// default), and writes failed; with it, a burst queues for a connection
// instead (measured: a 1,000-task fan-out that never finished completed
// with the pool capped at 16 to 64). The engine's own pool (DBOS) is
// separate, so this leaves the server room for it.
const pgMaxOpenConns = 32

// pgPoolMin and pgPoolMax bound SizePool's Postgres pool: the measured
// range in which the 1,000-task fan-out completed.
const pgPoolMin, pgPoolMax = 16, 64

func openSQLite(ctx context.Context, path string, busy time.Duration) (*sql.DB, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("open store %s: is a directory, not a SQLite file", path)
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("open store %s: create its directory: %w", path, err)
		}
	}
	// Every connection of the pool gets the pragmas through the DSN
	// (database/sql has no per-connection hook). WAL lets readers run beside
	// the one writer; synchronous=NORMAL is durable with WAL except for the
	// last commits on power loss, not on a process crash; _txlock=immediate
	// makes BEGIN take the write lock, so a transaction that reads then
	// writes waits its turn (busy_timeout) instead of failing on upgrade.
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy.Milliseconds(), 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// No commit checkpoints the WAL: the store's checkpointer does, in the
	// background (checkpoint.go).
	q.Add("_pragma", "wal_autocheckpoint(0)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db.SetMaxOpenConns(sqliteMaxConns)
	db.SetMaxIdleConns(sqliteMaxConns)
	// The first connection runs the pragmas: a file that is not a database
	// or a database locked by another process fails here, before any write.
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, classify(SQLite, busy, err))
	}
	return db, nil
}

func openPostgres(ctx context.Context, target string, busy time.Duration) (*sql.DB, *pgx.ConnConfig, error) {
	// lock_timeout is Postgres' busy_timeout: a statement waiting longer for
	// a lock fails (55P03, reported as ErrLocked) instead of hanging. pgx
	// sends URL parameters it does not know itself to the server as session
	// settings; a lock_timeout given in the URL wins.
	u, err := url.Parse(target)
	if err != nil {
		return nil, nil, fmt.Errorf("open store: the Postgres URL does not parse (%v)", redactParseError(err))
	}
	q := u.Query()
	if !q.Has("lock_timeout") {
		q.Set("lock_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
		u.RawQuery = q.Encode()
	}
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		return nil, nil, fmt.Errorf("open store %s: %w", describe(Postgres, target), err)
	}
	// So a worker that lost its lease can abort them, and a cut-off one's
	// locks are let go by the server (pgdial).
	pgdial.Configure(&cfg.Config)
	db := stdlib.OpenDB(*cfg)
	// database/sql keeps 2 idle connections by default; a burst of
	// concurrent writers (a fan-out finishing) would then reconnect each
	// time, at a few milliseconds a connection.
	db.SetMaxIdleConns(pgMaxIdleConns)
	db.SetMaxOpenConns(pgMaxOpenConns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("open store %s: connect: %w", describe(Postgres, target), err)
	}
	return db, cfg, nil
}

// SizePool sizes the store's connection pool for an engine that carries
// up to runs runs at once. On Postgres: one connection for every two runs
// (a run writes between model calls, rarely two at once), between
// pgPoolMin and pgPoolMax, so a small engine holds few of the server's
// connections and a large one does not queue for them. On SQLite the pool
// stays at DBOS's size (sqliteMaxConns): the database has one writer, and
// a connection more only waits for it in SQLite's busy handler, which
// sleeps, where a writer queued for a connection is handed one the moment
// it is free.
func (s *Store) SizePool(runs int) {
	if s.dialect != Postgres || runs <= 0 {
		return
	}
	n := min(max(runs/2, pgPoolMin), pgPoolMax)
	s.db.SetMaxOpenConns(n)
	s.db.SetMaxIdleConns(min(n, pgMaxIdleConns*2))
}

// redactParseError keeps a URL parse error's reason but not the URL, which
// may hold a password.
func redactParseError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// dbError marks a driver error with one of the package's sentinels, keeping
// the driver's error for errors.As.
type dbError struct {
	kind error
	msg  string
	err  error
}

func (e *dbError) Error() string        { return e.msg + ": " + e.err.Error() }
func (e *dbError) Unwrap() []error      { return []error{e.kind, e.err} }
func (e *dbError) Is(target error) bool { return target == e.kind }

// classify recognises a locked or corrupt database in a driver error.
func classify(d Dialect, busy time.Duration, err error) error {
	if err == nil {
		return nil
	}
	var de *dbError
	if errors.As(err, &de) {
		return err
	}
	switch d {
	case SQLite:
		var se *sqlite.Error
		if !errors.As(err, &se) {
			return err
		}
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return &dbError{ErrLocked, fmt.Sprintf("database is locked by another connection or process (waited %v)", busy), err}
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return &dbError{ErrCorrupt, "not a SQLite database, or a damaged one (left as it is)", err}
		}
	case Postgres:
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
			return &dbError{ErrLocked, fmt.Sprintf("database is locked by another session (waited %v)", busy), err}
		}
	}
	return err
}

// execer is what *sql.DB and *sql.Tx share.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// querier runs the package's SQL, written once with ? placeholders, in the
// dialect's own placeholder style, on the store's handle, one of its
// transactions, or a transaction a caller owns (Tx).
type querier struct {
	d Dialect
	x execer
	// events is set inside a transaction: appendEvent marks it, and the
	// store signals its event watchers once the transaction commits.
	events *bool
	// tx, when set, is a caller's transaction (On), used instead of x.
	tx Tx
	// c holds the prepared statements (SQLite; nil: none).
	c *stmts
}

func (q querier) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if q.tx != nil {
		res, err := q.tx.Exec(ctx, q.rebind(query), args...)
		if err != nil {
			return nil, err
		}
		return txResult{res}, nil
	}
	if st := q.prepared(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.x.ExecContext(ctx, q.rebind(query), args...)
}

func (q querier) query(ctx context.Context, query string, args ...any) (Rows, error) {
	if q.tx != nil {
		return q.tx.Query(ctx, q.rebind(query), args...)
	}
	if st := q.prepared(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.x.QueryContext(ctx, q.rebind(query), args...)
}

func (q querier) row(ctx context.Context, query string, args ...any) Row {
	if q.tx != nil {
		return txRow{q.tx.QueryRow(ctx, q.rebind(query), args...)}
	}
	if st := q.prepared(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.x.QueryRowContext(ctx, q.rebind(query), args...)
}

// forUpdate is the clause that locks the rows a read returns until the
// transaction ends. SQLite has none and needs none: its transactions hold
// the database's write lock from BEGIN.
func (q querier) forUpdate() string {
	if q.d == Postgres {
		return " FOR UPDATE"
	}
	return ""
}

// rebind turns ? placeholders into $1, $2... for Postgres. The package's
// queries never have a ? inside a string literal.
func (q querier) rebind(query string) string {
	if q.d != Postgres || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}
