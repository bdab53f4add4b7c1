package clock

import (
	"sync"
	"time"
)

// Instant is a clock whose timers fire at once, moving its time forward by
// each timer's duration and recording it. Given to a retry policy it makes
// backoff free and observable. It cannot time stalls (a stall timer would
// fire at once).
type Instant struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

// NewInstant returns an Instant clock.
func NewInstant() *Instant { return &Instant{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Instant) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc records d, moves the time by d and runs f in its own goroutine.
func (c *Instant) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	go f()
	return fired{}
}

// Waits returns the durations of the timers armed so far.
func (c *Instant) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

type fired struct{}

func (fired) Stop() bool { return false }

// Armed is a Fake clock that announces the duration of every timer it arms
// on Armed, for tests that must know which timer the code is waiting on
// before they move time (WaitPending only counts them).
type Armed struct {
	*Fake
	Armed chan time.Duration
}

// NewArmed returns an Armed clock with room for 256 announcements.
func NewArmed() *Armed {
	return &Armed{Fake: NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), Armed: make(chan time.Duration, 256)}
}

// AfterFunc arms a timer on the fake clock and announces it.
func (c *Armed) AfterFunc(d time.Duration, f func()) Timer {
	t := c.Fake.AfterFunc(d, f)
	c.Armed <- d
	return t
}
