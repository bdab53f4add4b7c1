package fake

import (
	"context"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// hangGuard bounds how long a test waits for the code under test to reach
// a fake-clock wait. It is a deadlock guard, never a delay: every wait
// below returns as soon as its condition holds.
const hangGuard = 30 * time.Second

// guardCtx is a context that ends after hangGuard, for waits that must not
// hang a broken test forever.
func guardCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// waitTimers blocks until the fake clock has at least n armed timers: the
// code under test, running in another goroutine, has reached its wait.
func waitTimers(t testing.TB, c *clock.Fake, n int) {
	t.Helper()
	if err := c.WaitPending(guardCtx(t), n); err != nil {
		t.Fatalf("waiting for %d armed timers (have %d): %v", n, c.Pending(), err)
	}
}

// driveClock advances c by step each time the code under test arms a
// timer, until done is closed, and returns how far the clock moved. It
// blocks on WaitPending between steps rather than polling.
func driveClock(t testing.TB, c *clock.Fake, step time.Duration, done <-chan struct{}) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	// The wait below must also end when the code under test finishes
	// without arming another timer.
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	var moved time.Duration
	for {
		err := c.WaitPending(ctx, 1)
		select {
		case <-done:
			return moved
		default:
		}
		if err != nil {
			t.Fatalf("after moving the clock %v, the code under test neither finished nor armed a timer: %v", moved, err)
		}
		c.Advance(step)
		moved += step
	}
}
