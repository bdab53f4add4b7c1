package retry

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

func TestMiddlewareRecordsTheResponse(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	p := Policy{Clock: clock.NewFake(now)}
	for _, c := range []struct {
		name     string
		status   int
		header   http.Header
		wantHint bool
	}{
		{"success", 200, http.Header{"Request-Id": {"req_1"}, "Retry-After": {"3"}}, false},
		{"rate limited", 429, http.Header{"Request-Id": {"req_2"}, "Retry-After": {"3"}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var out Outcome
			var hint Hint
			mw := p.Middleware(nil, &out, &hint, "request-id")
			resp, err := mw(&http.Request{}, func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: c.status, Header: c.header, Body: io.NopCloser(strings.NewReader("x"))}, nil
			})
			if err != nil || resp == nil {
				t.Fatalf("middleware: %v, %v", resp, err)
			}
			if out.Status != c.status || out.RequestID != c.header.Get("request-id") {
				t.Errorf("outcome %+v, want status %d and the request id", out, c.status)
			}
			if hint.HasAfter != c.wantHint || (c.wantHint && hint.After != 3*time.Second) {
				t.Errorf("hint %+v, want one: %v", hint, c.wantHint)
			}
		})
	}
}

func TestMiddlewareWithoutResponse(t *testing.T) {
	t.Parallel()
	var out Outcome
	var hint Hint
	p := Default()
	_, err := p.Middleware(nil, &out, &hint, "x-request-id")(&http.Request{}, func(*http.Request) (*http.Response, error) {
		return nil, io.ErrUnexpectedEOF
	})
	if err != io.ErrUnexpectedEOF || out != (Outcome{}) {
		t.Errorf("got %v, %+v: want the transport error and nothing recorded", err, out)
	}
}

func TestRelay(t *testing.T) {
	t.Parallel()
	var none Outcome
	none.Relay(nil)(llm.Delta{Text: "a"})
	if none.Streamed {
		t.Error("no callback, yet the attempt is marked streamed")
	}
	var out Outcome
	var got []string
	out.Relay(func(d llm.Delta) { got = append(got, d.Text) })(llm.Delta{Text: "a"})
	if !out.Streamed || len(got) != 1 || got[0] != "a" {
		t.Errorf("streamed %v, deltas %q", out.Streamed, got)
	}
}

func TestBodySnippet(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 250)
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{"", 502, "Bad Gateway"},
		{" \n ", 502, "Bad Gateway"},
		{"<html>\n  upstream  down\n</html>", 502, "Bad Gateway: <html> upstream down </html>"},
		{`{"oops":1}`, 0, `{"oops":1}`},
		{"teapot", 599, "teapot"},
		{long, 500, "Internal Server Error: " + long[:200] + "…"},
		// "é" is two bytes; at 199 x's its second byte is byte 200.
		{strings.Repeat("x", 199) + strings.Repeat("é", 10), 0, strings.Repeat("x", 199) + "…"},
	} {
		if got := BodySnippet(c.body, c.status); got != c.want {
			t.Errorf("BodySnippet(%q, %d) = %q, want %q", c.body, c.status, got, c.want)
		}
		if got := BodySnippet(c.body, c.status); !utf8.ValidString(got) {
			t.Errorf("BodySnippet(%q, %d) = %q: not valid UTF-8", c.body, c.status, got)
		}
	}
}

func TestPlainSwapsTheStallTimeout(t *testing.T) {
	t.Parallel()
	p := Policy{StallTimeout: time.Minute, PlainTimeout: time.Hour}
	if got := p.Plain(); got.StallTimeout != time.Hour || p.StallTimeout != time.Minute {
		t.Errorf("Plain: stall %s (policy's %s), want 1h (1m)", got.StallTimeout, p.StallTimeout)
	}
	if got := (Policy{PlainTimeout: time.Hour}).Plain(); got.StallTimeout != 0 {
		t.Errorf("Plain of a policy without stall detection: stall %s, want none", got.StallTimeout)
	}
	if Default().PlainTimeout <= Default().StallTimeout {
		t.Errorf("default plain timeout %s is not above the stall timeout %s", Default().PlainTimeout, Default().StallTimeout)
	}
}
