package retry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

func observe(ctx context.Context) (context.Context, func() []llm.Attempt) {
	var mu sync.Mutex
	var got []llm.Attempt
	ctx = llm.WithAttemptObserver(ctx, func(a llm.Attempt) {
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
	})
	return ctx, func() []llm.Attempt {
		mu.Lock()
		defer mu.Unlock()
		return append([]llm.Attempt(nil), got...)
	}
}

func apiErr(status int, typ string) *llm.APIError {
	return &llm.APIError{Provider: "test", StatusCode: status, Type: typ, Message: "boom"}
}

// script returns a Call that fails with errs in turn, then succeeds.
func script(errs ...error) Call {
	var mu sync.Mutex
	n := 0
	return func(ctx context.Context, w *Watchdog) (Outcome, error) {
		mu.Lock()
		defer mu.Unlock()
		if n < len(errs) {
			n++
			var ae *llm.APIError
			if errors.As(errs[n-1], &ae) {
				return Outcome{Status: ae.StatusCode, RequestID: "req_" + string(rune('0'+n))}, errs[n-1]
			}
			return Outcome{}, errs[n-1]
		}
		return Outcome{Status: 200, RequestID: "req_ok"}, nil
	}
}

func testPolicy(c clock.Clock) Policy {
	p := Default()
	p.Clock = c
	p.BaseDelay = 100 * time.Millisecond
	p.MaxDelay = time.Second
	p.StallTimeout = 0
	p.Rand = func() float64 { return 0 } // no jitter: exact waits
	return p
}

func TestDoRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	clk := clock.NewInstant()
	ctx, attempts := observe(context.Background())
	err := testPolicy(clk).Do(ctx, "test", "m", script(apiErr(529, "overloaded_error"), apiErr(500, "api_error")))
	if err != nil {
		t.Fatal(err)
	}
	got := attempts()
	if len(got) != 3 {
		t.Fatalf("%d attempts, want 3: %+v", len(got), got)
	}
	want := []struct {
		status int
		reason string
		retry  bool
		wait   time.Duration
	}{{529, ReasonOverloaded, true, 100 * time.Millisecond}, {500, ReasonServerError, true, 200 * time.Millisecond}, {200, "", false, 0}}
	for i, w := range want {
		a := got[i]
		if a.N != i+1 || a.Status != w.status || a.Reason != w.reason || a.Retry != w.retry || a.Wait != w.wait || a.Provider != "test" || a.Model != "m" {
			t.Errorf("attempt %d = %+v, want %+v", i+1, a, w)
		}
		if (a.Err == nil) != (i == 2) || (a.Error == "") != (i == 2) {
			t.Errorf("attempt %d error = %v / %q", i+1, a.Err, a.Error)
		}
	}
	if len(clk.Waits()) != 2 || clk.Waits()[0] != 100*time.Millisecond || clk.Waits()[1] != 200*time.Millisecond {
		t.Errorf("clock waits %v", clk.Waits())
	}
}

func TestDoHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	clk := clock.NewInstant()
	ctx, attempts := observe(context.Background())
	e := apiErr(429, "rate_limit_error")
	e.RetryAfter = 3 * time.Second
	if err := testPolicy(clk).Do(ctx, "test", "m", script(e)); err != nil {
		t.Fatal(err)
	}
	if got := attempts(); got[0].Wait != 3*time.Second || got[0].Reason != ReasonRateLimit {
		t.Errorf("first attempt %+v", got[0])
	}
	if len(clk.Waits()) != 1 || clk.Waits()[0] != 3*time.Second {
		t.Errorf("waits %v", clk.Waits())
	}
}

func TestDoGivesUp(t *testing.T) {
	t.Parallel()
	p := testPolicy(clock.NewInstant())
	p.MaxAttempts = 3
	ctx, attempts := observe(context.Background())
	errs := []error{apiErr(500, "api_error"), apiErr(500, "api_error"), apiErr(500, "api_error"), apiErr(500, "api_error")}
	err := p.Do(ctx, "test", "m", script(errs...))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 500 {
		t.Fatalf("err %v does not wrap the API error", err)
	}
	if !strings.Contains(err.Error(), "gave up after 3 attempts") || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %q", err)
	}
	got := attempts()
	if len(got) != 3 || got[2].Retry || !got[1].Retry {
		t.Errorf("attempts %+v", got)
	}
}

func TestDoDoesNotRetryFatal(t *testing.T) {
	t.Parallel()
	ctx, attempts := observe(context.Background())
	e := apiErr(401, "authentication_error")
	err := testPolicy(clock.NewInstant()).Do(ctx, "test", "m", script(e))
	if err != e {
		t.Errorf("err = %v, want the attempt's own error unchanged", err)
	}
	if got := attempts(); len(got) != 1 || got[0].Retry || got[0].Reason != ReasonFatal || got[0].Status != 401 {
		t.Errorf("attempts %+v", got)
	}
}

func TestDoRefusesLongRetryAfter(t *testing.T) {
	t.Parallel()
	p := testPolicy(clock.NewInstant())
	p.MaxRetryAfter = time.Minute
	e := apiErr(429, "rate_limit_error")
	e.RetryAfter = time.Hour
	err := p.Do(context.Background(), "test", "m", script(e))
	if err == nil || !strings.Contains(err.Error(), "server asked to wait 1h0m0s") {
		t.Errorf("err = %v", err)
	}
}

func TestDoBudget(t *testing.T) {
	t.Parallel()
	clk := clock.NewInstant()
	p := testPolicy(clk)
	p.Budget = 250 * time.Millisecond
	errs := []error{apiErr(500, "api_error"), apiErr(500, "api_error"), apiErr(500, "api_error")}
	err := p.Do(context.Background(), "test", "m", script(errs...))
	if err == nil || !strings.Contains(err.Error(), "retry budget of 250ms spent after 2 attempts") {
		t.Errorf("err = %v", err)
	}
	if len(clk.Waits()) != 1 {
		t.Errorf("waits %v", clk.Waits())
	}
}

func TestDoCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	clk := clock.NewArmed()
	p := testPolicy(clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Do(ctx, "test", "m", script(apiErr(529, "overloaded_error"))) }()
	if d := <-clk.Armed; d != 100*time.Millisecond {
		t.Errorf("armed %v", d)
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if clk.Pending() != 0 {
		t.Errorf("%d timers left armed", clk.Pending())
	}
}

func TestDoMarksDiscardedStream(t *testing.T) {
	t.Parallel()
	ctx, attempts := observe(context.Background())
	n := 0
	call := func(ctx context.Context, w *Watchdog) (Outcome, error) {
		n++
		if n == 1 {
			return Outcome{Status: 200, Streamed: true}, Transient(ReasonStreamCut, errors.New("cut"))
		}
		return Outcome{Status: 200, Streamed: true}, nil
	}
	if err := testPolicy(clock.NewInstant()).Do(ctx, "test", "m", call); err != nil {
		t.Fatal(err)
	}
	got := attempts()
	if !got[0].Discarded || got[0].Reason != ReasonStreamCut || got[1].Discarded {
		t.Errorf("attempts %+v", got)
	}
}

func TestDoStallTimeout(t *testing.T) {
	t.Parallel()
	clk := clock.NewArmed()
	p := testPolicy(clk)
	p.StallTimeout = 10 * time.Second
	p.BaseDelay = 0 // retry at once: only the watchdog's timers are armed
	ctx, attempts := observe(context.Background())
	kicked := make(chan struct{})
	calls := 0
	call := func(actx context.Context, w *Watchdog) (Outcome, error) {
		calls++
		if calls > 1 {
			return Outcome{Status: 200}, nil
		}
		// Headers arrive at 5s; then nothing.
		kicked <- struct{}{}
		<-kicked
		w.Kick()
		kicked <- struct{}{}
		<-actx.Done()
		return Outcome{Status: 200}, actx.Err()
	}
	done := make(chan error)
	go func() { done <- p.Do(ctx, "test", "m", call) }()
	<-clk.Armed // the watchdog
	<-kicked
	clk.Advance(5 * time.Second)
	kicked <- struct{}{}
	<-kicked
	clk.Advance(5 * time.Second) // fires early: 5s idle, re-arms for 5s
	if d := <-clk.Armed; d != 5*time.Second {
		t.Errorf("re-armed for %v, want 5s", d)
	}
	clk.Advance(5 * time.Second) // 10s idle: stalled
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := attempts()
	if len(got) != 2 || got[0].Reason != ReasonTimeout || !got[0].Retry || got[0].Latency != 15*time.Second {
		t.Errorf("attempts %+v", got)
	}
	if !strings.Contains(got[0].Error, "no response data for 10s") {
		t.Errorf("error %q", got[0].Error)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	p := Policy{BaseDelay: time.Second, MaxDelay: 5 * time.Second, Jitter: 0.5, Rand: func() float64 { return 0 }}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := p.backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
	p.Rand = func() float64 { return 0.999999 }
	if got := p.backoff(2); got <= time.Second || got > 1001*time.Millisecond {
		t.Errorf("jittered backoff(2) = %v, want just over 1s", got)
	}
	if got := (&Policy{}).backoff(3); got != 0 {
		t.Errorf("zero policy backoff = %v", got)
	}
	// Doubling stops at the cap, so huge retry counts cannot overflow.
	if got := (&Policy{BaseDelay: time.Second, MaxDelay: time.Minute}).backoff(500); got != time.Minute {
		t.Errorf("backoff(500) = %v", got)
	}
}
