package fake

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// lockedBuffer is an io.Writer safe for the server's concurrent handlers,
// counting the Write calls (one per line is the contract).
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

// entries decodes the buffer's lines, failing on any that is not a whole
// LogEntry.
func (b *lockedBuffer) entries(t *testing.T) []LogEntry {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []LogEntry
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e LogEntry
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("log line %d is not a LogEntry: %v\n%s", len(out)+1, err, sc.Bytes())
		}
		out = append(out, e)
	}
	if b.writes != len(out) {
		t.Fatalf("%d writes for %d lines: a line must be one write", b.writes, len(out))
	}
	return out
}

func TestLogWritesEachExchangeWithItsAnswer(t *testing.T) {
	t.Parallel()
	var lb lockedBuffer
	_, url := srvStart(t, Options{Log: &lb, APIKey: "sk-secret-9", Clock: clock.NewInstant(), FirstByte: 250 * time.Millisecond,
		Faults: map[int]Fault{3: {Kind: FaultRateLimit, RetryAfter: 2 * time.Second}}})
	stream := strings.Replace(helloAnthropic, `"max_tokens":256`, `"max_tokens":256,"stream":true`, 1)
	srvPost(t, url, "/v1/messages", helloAnthropic, "x-api-key", "sk-secret-9")
	srvPost(t, url, "/v1/messages", stream, "x-api-key", "sk-secret-9")
	srvPost(t, url, "/v1/chat/completions", helloOpenAI, "Authorization", "Bearer sk-secret-9")
	srvPost(t, url, "/v1/chat/completions", `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer sk-secret-9")
	srvPost(t, url, "/v1/messages", helloAnthropic, "x-api-key", "wrong")
	got := lb.entries(t)
	if len(got) != 5 {
		t.Fatalf("%d lines, want 5", len(got))
	}
	for i, e := range got {
		if e.Seq != i+1 {
			t.Errorf("line %d: seq %d", i+1, e.Seq)
		}
		if h, _ := json.Marshal(e.Header); bytes.Contains(h, []byte("sk-secret-9")) || bytes.Contains(h, []byte("wrong")) {
			t.Errorf("line %d leaks a credential: %s", i+1, h)
		}
		if e.Request == nil && e.Status != 401 { // refused before its body was read
			t.Errorf("line %d: no request body", i+1)
		}
	}
	plain, sse, limited, oaiSSE, denied := got[0], got[1], got[2], got[3], got[4]
	if plain.Wire != Anthropic || plain.Status != 200 || plain.N != 1 || plain.LatencyMS < 250 {
		t.Errorf("plain: %+v", plain)
	}
	if srvDig(srvJSON(t, plain.Response), "content", 0, "text") != "Hello from deputy's fake model." {
		t.Errorf("plain answer: %s", plain.Response)
	}
	if !sse.Stream || len(sse.Events) < 4 || sse.Events[0].Event != "message_start" || sse.Events[len(sse.Events)-1].Event != "message_stop" {
		t.Errorf("stream events: %+v", sse.Events)
	}
	if limited.Status != 429 || limited.Fault == nil || limited.Fault.Kind != FaultRateLimit || limited.Fault.RetryAfter != "2s" {
		t.Errorf("fault: status %d fault %+v", limited.Status, limited.Fault)
	}
	if last := oaiSSE.Events[len(oaiSSE.Events)-1]; oaiSSE.Wire != OpenAI || last.Text != "[DONE]" || last.Data != nil {
		t.Errorf("openai stream ends %+v", last)
	}
	if denied.Status != 401 || denied.Header.Get("X-Api-Key") != "REDACTED" || denied.N != 0 {
		t.Errorf("denied: %+v", denied)
	}
}

func TestLogIsWholeLinesUnderConcurrency(t *testing.T) {
	t.Parallel()
	var lb lockedBuffer
	s, url := srvStart(t, Options{Log: &lb})
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"m","max_tokens":64,"stream":%v,"messages":[{"role":"user","content":"req %d"}]}`, i%2 == 0, i)
			if r := srvPost(t, url, "/v1/messages", body); r.status != 200 {
				t.Errorf("status %d", r.status)
			}
		})
	}
	wg.Wait()
	got := lb.entries(t)
	if len(got) != n {
		t.Fatalf("%d lines, want %d", len(got), n)
	}
	seen := map[int]bool{}
	for i, e := range got {
		if e.Seq != i+1 || seen[e.N] {
			t.Fatalf("line %d: seq %d n %d (duplicate or out of order)", i+1, e.Seq, e.N)
		}
		seen[e.N] = true
	}
	if err := s.LogErr(); err != nil {
		t.Fatal(err)
	}
}

func TestLogKeepsACutStreamAsSent(t *testing.T) {
	t.Parallel()
	var lb lockedBuffer
	_, url := srvStart(t, Options{Log: &lb, Faults: map[int]Fault{1: {Kind: FaultCutStream, AfterBytes: 120}}})
	req, err := http.NewRequest(http.MethodPost, url+"/v1/messages",
		strings.NewReader(`{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := http.DefaultClient.Do(req); err == nil {
		_, _ = bytes.NewBuffer(nil).ReadFrom(res.Body) // cut: an unexpected EOF
		res.Body.Close()
	}
	var got []LogEntry
	for range 200 { // the handler logs as it returns, just after the cut
		if got = lb.entries(t); len(got) == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(got) != 1 {
		t.Fatalf("%d lines", len(got))
	}
	e := got[0]
	if e.Fault == nil || e.Fault.Kind != FaultCutStream || e.Fault.AfterBytes != 120 || len(e.Events) == 0 {
		t.Fatalf("cut stream logged as %+v", e)
	}
}

// failingWriter refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("disk full") }

func TestLogWriteErrorIsKeptNotFatal(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{Log: failingWriter{}})
	if r := srvPost(t, url, "/v1/messages", helloAnthropic); r.status != 200 {
		t.Fatalf("a failing log failed the request: %d", r.status)
	}
	if err := s.LogErr(); err == nil || !strings.Contains(err.Error(), "log request 1: disk full") {
		t.Fatalf("LogErr = %v", err)
	}
	if len(s.Requests()) != 1 {
		t.Fatal("the in-memory log stopped too")
	}
}

func TestSSEEventsFollowTheParsingRules(t *testing.T) {
	t.Parallel()
	got := sseEvents([]byte(": comment\r\nevent: a\r\ndata: {\"x\":1}\r\n\r\ndata: line1\ndata: line2\nid: 7\n\nevent: cut\ndata: {\"half\":"))
	want := []LogEvent{{Event: "a", Data: json.RawMessage(`{"x":1}`)}, {Text: "line1\nline2"}, {Event: "cut", Text: `{"half":`}}
	if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
		t.Fatalf("events\n got %s\nwant %s", g, w)
	}
}
