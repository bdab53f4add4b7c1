package store

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// eventsChannel is the Postgres notification channel on which every commit
// of events is announced: a statement trigger on deputy_events (migration
// 4) notifies it, so the announcement costs no round trip and is
// delivered when, and only if, the transaction commits. Notifications of
// one transaction are folded into one by the server.
const eventsChannel = "deputy_events"

// listener follows eventsChannel on a connection of its own, so that
// EventsWritten wakes for other processes' events too: a dashboard on one
// machine sees a child running on another at once, not at its next poll.
// It is started by the first EventsWritten (a worker that follows no feed
// holds no extra connection) and stopped by Close.
type listener struct {
	once   sync.Once
	mu     sync.Mutex
	cancel context.CancelFunc // nil until started; stop sets it to a no-op
	done   chan struct{}
}

// listenRetry is how long the listener waits before connecting again after
// losing its connection; waiters fall back to their own polls meanwhile.
const listenRetry = time.Second

func (l *listener) start(s *Store) {
	l.once.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.cancel != nil {
			return // stopped before it started
		}
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel, l.done = cancel, make(chan struct{})
		go func() {
			defer close(l.done)
			for {
				s.follow(ctx)
				select {
				case <-ctx.Done():
					return
				case <-time.After(listenRetry):
				}
			}
		}()
	})
}

func (l *listener) stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = func() {}
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if done != nil {
		<-done
	}
}

// follow listens until ctx ends or the connection fails, waking the
// waiters at each notification, and once on (re)connecting: what was
// committed while it was not listening is read by their next read.
func (s *Store) follow(ctx context.Context) {
	conn, err := pgx.ConnectConfig(ctx, s.pgcfg.Copy())
	if err != nil {
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return
	}
	s.eventsCommitted()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return
		}
		s.eventsCommitted()
	}
}
