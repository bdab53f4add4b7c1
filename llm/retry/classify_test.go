package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/deputy-run/deputy/llm"
)

func TestParseHint(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	cases := []struct {
		name     string
		header   http.Header
		after    time.Duration
		hasAfter bool
		should   string // "", "true", "false"
	}{
		{"none", h(), 0, false, ""},
		{"ms wins over seconds", h("retry-after-ms", "1500", "retry-after", "9"), 1500 * time.Millisecond, true, ""},
		{"fractional ms", h("retry-after-ms", "2.5"), 2500 * time.Microsecond, true, ""},
		{"seconds", h("retry-after", "3"), 3 * time.Second, true, ""},
		{"fractional seconds", h("retry-after", "0.25"), 250 * time.Millisecond, true, ""},
		{"http date", h("retry-after", now.Add(90*time.Second).Format(http.TimeFormat)), 90 * time.Second, true, ""},
		{"date in the past", h("retry-after", now.Add(-time.Hour).Format(http.TimeFormat)), 0, true, ""},
		{"garbage", h("retry-after", "soon", "retry-after-ms", "x"), 0, false, ""},
		{"negative seconds ignored", h("retry-after", "-5"), 0, false, ""},
		{"bad ms falls back to seconds", h("retry-after-ms", "-1", "retry-after", "2"), 2 * time.Second, true, ""},
		{"should retry true", h("x-should-retry", "true"), 0, false, "true"},
		{"should retry false", h("x-should-retry", "FALSE"), 0, false, "false"},
		{"should retry other", h("x-should-retry", "maybe"), 0, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := ParseHint(c.header, now)
			if got.After != c.after || got.HasAfter != c.hasAfter {
				t.Errorf("after = %v/%v, want %v/%v", got.After, got.HasAfter, c.after, c.hasAfter)
			}
			should := ""
			if got.ShouldRetry != nil {
				should = fmt.Sprint(*got.ShouldRetry)
			}
			if should != c.should {
				t.Errorf("should retry = %q, want %q", should, c.should)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	api := func(status int, typ string) error {
		return &llm.APIError{Provider: "p", StatusCode: status, Type: typ, Message: "m"}
	}
	yes, no := true, false
	cases := []struct {
		name   string
		err    error
		retry  bool
		reason string
	}{
		{"400", api(400, "invalid_request_error"), false, ReasonFatal},
		{"401", api(401, "authentication_error"), false, ReasonFatal},
		{"403", api(403, "permission_error"), false, ReasonFatal},
		{"404", api(404, "not_found_error"), false, ReasonFatal},
		{"408", api(408, "timeout"), true, ReasonTimeout},
		{"409", api(409, "conflict"), true, ReasonConflict},
		{"429 anthropic", api(429, "rate_limit_error"), true, ReasonRateLimit},
		{"429 openai", api(429, "rate_limit_exceeded"), true, ReasonRateLimit},
		{"429 quota", api(429, "insufficient_quota"), false, ReasonFatal},
		{"500", api(500, "api_error"), true, ReasonServerError},
		{"502", api(502, "error"), true, ReasonServerError},
		{"503", api(503, "overloaded_error"), true, ReasonOverloaded},
		{"529", api(529, "overloaded_error"), true, ReasonOverloaded},
		{"error event overloaded", api(200, "overloaded_error"), true, ReasonErrorEvent},
		{"error event invalid", api(200, "invalid_request_error"), false, ReasonFatal},
		{"wrapped api error", fmt.Errorf("ctx: %w", api(529, "overloaded_error")), true, ReasonOverloaded},
		{"x-should-retry true on 400", WithHint(api(400, "invalid_request_error"), Hint{ShouldRetry: &yes}), true, ReasonServerAsked},
		{"x-should-retry false on 529", WithHint(api(529, "overloaded_error"), Hint{ShouldRetry: &no}), false, ReasonOverloaded},
		{"transient", Transient(ReasonStreamCut, errors.New("cut")), true, ReasonStreamCut},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true, ReasonStreamCut},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true, ReasonConnection},
		{"canceled", fmt.Errorf("post: %w", context.Canceled), false, ReasonFatal},
		{"unknown", errors.New("something else"), false, ReasonFatal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v := Classify(c.err)
			if v.Retry != c.retry || v.Reason != c.reason {
				t.Errorf("Classify(%v) = retry %v reason %q, want %v %q", c.err, v.Retry, v.Reason, c.retry, c.reason)
			}
		})
	}
}

func TestClassifyCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	e := &llm.APIError{StatusCode: 429, Type: "rate_limit_error", RetryAfter: 7 * time.Second}
	if v := Classify(e); !v.HasAfter || v.After != 7*time.Second {
		t.Errorf("from APIError: %+v", v)
	}
	// A hint's zero wait (retry-after: 0) is still an instruction.
	v := Classify(WithHint(&llm.APIError{StatusCode: 503}, Hint{HasAfter: true}))
	if !v.HasAfter || v.After != 0 || !v.Retry {
		t.Errorf("zero hint: %+v", v)
	}
}
