package retry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/deputy-run/deputy/llm"
)

// Reasons a failed attempt is given (llm.Attempt.Reason).
const (
	ReasonRateLimit   = "rate_limit"
	ReasonOverloaded  = "overloaded"
	ReasonServerError = "server_error"
	ReasonTimeout     = "timeout"
	ReasonConflict    = "conflict"
	ReasonConnection  = "connection"
	ReasonStreamCut   = "stream_cut"
	ReasonErrorEvent  = "error_event"
	ReasonMalformed   = "malformed_response"
	ReasonServerAsked = "server_asked"
	ReasonFatal       = "fatal"
)

// Verdict is the judgement of one failed attempt.
type Verdict struct {
	Retry  bool
	Reason string
	// After is the wait the server asked for, valid when HasAfter.
	After    time.Duration
	HasAfter bool
}

// Hint is what a response's headers say about retrying it.
type Hint struct {
	// ShouldRetry is x-should-retry: the server's explicit word, which wins
	// over the status code. Nil when the header is absent.
	ShouldRetry *bool
	// After is retry-after-ms, else retry-after (seconds or an HTTP date),
	// valid when HasAfter. A date in the past means zero.
	After    time.Duration
	HasAfter bool
}

// ParseHint reads the retry headers of a response received at now.
func ParseHint(h http.Header, now time.Time) Hint {
	var hint Hint
	switch strings.ToLower(strings.TrimSpace(h.Get("x-should-retry"))) {
	case "true":
		t := true
		hint.ShouldRetry = &t
	case "false":
		f := false
		hint.ShouldRetry = &f
	}
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			hint.After, hint.HasAfter = time.Duration(ms*float64(time.Millisecond)), true
			return hint
		}
	}
	if v := strings.TrimSpace(h.Get("retry-after")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s >= 0 && s < 1e9 {
				hint.After, hint.HasAfter = time.Duration(s*float64(time.Second)), true
			}
		} else if t, err := http.ParseTime(v); err == nil {
			hint.After, hint.HasAfter = max(t.Sub(now), 0), true
		}
	}
	return hint
}

// hinted carries a response's Hint alongside its error.
type hinted struct {
	err  error
	hint Hint
}

func (h *hinted) Error() string { return h.err.Error() }
func (h *hinted) Unwrap() error { return h.err }

// WithHint attaches the retry headers of the response that produced err.
func WithHint(err error, h Hint) error {
	if err == nil {
		return nil
	}
	return &hinted{err: err, hint: h}
}

// transient marks an error the provider knows is worth retrying.
type transient struct {
	reason string
	err    error
}

func (t *transient) Error() string { return t.err.Error() }
func (t *transient) Unwrap() error { return t.err }

// Transient marks err as retryable for reason (one of the Reason
// constants): the provider saw the stream cut, a body that does not decode,
// a stall.
func Transient(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &transient{reason: reason, err: err}
}

// Classify judges a failed attempt's error. Errors of the caller's own
// context are never retried; the caller checks its context first.
func Classify(err error) Verdict {
	var v Verdict
	var t *transient
	var api *llm.APIError
	switch {
	case errors.As(err, &t):
		v.Retry, v.Reason = true, t.reason
	case errors.As(err, &api):
		v.Reason, v.Retry = classifyAPI(api)
		if api.RetryAfter > 0 {
			v.After, v.HasAfter = api.RetryAfter, true
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		v.Reason = ReasonFatal
	case errors.Is(err, io.ErrUnexpectedEOF):
		v.Retry, v.Reason = true, ReasonStreamCut
	case isConnError(err):
		v.Retry, v.Reason = true, ReasonConnection
	default:
		v.Reason = ReasonFatal
	}
	var h *hinted
	if errors.As(err, &h) {
		if h.hint.HasAfter {
			v.After, v.HasAfter = h.hint.After, true
		}
		if s := h.hint.ShouldRetry; s != nil && *s != v.Retry {
			v.Retry = *s
			if v.Retry {
				v.Reason = ReasonServerAsked
			}
		}
	}
	return v
}

// classifyAPI sorts an API error by status and the provider's error type.
func classifyAPI(e *llm.APIError) (reason string, retry bool) {
	switch e.StatusCode {
	case http.StatusOK:
		// An error event inside a 200 stream: retry the kinds a status code
		// would have retried.
		switch e.Type {
		case "overloaded_error", "api_error", "server_error", "rate_limit_error", "rate_limit_exceeded", "timeout_error":
			return ReasonErrorEvent, true
		}
		return ReasonFatal, false
	case http.StatusRequestTimeout:
		return ReasonTimeout, true
	case http.StatusConflict:
		return ReasonConflict, true
	case http.StatusTooManyRequests:
		if e.Type == "insufficient_quota" {
			return ReasonFatal, false
		}
		return ReasonRateLimit, true
	case 529, http.StatusServiceUnavailable:
		return ReasonOverloaded, true
	case http.StatusGatewayTimeout:
		return ReasonTimeout, true
	}
	if e.StatusCode >= 500 {
		return ReasonServerError, true
	}
	return ReasonFatal, false
}

// isConnError reports a failure to reach the server or keep the
// connection: refused, reset, DNS, a transport timeout.
func isConnError(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF)
}

// BodyError classifies a failure while reading a 200 response's body, after
// some of the answer may have arrived: a body that does not decode is
// malformed_response, anything else (the connection broke) stream_cut. Both
// are retried from the start of the call. The SDKs word a non-streamed
// body's decode failure "error parsing response json".
func BodyError(provider string, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) || strings.Contains(err.Error(), "parsing response json") {
		return Transient(ReasonMalformed, fmt.Errorf("%s: malformed response: %w", provider, err))
	}
	return Transient(ReasonStreamCut, fmt.Errorf("%s: response cut: %w", provider, err))
}
