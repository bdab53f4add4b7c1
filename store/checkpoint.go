package store

import (
	"context"
	"database/sql"
	"sync/atomic"
)

// DefaultCheckpointEvery is Options.CheckpointEvery when unset: a few
// hundred commits of a turn's size keep the WAL to a few megabytes.
const DefaultCheckpointEvery = 256

// checkpoint runs SQLite's WAL checkpoints in a goroutine of its own, every
// so many of the store's commits, instead of in whichever commit crosses
// SQLite's threshold (wal_autocheckpoint, turned off in openSQLite): a
// checkpoint copies the WAL's pages into the database and syncs it, and
// the turn whose commit paid for that waited for it. PASSIVE: it never
// waits for readers or writers, and does what they leave it.
type checkpoint struct {
	db     *sql.DB
	every  int64
	n      atomic.Int64
	runs   atomic.Int64  // checkpoints run, for tests
	ran    chan struct{} // told of each checkpoint run, if nobody was told of the last yet (tests)
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func startCheckpoints(db *sql.DB, every int) *checkpoint {
	if every <= 0 {
		every = DefaultCheckpointEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpoint{db: db, every: int64(every), kick: make(chan struct{}, 1), ran: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go c.loop(ctx)
	return c
}

// committed counts a commit; every c.every, it wakes the checkpointer
// (never waiting for it).
func (c *checkpoint) committed() {
	if c == nil || c.n.Add(1)%c.every != 0 {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default: // one is due already
	}
}

func (c *checkpoint) loop(ctx context.Context) {
	defer close(c.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
			// A failed checkpoint (busy) leaves the WAL to the next one.
			_, _ = c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
			c.runs.Add(1)
			select {
			case c.ran <- struct{}{}:
			default:
			}
		}
	}
}

// stop ends the checkpointer (a checkpoint under way is cut short: the
// database's last connection checkpoints as it closes).
func (c *checkpoint) stop() {
	if c == nil {
		return
	}
	c.cancel()
	<-c.done
}
