package clients

import (
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
// shows as one more), this many of them streamed, every one answered 200,
// and at least one carrying the tool's result (carries; mark by default).
type trips struct {
	method, path string
	requests     int
	streamed     int
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
	for _, r := range f.requests(t) {
		if r.Method != w.method || r.Path != w.path {
			continue
		}
		got = append(got, r)
		if r.Status != 200 {
			t.Errorf("the fake answered %d to %v", r.Status, r)
		}
		if r.Stream {
			streamed++
		}
		if strings.Contains(string(r.Request), w.carries) {
			marked++
		}
	}
	if len(got) != w.requests || streamed != w.streamed {
		t.Errorf("%s %s: the fake got %d requests (%d streamed), want %d (%d streamed):\n%s",
			w.method, w.path, len(got), streamed, w.requests, w.streamed, listLogged(got))
	}
	if w.method == "POST" && marked == 0 {
		t.Errorf("%s %s: no request carried the tool's result (%s):\n%s", w.method, w.path, w.carries, listLogged(got))
	}
	return got
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
