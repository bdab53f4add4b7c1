package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/retry"
)

// faultReply is long enough that a stream carries many deltas before a
// fault trips.
func faultReply() fake.Reply {
	return fake.Reply{
		Content: []llm.Block{
			llm.Text(strings.Repeat("The quick brown fox <jumps> over the lazy dog & runs. ", 12)),
			llm.ToolUse("toolu_F", "read_file", inputC),
		},
		Usage: &llm.Usage{InputTokens: 321, OutputTokens: 123, CacheReadTokens: 45, CacheWriteTokens: 6},
	}
}

func testFaults(t *testing.T, tg Target, m mode) {
	streaming := !m.nonStreaming
	cases := []struct {
		name   string
		fault  fake.Fault
		status int
		reason string
		wait   time.Duration
	}{
		{"rate_limit", fake.Fault{Kind: fake.FaultRateLimit, RetryAfter: 2 * time.Second}, 429, retry.ReasonRateLimit, 2 * time.Second},
		{"overloaded", fake.Fault{Kind: fake.FaultOverloaded}, tg.OverloadedStatus, retry.ReasonOverloaded, 0},
		{"server_error", fake.Fault{Kind: fake.FaultServerError}, 500, retry.ReasonServerError, 0},
		{"cut_stream", fake.Fault{Kind: fake.FaultCutStream, AfterBytes: 1000}, 200, retry.ReasonStreamCut, 0},
		{"malformed_json", fake.Fault{Kind: fake.FaultMalformedJSON, AfterBytes: 1000}, 200, retry.ReasonMalformed, 0},
		{"error_event", fake.Fault{Kind: fake.FaultErrorEvent, AfterBytes: 1000}, 200, retry.ReasonErrorEvent, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			status, reason := c.status, c.reason
			if c.fault.Kind == fake.FaultErrorEvent && !streaming {
				// Without a stream, an error event is an overloaded answer.
				status, reason = tg.OverloadedStatus, retry.ReasonOverloaded
			}
			want := faultReply()
			fault := c.fault
			if fault.AfterBytes > 0 && streaming {
				fault.AfterBytes += tg.StreamPreamble
			}
			srv, root := StartServer(t, fake.Options{APIKey: Key, Responder: Respond(func(*llm.Request, fake.RequestInfo) fake.Reply { return want }),
				Faults: map[int]fake.Fault{1: fault}})
			clk := clock.NewInstant()
			model := build(t, tg, m, root, fastPolicy(clk))
			var atts Attempts
			resp, err := call(t, context.Background(), model, m, &llm.Request{Model: "fake-model", Messages: []llm.Message{llm.UserText("go")}, Tools: testTools}, &atts)
			if err != nil {
				t.Fatalf("not recovered: %v", err)
			}
			checkContent(t, tg, m, resp.Content, want.Content)
			if u := tg.UsageOf(*want.Usage); resp.Usage != u {
				t.Errorf("usage %+v, want %+v (counted once)", resp.Usage, u)
			}
			got := atts.All()
			if len(got) != 2 {
				t.Fatalf("%d attempts, want 2: %+v", len(got), got)
			}
			a := got[0]
			if a.Status != status || a.Reason != reason || !a.Retry || a.Err == nil || a.Wait != c.wait || a.N != 1 {
				t.Errorf("failed attempt %+v, want status %d reason %s wait %v", a, status, reason, c.wait)
			}
			if strings.Contains(a.Error, "\n") || !strings.HasPrefix(a.Error, tg.Name+":") {
				t.Errorf("attempt error %q: want one line naming the provider", a.Error)
			}
			// Output streamed before a fault inside the body is void.
			midBody := status == 200
			if a.Discarded != (m.callback && midBody) {
				t.Errorf("discarded = %v in mode %s", a.Discarded, m.name)
			}
			if b := got[1]; b.Err != nil || b.N != 2 || b.Status != 200 {
				t.Errorf("second attempt %+v", b)
			}
			if w := clk.Waits(); c.wait > 0 && (len(w) != 1 || w[0] != c.wait) {
				t.Errorf("waited %v, want %v", w, c.wait)
			}
			if n := len(srv.Requests()); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
		})
	}
}

// oneLine checks an error is one line naming the provider, without the key.
func oneLine(t testing.TB, tg Target, err error, key string, wants ...string) {
	t.Helper()
	s := err.Error()
	if strings.Contains(s, "\n") || !strings.HasPrefix(s, tg.Name+":") {
		t.Errorf("error %q: want one line starting %q", s, tg.Name+":")
	}
	if key != "" && strings.Contains(fmt.Sprintf("%s %+v %#v", s, err, err), key) {
		t.Errorf("error leaks the API key: %s", s)
	}
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("error %q lacks %q", s, w)
		}
	}
}

// testFatalErrors checks the failures no retry mends: each ends the call
// with a one-line error naming the provider and never its key, at once
// or, when retrying is worth it, once the attempts are spent.
func testFatalErrors(t *testing.T, tg Target) {
	for _, c := range []struct {
		name string
		test func(t *testing.T, tg Target, m mode)
	}{
		{"bad key", testBadKey},
		{"bad request", testBadRequest},
		{"not found", testNotFound},
		{"unreachable", testUnreachable},
		{"persistent overload", testPersistentOverload},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, tg, mode{name: "buffered"})
		})
	}
}

// hiRequest is the one-message request the fatal error tests send.
func hiRequest() *llm.Request {
	return &llm.Request{Model: "fake-model", Messages: []llm.Message{llm.UserText("hi")}}
}

// testBadKey: a wrong key is a 401, not retried, and neither the error
// nor the attempt shows the key.
func testBadKey(t *testing.T, tg Target, m mode) {
	_, root := StartServer(t, fake.Options{APIKey: Key})
	const wrong = "sk-wrong-SECRET-987654321"
	model, err := tg.New(Config{RootURL: root, APIKey: wrong, Policy: fastPolicy(clock.NewInstant())})
	if err != nil {
		t.Fatal(err)
	}
	var atts Attempts
	_, err = call(t, context.Background(), model, m, hiRequest(), &atts)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 401 {
		t.Fatalf("err = %v, want a 401 APIError", err)
	}
	oneLine(t, tg, err, wrong, "401")
	got := atts.All()
	if len(got) != 1 || got[0].Retry || got[0].Status != 401 {
		t.Errorf("attempts %+v", got)
	}
	for _, a := range got {
		if strings.Contains(a.Error, wrong) || strings.Contains(fmt.Sprintf("%+v", a), wrong) {
			t.Errorf("attempt leaks the key: %+v", a)
		}
	}
	t.Logf("401: %v", err)
}

// testBadRequest: a transcript the API refuses is a 400 carrying the
// provider's message, not retried.
func testBadRequest(t *testing.T, tg Target, m mode) {
	_, root := StartServer(t, fake.Options{APIKey: Key})
	model := build(t, tg, m, root, fastPolicy(clock.NewInstant()))
	// A tool call never answered: both APIs refuse the transcript.
	r := hiRequest()
	r.Tools = testTools
	r.Messages = append(r.Messages,
		llm.Message{Role: llm.Assistant, Content: []llm.Block{llm.ToolUse("toolu_X", "now", inputD)}},
		llm.UserText("and?"))
	var atts Attempts
	_, err := call(t, context.Background(), model, m, r, &atts)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Message == "" {
		t.Fatalf("err = %v, want a 400 APIError with the provider's message", err)
	}
	oneLine(t, tg, err, Key, "400")
	if n := len(atts.All()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
	t.Logf("400: %v", err)
}

// testNotFound: a wrong base URL is a 404, not retried.
func testNotFound(t *testing.T, tg Target, m mode) {
	_, root := StartServer(t, fake.Options{APIKey: Key})
	model := build(t, tg, m, root+"/missing", fastPolicy(clock.NewInstant()))
	var atts Attempts
	_, err := call(t, context.Background(), model, m, hiRequest(), &atts)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 404 {
		t.Fatalf("err = %v, want a 404 APIError", err)
	}
	oneLine(t, tg, err, Key, "404")
	if n := len(atts.All()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// testUnreachable: a closed port is retried as a connection failure until
// the attempts are spent, and the error says so.
func testUnreachable(t *testing.T, tg Target, m mode) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	root := "http://" + ln.Addr().String()
	ln.Close()
	p := fastPolicy(clock.NewInstant())
	p.MaxAttempts = 3
	model := build(t, tg, m, root, p)
	var atts Attempts
	_, err = call(t, context.Background(), model, m, hiRequest(), &atts)
	if err == nil {
		t.Fatal("no error from a closed port")
	}
	oneLine(t, tg, err, Key, "connection refused", "gave up after 3 attempts")
	got := atts.All()
	if len(got) != 3 {
		t.Fatalf("%d attempts, want 3", len(got))
	}
	for _, a := range got {
		if a.Status != 0 || a.Reason != retry.ReasonConnection {
			t.Errorf("attempt %+v", a)
		}
	}
	t.Logf("unreachable: %v", err)
}

// testPersistentOverload: an API overloaded on every attempt ends the call
// with its overloaded status once the attempts are spent.
func testPersistentOverload(t *testing.T, tg Target, m mode) {
	_, root := StartServer(t, fake.Options{APIKey: Key, FaultRate: 1, RandomFault: fake.Fault{Kind: fake.FaultOverloaded}})
	p := fastPolicy(clock.NewInstant())
	p.MaxAttempts = 4
	model := build(t, tg, m, root, p)
	var atts Attempts
	_, err := call(t, context.Background(), model, m, hiRequest(), &atts)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.StatusCode != tg.OverloadedStatus {
		t.Fatalf("err = %v", err)
	}
	oneLine(t, tg, err, Key, "gave up after 4 attempts")
	if n := len(atts.All()); n != 4 {
		t.Errorf("%d attempts, want 4", n)
	}
}

func testStopReasons(t *testing.T, tg Target, m mode) {
	for give, want := range tg.StopReasons {
		_, root := StartServer(t, fake.Options{APIKey: Key, Responder: Respond(func(*llm.Request, fake.RequestInfo) fake.Reply {
			return fake.Reply{Content: []llm.Block{llm.Text("stopping")}, StopReason: give}
		})})
		model := build(t, tg, m, root, fastPolicy(clock.NewInstant()))
		resp, err := call(t, context.Background(), model, m, &llm.Request{Model: "fake-model", Messages: []llm.Message{llm.UserText("hi")}}, nil)
		if err != nil {
			t.Fatalf("%s: %v", give, err)
		}
		if resp.StopReason != want {
			t.Errorf("fake stop %q: got %q, want %q", give, resp.StopReason, want)
		}
	}
}

// testCancel cancels the call from inside the stream callback while the
// server is still generating.
func testCancel(t *testing.T, tg Target) {
	srvClock := clock.NewArmed() // never advanced: the server stalls after the first fragment
	_, root := StartServer(t, fake.Options{APIKey: Key, Clock: srvClock, PerToken: time.Second,
		Responder: Respond(func(*llm.Request, fake.RequestInfo) fake.Reply {
			return fake.Reply{Content: []llm.Block{llm.ToolUse("toolu_L", "read_file", json.RawMessage(`{"path":"`+strings.Repeat("x", 400)+`"}`))}}
		})})
	model := build(t, tg, mode{}, root, fastPolicy(clock.NewInstant()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var atts Attempts
	deltas := 0
	_, err := model.Generate(atts.Context(ctx), &llm.Request{Model: "fake-model", Messages: []llm.Message{llm.UserText("hi")}, Tools: testTools},
		func(llm.Delta) { deltas++; cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	got := atts.All()
	if deltas == 0 || len(got) != 1 || got[0].Retry {
		t.Errorf("%d deltas, attempts %+v", deltas, got)
	}
}

// testSlowFirstByte shares one fake clock between the server's latency and
// the client's stall timer: a slow first byte within the stall timeout is
// waited for; beyond it the attempt is abandoned and retried.
func testSlowFirstByte(t *testing.T, tg Target) {
	for _, c := range []struct {
		name     string
		delay    time.Duration
		advance  time.Duration
		attempts int
	}{
		{"within timeout", 30 * time.Second, 30 * time.Second, 1},
		{"beyond timeout", 5 * time.Minute, time.Minute, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewArmed()
			_, root := StartServer(t, fake.Options{APIKey: Key, Clock: clk,
				Faults: map[int]fake.Fault{1: {Kind: fake.FaultSlowFirstByte, Delay: c.delay}}})
			p := retry.Default()
			p.Clock, p.BaseDelay, p.StallTimeout = clk, 0, time.Minute
			model := build(t, tg, mode{}, root, p)
			var atts Attempts
			done := make(chan error, 1)
			go func() {
				_, err := model.Generate(atts.Context(context.Background()), &llm.Request{Model: "fake-model", Messages: []llm.Message{llm.UserText("hi")}}, nil)
				done <- err
			}()
			// Both the client's stall timer and the server's latency wait.
			armed := map[time.Duration]bool{<-clk.Armed: true, <-clk.Armed: true}
			if !armed[time.Minute] || !armed[c.delay] {
				t.Fatalf("armed %v", armed)
			}
			clk.Advance(c.advance)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			got := atts.All()
			if len(got) != c.attempts {
				t.Fatalf("%d attempts, want %d: %+v", len(got), c.attempts, got)
			}
			if c.attempts == 1 && got[0].Latency != c.delay {
				t.Errorf("latency %v, want %v", got[0].Latency, c.delay)
			}
			if c.attempts == 2 && (got[0].Reason != retry.ReasonTimeout || got[0].Status != 0 || !got[0].Retry) {
				t.Errorf("stalled attempt %+v", got[0])
			}
		})
	}
}

// testRandomFaults runs 200 two-turn conversations, four at a time, on one
// model, with 20% of requests failing in a random way. Every run must
// complete with the right content and usage counted once.
func testRandomFaults(t *testing.T, tg Target, m mode) {
	const runs, workers = 200, 4
	inj := &faultInjector{rng: rand.New(rand.NewPCG(7, uint64(len(m.name)))), injected: map[fake.FaultKind]int{}}
	_, root := StartServer(t, fake.Options{APIKey: Key, Responder: inj, Seed: 11})
	p := fastPolicy(clock.NewInstant())
	p.MaxAttempts = 12
	p.Budget = 0
	model := build(t, tg, m, root, p)

	var tally callTally
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for run := range jobs {
				if !converse(t, tg, m, model, run, &tally) {
					return
				}
			}
		}()
	}
	for run := range runs {
		jobs <- run
	}
	close(jobs)
	wg.Wait()
	checkFaultMix(t, runs, inj.injected, &tally)
}

// randomFaultKinds are the faults testRandomFaults injects.
var randomFaultKinds = []fake.FaultKind{fake.FaultRateLimit, fake.FaultOverloaded, fake.FaultServerError, fake.FaultCutStream, fake.FaultErrorEvent, fake.FaultMalformedJSON}

// randomFaultUsage is the usage of a run's turn, distinct per run and
// turn, so usage counted twice, or another call's, shows.
func randomFaultUsage(run, turn int) llm.Usage {
	return llm.Usage{InputTokens: int64(100 + run), OutputTokens: int64(10 + run%7 + turn), CacheReadTokens: int64(run * turn), CacheWriteTokens: int64(2 * run)}
}

// randomFaultReply is a run's reply for its turn: a text and a tool call,
// then a final text.
func randomFaultReply(run, turn int) fake.Reply {
	u := randomFaultUsage(run, turn)
	if turn == 0 {
		return fake.Reply{Usage: &u, Content: []llm.Block{
			llm.Text(fmt.Sprintf("run %d: checking the clock, which takes a few words to say.", run)),
			llm.ToolUse(fmt.Sprintf("toolu_%03d", run), "now", json.RawMessage(fmt.Sprintf(`{"run": %d}`, run)))}}
	}
	return fake.Reply{Usage: &u, Content: []llm.Block{llm.Text(fmt.Sprintf("run %d done.", run))}}
}

// faultInjector answers testRandomFaults' requests: each run's reply for
// its turn, one in five with a random fault, counted by kind.
type faultInjector struct {
	mu       sync.Mutex
	rng      *rand.Rand
	injected map[fake.FaultKind]int
}

// Respond implements fake.Responder.
func (f *faultInjector) Respond(req *llm.Request, _ fake.RequestInfo) fake.Reply {
	var run int
	fmt.Sscanf(req.Messages[0].Text(), "run %d", &run)
	r := randomFaultReply(run, (len(req.Messages)-1)/2)
	f.mu.Lock()
	if f.rng.Float64() < 0.2 {
		fault := fake.Fault{Kind: randomFaultKinds[f.rng.IntN(len(randomFaultKinds))], AfterBytes: f.rng.IntN(600), RetryAfter: time.Duration(f.rng.IntN(3)) * time.Second}
		r.Fault = &fault
		f.injected[fault.Kind]++
	}
	f.mu.Unlock()
	return r
}

// callTally counts testRandomFaults' completed calls and the failed
// attempts they retried, across its workers.
type callTally struct {
	mu                    sync.Mutex
	calls, failedAttempts int
}

// converse runs conversation run, its two turns, checking each turn's
// content and usage; false: a call failed (reported).
func converse(t *testing.T, tg Target, m mode, model llm.Model, run int, tally *callTally) bool {
	msgs := []llm.Message{llm.UserText(fmt.Sprintf("run %d", run))}
	for turn := 0; turn < 2; turn++ {
		var atts Attempts
		resp, err := call(t, context.Background(), model, m, &llm.Request{Model: "fake-model", Messages: msgs, Tools: testTools}, &atts)
		if err != nil {
			t.Errorf("run %d turn %d: %v", run, turn, err)
			return false
		}
		want := randomFaultReply(run, turn)
		checkContent(t, tg, m, resp.Content, want.Content)
		if u := tg.UsageOf(*want.Usage); resp.Usage != u {
			t.Errorf("run %d turn %d: usage %+v, want %+v", run, turn, resp.Usage, u)
		}
		tally.mu.Lock()
		tally.calls++
		tally.failedAttempts += len(atts.All()) - 1
		tally.mu.Unlock()
		msgs = append(msgs, resp.Message())
		if res, ok := toolResults(resp); ok {
			msgs = append(msgs, res)
		}
	}
	return true
}

// checkFaultMix checks that every call completed, that each injected
// fault cost exactly one retried attempt, and that the faults were the
// mix asked for: about 20% of the requests, every kind.
func checkFaultMix(t *testing.T, runs int, injected map[fake.FaultKind]int, tally *callTally) {
	total := 0
	for _, n := range injected {
		total += n
	}
	t.Logf("%d calls, %d faults injected %v, %d failed attempts retried", tally.calls, total, injected, tally.failedAttempts)
	if tally.calls != 2*runs {
		t.Errorf("%d calls completed, want %d", tally.calls, 2*runs)
	}
	if tally.failedAttempts != total {
		t.Errorf("%d failed attempts, but %d faults were injected", tally.failedAttempts, total)
	}
	if total < runs*2/10 || len(injected) != len(randomFaultKinds) {
		t.Errorf("fault mix %v: want about 20%% of %d requests, every kind", injected, 2*runs+total)
	}
}
