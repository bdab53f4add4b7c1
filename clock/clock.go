// Package clock is deputy's injectable time source. Production code takes a
// Clock; tests pass a *Fake and move time with Advance, so timeouts, budgets
// and leases are tested without sleeping.
package clock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Clock tells the time and schedules callbacks.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a scheduled callback.
type Timer interface {
	// Stop prevents the callback from running; it reports whether it did.
	Stop() bool
}

// Real is the system clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a clock that moves only when told to. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed *sync.Cond // broadcast whenever timers change; see WaitPending
}

// cond returns the condition variable, creating it on first use so the zero
// Fake works. c.mu must be held.
func (c *Fake) cond() *sync.Cond {
	if c.changed == nil {
		c.changed = sync.NewCond(&c.mu)
	}
	return c.changed
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f for when the fake time reaches Now()+d. A
// non-positive d fires at the next Advance (even by zero).
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.cond().Broadcast()
	return t
}

// Advance moves the clock forward by d and fires every timer that came due.
// The callbacks run concurrently, each in its own goroutine like
// time.AfterFunc, so no order among them is promised; Advance waits for all
// of them to return so a test sees their effects. A timer armed by a
// callback fires at a later Advance, even if it is already due.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, keep []*fakeTimer
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.cond().Broadcast()
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range due {
		wg.Add(1)
		go func() { defer wg.Done(); t.f() }()
	}
	wg.Wait()
}

// Pending returns how many timers are scheduled; tests use it to wait until
// the code under test has armed its timer before advancing.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitPending blocks until at least n timers are armed, or ctx ends. Tests
// call it before Advance so they move time only once the code under test is
// waiting on it, without spinning.
func (c *Fake) WaitPending(ctx context.Context, n int) error {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond().Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.cond().Wait()
	}
	return nil
}

type fakeTimer struct {
	c  *Fake
	at time.Time
	f  func()
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, o := range t.c.timers {
		if o == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			t.c.cond().Broadcast()
			return true
		}
	}
	return false
}

// Sleep waits for d on c, or until ctx ends (returning its error). A
// non-positive d returns at once.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	done := make(chan struct{})
	t := c.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrTimeout is the cancellation cause of a context from WithTimeout whose
// time ran out.
var ErrTimeout = errors.New("timed out")

// WithTimeout is context.WithTimeout on c: the returned context is cancelled
// with cause (ErrTimeout when cause is nil) once d has passed on c. Tell a
// timeout from a cancellation with context.Cause.
func WithTimeout(ctx context.Context, c Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	if cause == nil {
		cause = ErrTimeout
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := c.AfterFunc(d, func() { cancel(cause) })
	return ctx, func() { t.Stop(); cancel(context.Canceled) }
}
