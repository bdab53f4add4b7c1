package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"

	"github.com/deputy-run/deputy/store"
)

// engineLockKey is the Postgres advisory lock id of a database's engine.
const engineLockKey = 0x64657075747931 // "deputy1"

// lockEngine lets one process at a time run instances on a database.
// DBOS recovers, at launch, every pending run of its executor id, and all
// deputy processes on one database share one until workers hold leases of
// their own (the scale-out issue): a second engine would take over the
// first one's live runs. SQLite: an flock on DB.engine.lock, released by
// the kernel when the process dies. Postgres: a session advisory lock,
// released when the connection closes. `deputy run --detach` needs no
// engine, so it never waits on this.
func lockEngine(ctx context.Context, st *store.Store, url string) (release func(), err error) {
	busy := func() error {
		return usageErr("another deputy process (a run or a worker) is running instances on %s; wait for it to end, "+
			"or queue this run with --detach for the worker", dbName(url))
	}
	if st.Dialect() == store.Postgres {
		conn, err := st.DB().Conn(ctx)
		if err != nil {
			return nil, usageErr("database %s: %v", dbName(url), err)
		}
		var ok bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", engineLockKey).Scan(&ok); err != nil {
			conn.Close()
			return nil, usageErr("database %s: %v", dbName(url), err)
		}
		if !ok {
			conn.Close()
			return nil, busy()
		}
		return func() {
			_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", engineLockKey)
			conn.Close()
		}, nil
	}
	path := strings.TrimPrefix(url, "sqlite:") + ".engine.lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, usageErr("engine lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, busy()
		}
		return nil, usageErr("engine lock %s: %v", path, err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
