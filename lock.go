package deputy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/deputy-run/deputy/store"
)

// ErrBusy is in Open's error (and LockEngine's) when another process runs
// instances on the database alone.
var ErrBusy = errors.New("another deputy process is running instances on this database")

// engineLockKey is the Postgres advisory lock id of a database's engine.
const engineLockKey = 0x64657075747931 // "deputy1"

// LockEngine holds the database st for this process's engine, as Open does
// for a runtime that is no worker of a fleet, and returns how to let it go;
// ErrBusy when another process holds it. The CLI's controls probe with it
// whether a process is at work on the database.
//
// Why one process: DBOS recovers, at launch, every pending run of its
// executor id, and all processes alone on a database share one ("local"):
// a second engine would take over the first one's live runs. Workers of a
// fleet (Options.Fleet, on Postgres) hold leases of their own instead.
// SQLite: an flock on DB.engine.lock, released by the kernel when the
// process dies. Postgres: a session advisory lock, released when the
// connection closes. url is what st was opened with.
func LockEngine(ctx context.Context, st *store.Store, url string) (release func(), err error) {
	if st.Dialect() == store.Postgres {
		conn, err := st.DB().Conn(ctx)
		if err != nil {
			return nil, fmt.Errorf("engine lock: %w", err)
		}
		var ok bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", engineLockKey).Scan(&ok); err != nil {
			conn.Close()
			return nil, fmt.Errorf("engine lock: %w", err)
		}
		if !ok {
			conn.Close()
			return nil, ErrBusy
		}
		return func() {
			_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", engineLockKey)
			conn.Close()
		}, nil
	}
	path, ok := store.SQLitePath(url)
	if !ok {
		return nil, fmt.Errorf("engine lock: %q is neither a SQLite file nor the Postgres database the store is on", url)
	}
	path += ".engine.lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("engine lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrBusy
		}
		return nil, fmt.Errorf("engine lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
