package retry

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/deputy-run/deputy/llm"
)

// What a provider adapter (llm/anthropic, llm/openai) does around each of
// its SDK's attempts, said once: the SDKs differ in their types, not in
// these steps.

// Middleware returns the HTTP middleware an adapter hands its SDK for one
// attempt (both SDKs take this function type): it records the response's
// status and request id (from the header requestID names) into out, its
// retry headers into hint when it is not a success, and has w watch the
// response's bytes, so an attempt that stalls is cut.
func (p *Policy) Middleware(w *Watchdog, out *Outcome, hint *Hint, requestID string) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return func(r *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		resp, err := next(r)
		if resp != nil {
			w.Kick()
			out.Status = resp.StatusCode
			out.RequestID = resp.Header.Get(requestID)
			if resp.StatusCode >= 300 {
				*hint = ParseHint(resp.Header, p.clock().Now())
			}
			resp.Body = w.Body(resp.Body)
		}
		return resp, err
	}
}

// Relay returns what an attempt passes its deltas to: stream, marking the
// attempt Streamed (its deltas cannot be taken back if it is retried), or
// nothing when stream is nil.
func (o *Outcome) Relay(stream func(llm.Delta)) func(llm.Delta) {
	return func(d llm.Delta) {
		if stream != nil {
			o.Streamed = true
			stream(d)
		}
	}
}

// BodySnippet is the message of an API error whose body had none: the
// status text and the start of the body, white space folded (status 0,
// an error event inside a stream, has no status text).
func BodySnippet(body string, status int) string {
	s := http.StatusText(status)
	body = strings.Join(strings.Fields(body), " ")
	if len(body) > 200 {
		// Cut on a rune boundary: the message is stored (instance.Error),
		// and Postgres refuses text that is not valid UTF-8.
		n := 200
		for n > 0 && !utf8.RuneStart(body[n]) {
			n--
		}
		body = body[:n] + "…"
	}
	switch {
	case body == "":
		return s
	case s == "":
		return body
	}
	return s + ": " + body
}
