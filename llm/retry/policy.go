// Package retry is deputy's retry policy for model calls. The official SDKs
// are built with their own retries off, so every attempt is visible: this
// package decides which failures are worth another attempt, how long to
// wait (jittered exponential backoff, or what the server asked for through
// retry-after-ms, retry-after and x-should-retry), and when to give up
// (attempt limit, wait budget). Time comes from a clock.Clock, so tests
// neither sleep nor wait.
package retry

import (
	"math/rand/v2"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// Policy configures retries of one model call. Fields are used as given:
// start from Default and change what you need.
type Policy struct {
	// MaxAttempts bounds the attempts of one call, the first included.
	// Values below 1 mean 1 (no retries).
	MaxAttempts int
	// BaseDelay is the backoff before the first retry; it doubles for each
	// retry after that, up to MaxDelay. Zero means retry at once (tests).
	BaseDelay time.Duration
	MaxDelay  time.Duration // zero means one hour
	// Jitter, in [0,1], is the fraction of a computed backoff that is
	// randomised away, so that many clients failing together do not retry
	// together. A server-requested wait is honoured exactly.
	Jitter float64
	// MaxRetryAfter is the longest server-requested wait deputy honours. A
	// longer retry-after (a quota window, not a blip) ends the retries and
	// surfaces the error.
	MaxRetryAfter time.Duration
	// Budget bounds the total time one call spends waiting between
	// attempts (not the attempts themselves, so a long stream does not use
	// it up). Zero means no bound beyond MaxAttempts.
	Budget time.Duration
	// StallTimeout cancels an attempt when no byte of the response (headers
	// or body) arrives for this long, and retries it: a hung connection or a
	// server that never answers. Zero disables it.
	StallTimeout time.Duration
	// PlainTimeout takes StallTimeout's place for a non-streamed attempt
	// (Plain): such a response's headers arrive only when the whole answer
	// is done, so StallTimeout would cut every answer longer than itself
	// and retry it. It bounds the attempt as a whole; zero: no bound but
	// the context's (and the SDK's: Anthropic's caps a plain call at 10
	// minutes). A zero StallTimeout turns both off.
	PlainTimeout time.Duration
	// Clock times backoff and stalls. Nil means clock.Real.
	Clock clock.Clock
	// Rand returns a number in [0,1) for jitter. Nil means math/rand/v2.
	Rand func() float64
}

// Default is deputy's policy for real providers. It is more patient than
// the SDKs' own (two retries): a subagent that dies on a transient 529 after
// twenty turns of work wastes far more than a minute of waiting.
func Default() Policy {
	return Policy{
		MaxAttempts:   8,
		BaseDelay:     500 * time.Millisecond,
		MaxDelay:      30 * time.Second,
		Jitter:        0.25,
		MaxRetryAfter: 2 * time.Minute,
		Budget:        5 * time.Minute,
		StallTimeout:  5 * time.Minute,
		// Anthropic's SDK refuses a plain call it expects to outlast 10
		// minutes; the same bound serves OpenAI-compatible servers.
		PlainTimeout: 10 * time.Minute,
	}
}

// Plain is p for the attempts of a non-streamed call: PlainTimeout in place
// of StallTimeout, since no byte arrives until the answer is complete. A
// policy with no stall detection (StallTimeout zero) is left as it is: its
// caller bounds attempts otherwise (a context, a test's clock).
func (p Policy) Plain() Policy {
	if p.StallTimeout > 0 {
		p.StallTimeout = p.PlainTimeout
	}
	return p
}

func (p *Policy) clock() clock.Clock {
	if p.Clock == nil {
		return clock.Real
	}
	return p.Clock
}

func (p *Policy) maxAttempts() int { return max(p.MaxAttempts, 1) }

// backoff is the computed wait before retry number n (from 1).
func (p *Policy) backoff(n int) time.Duration {
	d := p.BaseDelay
	if d <= 0 {
		return 0
	}
	limit := p.MaxDelay
	if limit <= 0 {
		limit = time.Hour // doubling must stop somewhere
	}
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	if j := min(max(p.Jitter, 0), 1); j > 0 {
		r := rand.Float64
		if p.Rand != nil {
			r = p.Rand
		}
		d -= time.Duration(j * r() * float64(d))
	}
	return d
}
