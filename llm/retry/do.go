package retry

import (
	"context"
	"fmt"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// Outcome is what one attempt saw, for its llm.Attempt report.
type Outcome struct {
	// Status is the response's HTTP status; 0 when none arrived.
	Status    int
	RequestID string
	// Streamed reports that the attempt passed deltas to the caller's
	// stream callback.
	Streamed bool
}

// Call is one attempt. It gets a context that ends when the attempt stalls
// (Policy.StallTimeout) and a Watchdog to feed with the response's bytes.
type Call func(ctx context.Context, w *Watchdog) (Outcome, error)

// Do runs call until it succeeds, fails in a way not worth retrying, or the
// policy is spent, reporting every attempt to the observers of ctx
// (llm.ReportAttempt). provider and model label the reports and errors.
//
// The error returned is the last attempt's, so errors.As finds an
// *llm.APIError in it; after retries it says how many attempts were made.
func (p Policy) Do(ctx context.Context, provider, model string, call Call) error {
	clk := p.clock()
	limit := p.maxAttempts()
	var waited time.Duration
	for n := 1; ; n++ {
		actx, w := StartWatchdog(ctx, clk, p.StallTimeout)
		start := clk.Now()
		out, err := call(actx, w)
		stalled := w.Stop()
		a := llm.Attempt{
			Provider: provider, Model: model, N: n,
			Status: out.Status, RequestID: out.RequestID,
			Latency: clk.Now().Sub(start),
		}
		if err == nil {
			llm.ReportAttempt(ctx, a)
			return nil
		}
		if stalled && ctx.Err() == nil {
			err = Transient(ReasonTimeout, fmt.Errorf("%s: no response data for %s", provider, p.StallTimeout))
		}
		a.Err, a.Error = err, err.Error()
		if cerr := ctx.Err(); cerr != nil {
			a.Reason = ReasonFatal
			llm.ReportAttempt(ctx, a)
			return fmt.Errorf("%s: %w", provider, context.Cause(ctx))
		}
		v := Classify(err)
		a.Reason = v.Reason
		wait, why := p.next(n, limit, v, waited)
		if why == "" {
			a.Retry, a.Wait, a.Discarded = true, wait, out.Streamed
		}
		llm.ReportAttempt(ctx, a)
		if why != "" {
			if n > 1 || v.Retry {
				return fmt.Errorf("%w (%s)", err, why)
			}
			return err
		}
		if err := sleep(ctx, clk, wait); err != nil {
			return fmt.Errorf("%s: %w", provider, context.Cause(ctx))
		}
		waited += wait
	}
}

// next decides the wait before attempt n+1, or says in why that there is
// none.
func (p *Policy) next(n, limit int, v Verdict, waited time.Duration) (wait time.Duration, why string) {
	if !v.Retry {
		if n > 1 {
			return 0, fmt.Sprintf("not retried; %d attempts made", n)
		}
		return 0, "not retried"
	}
	if n >= limit {
		return 0, fmt.Sprintf("gave up after %d attempts", n)
	}
	if v.HasAfter {
		if p.MaxRetryAfter > 0 && v.After > p.MaxRetryAfter {
			return 0, fmt.Sprintf("server asked to wait %s, more than the %s deputy waits; %d attempts made", v.After, p.MaxRetryAfter, n)
		}
		wait = v.After
	} else {
		wait = p.backoff(n)
	}
	if p.Budget > 0 && waited+wait > p.Budget {
		return 0, fmt.Sprintf("retry budget of %s spent after %d attempts", p.Budget, n)
	}
	return wait, ""
}

// sleep waits d on clk, or until ctx ends.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	done := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}
