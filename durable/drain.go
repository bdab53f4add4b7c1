package durable

// Every engine drains when it closes, alone on SQLite as much as a worker
// of a fleet on Postgres: no step starts any more, the steps running
// finish (their outcomes checkpointed) within the drain's bound, and only
// then does DBOS's shutdown cancel what is left. Without the drain, DBOS's
// shutdown cancels every run at once, so a tool call cut mid-way (a bash
// that had started, say) is reported to the model as interrupted by the
// next execution, though it would have finished in a moment.
//
// The gate is what steps pass to start (during, in steps.go). A worker of
// a fleet also holds its steps back while its lease may be running out
// (lease.go): the lease moves the gate's horizon (extend) and closes it
// for good when lost (lose).

import (
	"context"
	"sync"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// DefaultDrain bounds Close's wait for the running steps when the caller
// has no bound of its own to give (the CLI's --drain-timeout default):
// long enough for a typical tool call to finish, short enough to fit the
// grace period of a service manager (systemd's 90 s, Kubernetes' 30 s).
const DefaultDrain = 10 * time.Second

// gate admits steps and counts those running.
type gate struct {
	clock clock.Clock // the engine's: the lease's horizon is on it

	mu       sync.Mutex
	leased   bool          // a worker of a fleet (extend): steps start only before valid
	valid    time.Time     // set by the lease (extend)
	lost     error         // the lease was lost: set once, never cleared
	draining bool          // set once: no step starts again
	inflight int           // steps started and not yet done
	moved    chan struct{} // closed and replaced when valid, lost, draining or inflight change
}

func newGate(clk clock.Clock) *gate { return &gate{clock: clk, moved: make(chan struct{})} }

// admit waits until a step may start: at once on an engine alone, and on
// a worker of a fleet while its lease is fresh (after the next renewal
// when one is late). Once the engine drains, or its lease is lost, it
// waits until ctx ends (the engine's shutdown), so the step fails as at
// any shutdown and its run stays pending for the next execution. A step
// admitted must call stepDone.
func (g *gate) admit(ctx context.Context) error {
	for {
		g.mu.Lock()
		if g.lost == nil && !g.draining && (!g.leased || g.clock.Now().Before(g.valid)) {
			g.inflight++
			g.mu.Unlock()
			return nil
		}
		moved := g.moved
		if g.lost != nil || g.draining {
			moved = nil // for this step, nothing changes any more
		}
		g.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			// context.Canceled, as a step cut off by a shutdown fails:
			// the run then stops without recording an end.
			return ctx.Err()
		}
	}
}

func (g *gate) stepDone() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	g.changed()
}

// park takes a step that waits out of the steps a drain waits for, until
// the returned function puts it back: a step waiting for children or mail
// does no work meanwhile, and what it waits for may never come while the
// engine drains.
func (g *gate) park() (unpark func()) {
	g.stepDone()
	return func() {
		g.mu.Lock()
		g.inflight++
		g.mu.Unlock()
	}
}

// extend moves the time steps may start until: a lease taken or renewed.
// From the first, steps start only before it.
func (g *gate) extend(valid time.Time) { g.unlessLost(func() { g.leased, g.valid = true, valid }) }

// lose closes the gate for good; it reports whether this call did.
func (g *gate) lose(err error) bool { return g.unlessLost(func() { g.lost = err }) }

// unlessLost makes the change set makes and wakes the waiters, unless the
// lease was lost: then nothing moves any more. It reports whether it did.
func (g *gate) unlessLost(set func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lost != nil {
		return false
	}
	set()
	g.changed()
	return true
}

// changed wakes whoever waits on moved; g.mu is held.
func (g *gate) changed() {
	close(g.moved)
	g.moved = make(chan struct{})
}

// drain stops steps starting and waits for those running to finish, until
// timeout has passed on clk or cut ends (a second signal: stop now); it
// reports whether they all finished. The timeout's timer is armed once no
// step can start any more: whoever sees it armed (a test's clock) knows
// the gate is closed.
func (g *gate) drain(clk clock.Clock, timeout time.Duration, cut <-chan struct{}) bool {
	g.mu.Lock()
	g.draining = true
	g.changed()
	g.mu.Unlock()
	expired := make(chan struct{})
	t := clk.AfterFunc(timeout, func() { close(expired) })
	defer t.Stop()
	for {
		g.mu.Lock()
		n, moved := g.inflight, g.moved
		g.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-moved:
		case <-expired:
			return false
		case <-cut:
			return false
		}
	}
}

// running is the steps running now.
func (g *gate) running() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inflight
}
