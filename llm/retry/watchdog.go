package retry

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// ErrStalled is the cause of an attempt context the watchdog cancelled.
var ErrStalled = errors.New("response stalled")

// Watchdog cancels an attempt whose response stops arriving. The provider
// calls Kick when the response headers arrive and wraps the body with Body,
// which kicks on every read; when nothing happened for the timeout, the
// attempt's context is cancelled with ErrStalled.
//
// One timer serves the whole attempt: it is re-armed only when it fires
// early (activity since it was armed), not on every read.
type Watchdog struct {
	clk     clock.Clock
	d       time.Duration
	cancel  context.CancelCauseFunc
	mu      sync.Mutex
	last    time.Time
	timer   clock.Timer
	done    bool
	stalled bool
}

// StartWatchdog returns the attempt's context and its watchdog. A
// non-positive d disables stall detection; the context is still the
// attempt's own, cancelled by Stop.
func StartWatchdog(ctx context.Context, clk clock.Clock, d time.Duration) (context.Context, *Watchdog) {
	actx, cancel := context.WithCancelCause(ctx)
	w := &Watchdog{clk: clk, d: d, cancel: cancel}
	if d > 0 {
		w.last = clk.Now()
		w.mu.Lock()
		w.timer = clk.AfterFunc(d, w.fire)
		w.mu.Unlock()
	}
	return actx, w
}

// Kick records activity: bytes of the response arrived.
func (w *Watchdog) Kick() {
	if w == nil || w.d <= 0 {
		return
	}
	now := w.clk.Now()
	w.mu.Lock()
	w.last = now
	w.mu.Unlock()
}

func (w *Watchdog) fire() {
	now := w.clk.Now()
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	if idle := now.Sub(w.last); idle < w.d {
		w.timer = w.clk.AfterFunc(w.d-idle, w.fire)
		w.mu.Unlock()
		return
	}
	w.stalled, w.done = true, true
	w.mu.Unlock()
	w.cancel(ErrStalled)
}

// Stop ends the watch, cancels the attempt's context (the attempt is over)
// and reports whether the watchdog had fired.
func (w *Watchdog) Stop() (stalled bool) {
	w.mu.Lock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	stalled = w.stalled
	w.mu.Unlock()
	w.cancel(nil)
	return stalled
}

// Body wraps a response body so each read that returns bytes kicks the
// watchdog.
func (w *Watchdog) Body(rc io.ReadCloser) io.ReadCloser {
	if w == nil || w.d <= 0 || rc == nil {
		return rc
	}
	return &watchedBody{rc: rc, w: w}
}

type watchedBody struct {
	rc io.ReadCloser
	w  *Watchdog
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.w.Kick()
	}
	return n, err
}

func (b *watchedBody) Close() error { return b.rc.Close() }
