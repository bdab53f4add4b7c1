package setup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/deputy-run/deputy/store"
)

// ErrBusy is LockEngine's answer when another process runs instances on
// the database.
var ErrBusy = errors.New("another deputy process is running instances on this database")

// engineLockKey is the Postgres advisory lock id of a database's engine.
const engineLockKey = 0x64657075747931 // "deputy1"

// LockEngine lets one process at a time run instances on a database.
// DBOS recovers, at launch, every pending run of its executor id, and all
// deputy processes on one database share one until workers hold leases of
// their own (the scale-out issue): a second engine would take over the
// first one's live runs. SQLite: an flock on DB.engine.lock, released by
// the kernel when the process dies. Postgres: a session advisory lock,
// released when the connection closes. url is what st was opened with.
func LockEngine(ctx context.Context, st *store.Store, url string) (release func(), err error) {
	if st.Dialect() == store.Postgres {
		conn, err := st.DB().Conn(ctx)
		if err != nil {
			return nil, err
		}
		var ok bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", engineLockKey).Scan(&ok); err != nil {
			conn.Close()
			return nil, err
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
	path, _ := store.SQLitePath(url) // st opened it: it is one
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
