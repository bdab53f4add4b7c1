package clients

import (
	"slices"
	"strings"
	"testing"
)

// mark is what the checks' get_weather tool answers (checks/lib.mjs reads it
// from DEPUTY_CHECK_MARK): found in the fake's log, the client sent its tool
// result; found in the client's final text, the fake's answer quoting it
// came back. scenarios/weather.yaml's second turn starts with quoted.
const (
	mark   = "weather-ok-4172"
	quoted = "Here it is: Paris: 18C, sunny (" + mark + ")"
)

// trips is what a check expects the fake to have received on one path:
// exactly this many requests (an SDK's silent retry of a rejected request
// shows as one more), this many of them streamed, every one answered 200
// but the failed ones (the check's deliberate bad requests and injected
// faults: the statuses in failed, in order), and at least one carrying the
// tool's result (carries; mark by default).
type trips struct {
	method, path string
	requests     int
	streamed     int
	failed       []int
	carries      string
}

// expect checks the fake's log against w and returns the requests it counted.
func (w trips) expect(t *testing.T, f *fakeLLM) []logged {
	t.Helper()
	if w.method == "" {
		w.method = "POST"
	}
	if w.carries == "" {
		w.carries = mark
	}
	var got []logged
	streamed, marked := 0, 0
	var failed []int
	for _, r := range f.requests(t) {
		if r.Method != w.method || r.Path != w.path {
			continue
		}
		got = append(got, r)
		if r.Status != 200 {
			failed = append(failed, r.Status)
		}
		if r.Stream {
			streamed++
		}
		if strings.Contains(string(r.Request), w.carries) {
			marked++
		}
	}
	if len(got) != w.requests || streamed != w.streamed || !slices.Equal(failed, w.failed) {
		t.Errorf("%s %s: the fake got %d requests (%d streamed, failed %v), want %d (%d streamed, failed %v):\n%s",
			w.method, w.path, len(got), streamed, failed, w.requests, w.streamed, w.failed, listLogged(got))
	}
	if w.method == "POST" && marked == 0 {
		t.Errorf("%s %s: no request carried the tool's result (%s):\n%s", w.method, w.path, w.carries, listLogged(got))
	}
	return got
}

// refused is how an SDK saw a request the API refuses (checks/lib.mjs's
// refusal).
type refused struct {
	Status  int     `json:"status"`
	Type    string  `json:"type"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// want fails unless the refusal is a 400 of type invalid_request_error whose
// message is msg, with the param and code given ("" for null).
func (r *refused) want(t *testing.T, what, msg, param, code string) {
	t.Helper()
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	if r == nil || r.Status != 400 || r.Type != "invalid_request_error" || r.Message != msg || str(r.Param) != param || str(r.Code) != code {
		t.Errorf("%s: refused as %+v (param %q, code %q); want 400 invalid_request_error %q, param %q, code %q",
			what, r, str(r.Param), str(r.Code), msg, param, code)
	}
}

func listLogged(ls []logged) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString("  " + l.String() + "\n")
	}
	return b.String()
}

// wantQuoted fails unless a client's final text is the scenario's quote of
// the tool result.
func wantQuoted(t *testing.T, what, text string) {
	t.Helper()
	if !strings.Contains(text, quoted) {
		t.Errorf("%s = %q, want it to hold %q (the scenario's second turn quoting the tool result)", what, text, quoted)
	}
}
