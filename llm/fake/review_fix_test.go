package fake

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// postLoose posts body and reads what arrives, a cut body included: the
// read error is returned, not fatal, for faults that cut the answer.
func postLoose(t *testing.T, url, path, body string) (int, []byte, error) {
	t.Helper()
	res, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// TestAnthropicThreadCutContinueFreesTheResponse: a continue whose answer
// a cut_stream fault cuts (the handler ends by panicking) frees the
// response it continued, as a dropped connection does on the real API;
// the old code left it in flight for good (thread_continue_in_flight).
func TestAnthropicThreadCutContinueFreesTheResponse(t *testing.T) {
	t.Parallel()
	for _, stream := range []string{"false", "true"} {
		t.Run("stream="+stream, func(t *testing.T) {
			t.Parallel()
			_, url := srvStart(t, Options{Faults: map[int]Fault{2: {Kind: FaultCutStream, AfterBytes: 10}}})
			r := srvPost(t, url, "/v1/messages", `{"model":"m","max_tokens":50,"thread":{"type":"create"},"messages":[{"role":"user","content":"hi"}]}`)
			id, _ := srvJSON(t, r.body)["id"].(string)
			if r.status != http.StatusOK || id == "" {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			cont := `{"model":"m","max_tokens":50,"stream":` + stream + `,"thread":{"type":"continue","previous_message_id":"` + id + `"},"messages":[{"role":"user","content":"again"}]}`
			// Cut after 10 bytes; had it been answered whole, the next
			// continue would be thread_already_continued.
			_, _, _ = postLoose(t, url, "/v1/messages", cont)
			status, b, err := postLoose(t, url, "/v1/messages", cont)
			if err != nil || status != http.StatusOK {
				t.Fatalf("continue after the cut one: %d %v %s", status, err, b)
			}
		})
	}
}

// TestClearRequestsKeepsAnExchangeInFlight: an exchange logged before a
// DELETE /_deputy/requests (its status decided, its stream still being
// sent) is listed once it ends, with its Seq; the old code updated a copy
// the clear had dropped, so GET never listed it though last_seq counted it.
func TestClearRequestsKeepsAnExchangeInFlight(t *testing.T) {
	t.Parallel()
	fc := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s, url := srvStart(t, Options{Clock: fc, PerToken: time.Second})
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err := http.Post(url+"/v1/messages", "application/json",
			strings.NewReader(`{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}()
	waitTimers(t, fc, 1) // the stream waits out its first delta's latency
	if got := s.Requests(); len(got) != 1 || got[0].Status != http.StatusOK || got[0].Seq != 0 {
		t.Fatalf("in flight: %+v", got)
	}
	if status, _, body := getLog(t, url, http.MethodDelete, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("after DELETE: %d logged", n)
	}
	driveClock(t, fc, time.Second, done)
	status, l, body := getLog(t, url, http.MethodGet, "")
	if status != http.StatusOK || len(l.Requests) != 1 || l.Requests[0].Seq != 1 || l.LastSeq != 1 || len(l.Requests[0].Events) == 0 {
		t.Fatalf("GET after the stream ended: %d %s", status, body)
	}
	if got := s.Requests(); len(got) != 1 || got[0].Seq != 1 || len(got[0].Answer) == 0 {
		t.Fatalf("Requests after the stream ended: %+v", got)
	}
}

// TestRequestLogBoundedByBytes: past MaxLogBytes the oldest entries go
// (an entry weighs its answer and twice its body); the newest stays even
// when it alone is heavier. The old log was bounded by count only.
func TestRequestLogBoundedByBytes(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{MaxLogBytes: 4000})
	pad := strings.Repeat("x", 600)
	body := func(i int) string {
		return `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"` + strconv.Itoa(i) + pad + `"}]}`
	}
	for i := range 10 {
		if r := srvPost(t, url, "/v1/messages", body(i)); r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	got := s.Requests()
	var weight int64
	for _, e := range got {
		weight += logWeight(&e)
	}
	if len(got) < 2 || len(got) > 3 || weight > 4000 {
		t.Fatalf("%d entries weighing %d kept, want 2 or 3 within 4000", len(got), weight)
	}
	if last := got[len(got)-1]; last.N != 10 || !strings.Contains(string(last.Body), `"9x`) {
		t.Fatalf("newest entry: N %d %s", last.N, last.Body)
	}
	// One entry heavier than the bound is still kept, alone.
	srvPost(t, url, "/v1/messages", body(10)+strings.Repeat(" ", 5000))
	if got := s.Requests(); len(got) != 1 || got[0].N != 11 {
		t.Fatalf("after a heavy entry: %d entries", len(got))
	}
	// The zero value bounds too.
	if d := NewServer(Options{}); d.maxBytes != defaultMaxLogBytes {
		t.Fatalf("default byte bound %d", d.maxBytes)
	}
}

// TestThreadStoreBoundedByBytes: the thread store drops its oldest turns
// past its byte bound, counting a long thread's history (held by its last
// turn) until that last turn goes; it used to be bounded by count alone.
func TestThreadStoreBoundedByBytes(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{})
	st := s.threads()
	st.mu.Lock()
	st.maxBytes = 3000
	st.mu.Unlock()
	msg := func(text string) string {
		return `{"role":"user","content":"` + text + strings.Repeat("y", 400) + `"}`
	}
	r := srvPost(t, url, "/v1/messages", `{"model":"m","max_tokens":50,"thread":{"type":"create"},"messages":[`+msg("a")+`]}`)
	first, _ := srvJSON(t, r.body)["id"].(string)
	prev, turns := first, 1
	for {
		r = srvPost(t, url, "/v1/messages", `{"model":"m","max_tokens":50,"thread":{"type":"continue","previous_message_id":"`+prev+`"},"messages":[`+msg(strconv.Itoa(turns))+`]}`)
		if r.status != http.StatusOK {
			break
		}
		turns++
		prev, _ = srvJSON(t, r.body)["id"].(string)
		st.mu.Lock()
		bytes, n := st.bytes, len(st.byID)
		st.mu.Unlock()
		if bytes > 3000 || turns > 20 {
			t.Fatalf("after %d turns the store holds %d bytes in %d turns (bound 3000)", turns, bytes, n)
		}
	}
	// The thread's history outgrew the bound, so its last turn went too:
	// a continue from it is thread_not_found, which the SDKs recover from.
	if code := srvDig(srvJSON(t, r.body), "error", "details", "error_code"); r.status != http.StatusNotFound || code != "thread_not_found" || turns < 4 {
		t.Fatalf("continue after %d turns: %d %s", turns, r.status, r.body)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.bytes != 0 || len(st.byID) != 0 || len(st.order) != 0 {
		t.Fatalf("store after its last thread went: %d bytes, %d turns, %d ids", st.bytes, len(st.byID), len(st.order))
	}
}

// TestRedactCredentialHeaders: cookies, Gemini's x-goog-api-key and any
// header named like a key or token are redacted in the log, not only the
// Anthropic and OpenAI key headers.
func TestRedactCredentialHeaders(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	for _, k := range []string{"Cookie", "X-Goog-Api-Key", "X-Amz-Security-Token", "Anthropic-Admin-Key", "X-Api-Key", "Api-Key"} {
		h.Set(k, "secret-"+k)
	}
	h.Set("Authorization", "Bearer secret-bearer")
	h.Set("Anthropic-Version", "2023-06-01")
	h.Set("X-Stainless-Token-Count", "kept") // not a suffix match
	out := redact(h)
	for k, vs := range out {
		for _, v := range vs {
			if strings.Contains(v, "secret") {
				t.Errorf("%s: %q not redacted", k, v)
			}
		}
	}
	if out.Get("Authorization") != "Bearer REDACTED" || out.Get("Anthropic-Version") != "2023-06-01" || out.Get("X-Stainless-Token-Count") != "kept" {
		t.Fatalf("redacted too much or too little: %v", out)
	}
}

// TestRequestLogErrorsInTheCallersWire: the log endpoint's errors come in
// the wire of the caller's headers (OpenAI's for a Bearer key), as
// GET /v1/models answers; they were always Anthropic-shaped.
func TestRequestLogErrorsInTheCallersWire(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{APIKey: "k-1"})
	status, _, body := getLog(t, url, http.MethodGet, "", "Authorization", "Bearer wrong")
	if status != http.StatusUnauthorized || srvDig(srvJSON(t, []byte(body)), "error", "code") != "invalid_api_key" || strings.Contains(body, `"type":"error"`) {
		t.Fatalf("OpenAI caller, wrong key: %d %s", status, body)
	}
	status, _, body = getLog(t, url, http.MethodGet, "?since=x", "Authorization", "Bearer k-1")
	if status != http.StatusBadRequest || srvDig(srvJSON(t, []byte(body)), "error", "type") != "invalid_request_error" || strings.Contains(body, `"type":"error"`) {
		t.Fatalf("OpenAI caller, bad since: %d %s", status, body)
	}
	status, _, body = getLog(t, url, http.MethodGet, "", "x-api-key", "wrong", "anthropic-version", "2023-06-01")
	if status != http.StatusUnauthorized || srvDig(srvJSON(t, []byte(body)), "type") != "error" || srvDig(srvJSON(t, []byte(body)), "error", "type") != "authentication_error" {
		t.Fatalf("Anthropic caller, wrong key: %d %s", status, body)
	}
}

// TestFuzzSeedsReachTheDecoders: the fuzz target's Responses and new
// Messages seeds are answered past validation (a 200, or for the seeds
// naming what the server never stored, the API's refusal that it was not found), so
// the fuzzer starts from bodies that reach deep into the decoders rather
// than ones refused at their first field. Every seed is run through the
// target's own property check too.
func TestFuzzSeedsReachTheDecoders(t *testing.T) {
	t.Parallel()
	for path, seeds := range map[string][]string{"/v1/responses": fuzzResponsesSeeds, "/v1/messages": fuzzMessagesSeeds} {
		p := Anthropic
		if path == "/v1/responses" {
			p = OpenAI
		}
		for i, s := range seeds {
			rec := httptest.NewRecorder()
			fuzzServer.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(s)))
			checkAnswer(t, p, rec)
			missing := strings.Contains(s, "_missing") || strings.Contains(s, "_seed")
			if rec.Code != http.StatusOK && !(missing && rec.Code < 500 && strings.Contains(rec.Body.String(), " found")) {
				t.Errorf("%s seed %d: %d %s", path, i, rec.Code, rec.Body)
			}
		}
	}
}
