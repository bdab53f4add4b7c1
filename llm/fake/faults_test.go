package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// longReply gives streams enough bytes to cut anywhere.
var longReply = replyWith(llm.Text(strings.Repeat("a fairly long sentence, ", 30)), llm.ToolUse("", "t", toolInput))

const (
	anthStreamBody = `{"model":"m","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	oaiStreamBody  = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
)

// wireCase is one wire's endpoint and bodies.
type wireCase struct {
	name, path, stream, plain string
}

var wires = []wireCase{
	{"anthropic", "/v1/messages", anthStreamBody, helloAnthropic},
	{"openai", "/v1/chat/completions", oaiStreamBody, helloOpenAI},
}

// rawRead posts and reads the body, returning what arrived before any
// read error.
// rawRead posts body and reads the answer whole; it reports errors rather
// than failing t, so a test may call it from a goroutine of its own.
func rawRead(t *testing.T, url, path, body string) (int, []byte, error) {
	t.Helper()
	res, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

func TestFaultCutStream(t *testing.T) {
	t.Parallel()
	for _, w := range wires {
		for _, after := range []int{0, 1, 333, 1500, 1 << 20} {
			_, url := srvStart(t, Options{Responder: longReply, Faults: map[int]Fault{1: {Kind: FaultCutStream, AfterBytes: after}, 2: {Kind: FaultCutStream, AfterBytes: after}}})
			status, got, err := rawRead(t, url, w.path, w.stream)
			if status != 200 || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%s after %d: status %d err %v", w.name, after, status, err)
			}
			if after < 1500 && len(got) != after {
				t.Errorf("%s: read %d bytes before the cut, want %d", w.name, len(got), after)
			}
			if evs, _ := parseSSE(bytes.NewReader(got)); after >= 1<<20 {
				// Past the end, the cut falls in the final frame: a client
				// never sees the stream complete.
				if len(evs) < 2 || evs[len(evs)-1].Data == "[DONE]" || evs[len(evs)-1].Name == "message_stop" {
					t.Errorf("%s: a cut beyond the end delivered %d events ending %+v", w.name, len(evs), evs[len(evs)-1])
				}
			}
			status, got, err = rawRead(t, url, w.path, w.plain)
			if status != 200 || !errors.Is(err, io.ErrUnexpectedEOF) || json.Valid(got) {
				t.Fatalf("%s JSON after %d: status %d err %v body %q", w.name, after, status, err, got)
			}
		}
	}
}

func TestFaultErrorEvent(t *testing.T) {
	t.Parallel()
	for _, w := range wires {
		_, url := srvStart(t, Options{Responder: longReply, Faults: map[int]Fault{1: {Kind: FaultErrorEvent, AfterBytes: 800}}})
		status, got, err := rawRead(t, url, w.path, w.stream)
		if status != 200 || err != nil {
			t.Fatalf("%s: %d %v", w.name, status, err)
		}
		evs, err := parseSSE(bytes.NewReader(got))
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		before := bytes.LastIndex(got, []byte("data: "+last.Data))
		if before < 800 {
			t.Errorf("%s: error after %d bytes, want at least 800", w.name, before)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(last.Data), &d); err != nil {
			t.Fatalf("%s: error event data %q", w.name, last.Data)
		}
		switch w.name {
		case "anthropic":
			if last.Name != "error" || srvDig(d, "error", "type") != "overloaded_error" || bytes.Contains(got, []byte("message_stop")) {
				t.Errorf("last event %+v", last)
			}
		case "openai":
			if srvDig(d, "error", "type") != "server_error" || bytes.Contains(got, []byte("[DONE]")) {
				t.Errorf("last frame %+v", last)
			}
		}
	}
}

func TestFaultMalformedJSON(t *testing.T) {
	t.Parallel()
	for _, w := range wires {
		_, url := srvStart(t, Options{Responder: longReply, Faults: map[int]Fault{1: {Kind: FaultMalformedJSON, AfterBytes: 500}, 2: {Kind: FaultMalformedJSON}}})
		status, got, err := rawRead(t, url, w.path, w.stream)
		if status != 200 || err != nil {
			t.Fatalf("%s: %d %v", w.name, status, err)
		}
		evs, _ := parseSSE(bytes.NewReader(got))
		for i, ev := range evs {
			bad := !json.Valid([]byte(ev.Data))
			if bad != (i == len(evs)-1) {
				t.Errorf("%s: event %d of %d valid=%v: %q", w.name, i, len(evs), !bad, ev.Data)
			}
		}
		status, got, err = rawRead(t, url, w.path, w.plain)
		if status != 200 || err != nil || json.Valid(got) || len(got) == 0 {
			t.Errorf("%s JSON: %d %v %q", w.name, status, err, got)
		}
	}
}

func TestFaultStatusesOnBothWires(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind           FaultKind
		anthStatus     int
		anthType       string
		oaiStatus      int
		oaiType        string
		wantRetryAfter string
	}{
		{FaultRateLimit, 429, "rate_limit_error", 429, "requests", "0"},
		{FaultOverloaded, 529, "overloaded_error", 503, "server_error", ""},
		{FaultServerError, 500, "api_error", 500, "server_error", ""},
	} {
		s, url := srvStart(t, Options{Faults: map[int]Fault{1: {Kind: c.kind}, 2: {Kind: c.kind}}})
		a := srvPost(t, url, "/v1/messages", anthStreamBody)
		o := srvPost(t, url, "/v1/chat/completions", oaiStreamBody)
		if a.status != c.anthStatus || srvDig(srvJSON(t, a.body), "error", "type") != c.anthType {
			t.Errorf("%s anthropic: %d %s", c.kind, a.status, a.body)
		}
		if o.status != c.oaiStatus || srvDig(srvJSON(t, o.body), "error", "type") != c.oaiType {
			t.Errorf("%s openai: %d %s", c.kind, o.status, o.body)
		}
		if a.header.Get("retry-after") != c.wantRetryAfter || o.header.Get("retry-after") != c.wantRetryAfter {
			t.Errorf("%s: retry-after %q %q", c.kind, a.header.Get("retry-after"), o.header.Get("retry-after"))
		}
		for _, l := range s.Requests() {
			if l.Fault == nil || l.Fault.Kind != c.kind {
				t.Errorf("%s: log entry fault %+v", c.kind, l.Fault)
			}
		}
	}
}

func TestReplyFaultAndPrecedence(t *testing.T) {
	t.Parallel()
	calls := 0
	resp := respondFunc(func(_ *llm.Request, info RequestInfo) Reply {
		calls++ // requests here are sequential
		r := Reply{Content: []llm.Block{llm.Text("ok")}}
		if info.N <= 2 {
			r.Fault = &Fault{Kind: FaultOverloaded}
		}
		return r
	})
	_, url := srvStart(t, Options{Responder: resp, Faults: map[int]Fault{2: {Kind: FaultServerError}}})
	for i, want := range []int{529, 500, 200} {
		if r := srvPost(t, url, "/v1/messages", helloAnthropic); r.status != want {
			t.Errorf("request %d: %d, want %d", i+1, r.status, want)
		}
	}
	// A server-level status fault means the model never ran.
	if calls != 2 {
		t.Errorf("responder called %d times, want 2", calls)
	}
}

func TestFaultRateIsSeededAndDeterministic(t *testing.T) {
	t.Parallel()
	pattern := func(seed uint64) []bool {
		s, url := srvStart(t, Options{FaultRate: 0.5, Seed: seed, RandomFault: Fault{Kind: FaultOverloaded}})
		for range 60 {
			srvPost(t, url, "/v1/chat/completions", helloOpenAI)
		}
		var out []bool
		for _, l := range s.Requests() {
			failed := l.Status != 200
			if failed && (l.Status != 503 || l.Fault == nil || l.Fault.Kind != FaultOverloaded) {
				t.Fatalf("request %d: status %d fault %+v", l.N, l.Status, l.Fault)
			}
			out = append(out, failed)
		}
		return out
	}
	a, b, c := pattern(42), pattern(42), pattern(43)
	if !equalBools(a, b) {
		t.Error("the same seed gave different fault patterns")
	}
	if equalBools(a, c) {
		t.Error("different seeds gave the same fault pattern")
	}
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	if n < 15 || n > 45 {
		t.Errorf("%d of 60 requests failed at rate 0.5", n)
	}
	s, url := srvStart(t, Options{FaultRate: 1})
	if r := srvPost(t, url, "/v1/messages", helloAnthropic); r.status != 500 || s.Requests()[0].Fault.Kind != FaultServerError {
		t.Errorf("default random fault: %d", r.status)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fakeClockStart is a fixed instant for fake clocks.
var fakeClockStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestSlowFirstByteWaitsOnTheClock(t *testing.T) {
	t.Parallel()
	for _, w := range wires {
		fc := clock.NewFake(fakeClockStart)
		_, url := srvStart(t, Options{Clock: fc, Faults: map[int]Fault{1: {Kind: FaultSlowFirstByte, Delay: 30 * time.Second}}})
		done := make(chan int, 1)
		go func() {
			res, err := http.Post(url+w.path, "application/json", strings.NewReader(w.plain))
			if err != nil {
				done <- -1
				return
			}
			res.Body.Close()
			done <- res.StatusCode
		}()
		waitTimers(t, fc, 1)
		fc.Advance(29 * time.Second)
		select {
		case s := <-done:
			t.Fatalf("%s: answered (%d) before the delay passed", w.name, s)
		default:
		}
		if fc.Pending() != 1 {
			t.Fatalf("%s: %d timers pending", w.name, fc.Pending())
		}
		fc.Advance(time.Second)
		if s := <-done; s != 200 {
			t.Fatalf("%s: status %d", w.name, s)
		}
	}
}

func TestLatencyFirstBytePlusPerToken(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("token ", 20)
	content := []llm.Block{llm.Text(text), llm.ToolUse("", "t", json.RawMessage(`{"path":"x/y/z.go"}`))}
	wantOut := llm.EstimateOutput(content)
	for _, w := range wires {
		for _, body := range []string{w.stream, w.plain} {
			fc := clock.NewFake(fakeClockStart)
			_, url := srvStart(t, Options{Clock: fc, FirstByte: 2 * time.Second, PerToken: 10 * time.Millisecond, MaxDelta: 3, Responder: replyWith(content...)})
			done := make(chan struct{})
			var got []byte
			var err error
			go func() {
				defer close(done)
				_, got, err = rawRead(t, url, w.path, body)
			}()
			moved := driveClock(t, fc, 10*time.Millisecond, done)
			if err != nil {
				t.Fatal(err)
			}
			if want := 2*time.Second + time.Duration(wantOut)*10*time.Millisecond; moved != want {
				t.Errorf("%s stream=%v: the clock moved %v, want %v (%d output tokens)", w.name, strings.Contains(body, "stream"), moved, want, wantOut)
			}
			if complete := bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) || bytes.HasSuffix(got, []byte("data: {\"type\":\"message_stop\"}\n\n")) || json.Valid(got); !complete {
				t.Errorf("%s: incomplete body: %s", w.name, got)
			}
		}
	}
}

func TestReplyLatencyOverridesOptions(t *testing.T) {
	t.Parallel()
	fc := clock.NewFake(fakeClockStart)
	resp := respondFunc(func(*llm.Request, RequestInfo) Reply {
		return Reply{Content: []llm.Block{llm.Text("12345678")}, FirstByte: 5 * time.Second, PerToken: time.Second}
	})
	_, url := srvStart(t, Options{Clock: fc, FirstByte: time.Hour, PerToken: time.Hour, Responder: resp})
	done := make(chan struct{})
	var status int
	var err error
	go func() { defer close(done); status, _, err = rawRead(t, url, "/v1/messages", anthStreamBody) }()
	if moved := driveClock(t, fc, time.Second, done); moved != 7*time.Second {
		t.Fatalf("moved %v, want 7s (5s first byte + 2 tokens)", moved)
	}
	if status != http.StatusOK || err != nil {
		t.Fatalf("status %d, %v", status, err)
	}
}

func TestClientCancelStopsWaiting(t *testing.T) {
	t.Parallel()
	for _, w := range wires {
		for _, phase := range []string{"first byte", "per token"} {
			fc := clock.NewFake(fakeClockStart)
			opts := Options{Clock: fc, Responder: longReply}
			if phase == "first byte" {
				opts.FirstByte = time.Hour
			} else {
				opts.PerToken = time.Hour
			}
			// The handler signals when it returns, so the test waits for
			// exactly that instead of polling the clock and the log.
			s := NewServer(opts)
			returned := make(chan struct{}, 1)
			ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				defer func() { returned <- struct{}{} }()
				s.ServeHTTP(rw, r)
			}))
			t.Cleanup(ts.Close)
			url := ts.URL
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+w.path, strings.NewReader(w.stream))
				res, err := http.DefaultClient.Do(req)
				if err == nil {
					_, err = io.ReadAll(res.Body)
					res.Body.Close()
				}
				errc <- err
			}()
			waitTimers(t, fc, 1)
			cancel()
			if err := <-errc; err == nil {
				t.Fatalf("%s %s: request finished despite the cancel", w.name, phase)
			}
			// The handler notices, disarms its timer and returns.
			select {
			case <-returned:
			case <-guardCtx(t).Done():
				t.Fatalf("%s %s: the handler did not return after the client left", w.name, phase)
			}
			log := s.Requests()
			if fc.Pending() != 0 || len(log) != 1 || (phase == "first byte" && log[0].Status != statusClientGone) {
				t.Fatalf("%s %s: pending %d, log %+v", w.name, phase, fc.Pending(), log)
			}
		}
	}
}
