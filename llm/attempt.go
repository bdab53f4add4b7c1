package llm

import (
	"context"
	"time"
)

// Attempt is one HTTP request a provider made while answering one
// Model.Generate call. A call that succeeds at once has one attempt; a call
// that was retried has one per try, the last one successful or final.
//
// Providers report every attempt through ReportAttempt, synchronously, from
// the goroutine running Generate: after the attempt's last Delta and before
// the next attempt's first. That ordering is how a stream consumer learns
// that a retry restarted the response (see Discarded).
type Attempt struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// N numbers the attempts of one Generate call, from 1.
	N int `json:"n"`
	// Status is the HTTP status the attempt got; 0 when no response arrived
	// (connection refused, reset, timed out before the headers). A stream
	// that failed after its 200 headers keeps 200 here; Reason says why.
	Status    int    `json:"status,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Latency runs from sending the request to the attempt's end: the whole
	// response read, or the failure.
	Latency time.Duration `json:"latency"`
	// Reason classifies a failed attempt: rate_limit, overloaded,
	// server_error, timeout, conflict, connection, stream_cut, error_event,
	// malformed_response, server_asked (x-should-retry: true), or
	// fatal for an error that is not worth retrying. Empty on success.
	Reason string `json:"reason,omitempty"`
	// Err is the attempt's error, nil on success. Error is its text. Neither
	// ever contains a credential.
	Err   error  `json:"-"`
	Error string `json:"error,omitempty"`
	// Retry reports that another attempt follows, after Wait.
	Retry bool          `json:"retry,omitempty"`
	Wait  time.Duration `json:"wait,omitempty"`
	// Discarded reports that this attempt passed deltas to the stream
	// callback before failing and a retry follows: those deltas are void,
	// and the next attempt streams the response again from block 0.
	Discarded bool `json:"discarded,omitempty"`
}

// OK reports whether the attempt succeeded.
func (a Attempt) OK() bool { return a.Err == nil }

type attemptKey struct{}

// WithAttemptObserver returns a context whose model calls report each
// attempt to fn. Observers nest: an observer added to a context that already
// has one runs first, then the outer one. fn runs on the goroutine calling
// Generate and must not block for long.
func WithAttemptObserver(ctx context.Context, fn func(Attempt)) context.Context {
	if fn == nil {
		return ctx
	}
	if outer, ok := ctx.Value(attemptKey{}).(func(Attempt)); ok {
		inner := fn
		fn = func(a Attempt) { inner(a); outer(a) }
	}
	return context.WithValue(ctx, attemptKey{}, fn)
}

// ReportAttempt passes a to the observers of ctx, if any. Providers call it
// once per attempt.
func ReportAttempt(ctx context.Context, a Attempt) {
	if fn, ok := ctx.Value(attemptKey{}).(func(Attempt)); ok {
		fn(a)
	}
}
