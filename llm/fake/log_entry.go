package fake

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// LogEntry is one exchange as `deputy fakellm --log` writes it and
// GET /_deputy/requests answers it: JSON with snake_case keys, for tests in
// any language. A body that is JSON is embedded as it is (request,
// response); one that is not (a malformed_json fault's, a cut one) is a
// string (request_text, response_text). A streamed answer is its events
// instead, each with its data embedded when it is JSON ([DONE] is text).
type LogEntry struct {
	Seq    int         `json:"seq"`
	N      int         `json:"n"`
	Time   time.Time   `json:"time"`
	Wire   Provider    `json:"wire"`
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Status int         `json:"status"`
	Stream bool        `json:"stream"`
	Header http.Header `json:"header"`

	Request     json.RawMessage `json:"request,omitempty"`
	RequestText string          `json:"request_text,omitempty"`

	ResponseType string          `json:"response_type,omitempty"`
	Response     json.RawMessage `json:"response,omitempty"`
	ResponseText string          `json:"response_text,omitempty"`
	Events       []LogEvent      `json:"events,omitempty"`
	// ResponseCut: the answer was longer than the log keeps (1 MiB).
	ResponseCut bool `json:"response_cut,omitempty"`

	LatencyMS float64   `json:"latency_ms"`
	Fault     *LogFault `json:"fault,omitempty"`
}

// LogEvent is one server-sent event of a streamed answer.
type LogEvent struct {
	Event string          `json:"event,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
	Text  string          `json:"text,omitempty"`
}

// LogFault is an injected fault, its durations in Go's syntax ("1.5s").
type LogFault struct {
	Kind       FaultKind `json:"kind"`
	RetryAfter string    `json:"retry_after,omitempty"`
	Delay      string    `json:"delay,omitempty"`
	AfterBytes int       `json:"after_bytes,omitempty"`
}

// Entry is the request's LogEntry.
func (r *LoggedRequest) Entry() LogEntry {
	e := LogEntry{Seq: r.Seq, N: r.N, Time: r.Time, Wire: r.Provider, Method: r.Method, Path: r.Path,
		Status: r.Status, Stream: r.Stream, Header: r.Header, ResponseType: r.AnswerType, ResponseCut: r.AnswerCut,
		LatencyMS: float64(r.Latency) / float64(time.Millisecond)}
	e.Request, e.RequestText = jsonOrText(r.Body)
	if strings.HasPrefix(r.AnswerType, "text/event-stream") {
		e.Events = sseEvents(r.Answer)
	} else {
		e.Response, e.ResponseText = jsonOrText(r.Answer)
	}
	if f := r.Fault; f != nil {
		e.Fault = &LogFault{Kind: f.Kind, AfterBytes: f.AfterBytes, RetryAfter: durationText(f.RetryAfter), Delay: durationText(f.Delay)}
	}
	return e
}

// jsonOrText embeds b when it is one JSON value, else returns it as text.
func jsonOrText(b []byte) (json.RawMessage, string) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, ""
	}
	if json.Valid(b) {
		return json.RawMessage(b), ""
	}
	return nil, string(b)
}

func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// sseEvents splits a text/event-stream body into its events, as the SSE
// parsing rules read it (a blank line ends an event; data lines join with
// \n; comments and other fields are dropped). A last event without its
// blank line, as a cut stream leaves it, is kept.
func sseEvents(body []byte) []LogEvent {
	var out []LogEvent
	var name string
	var data []string
	has := false
	flush := func() {
		if has {
			d := strings.Join(data, "\n")
			ev := LogEvent{Event: name}
			ev.Data, ev.Text = jsonOrText([]byte(d))
			out = append(out, ev)
		}
		name, data, has = "", nil, false
	}
	text := strings.ReplaceAll(strings.ReplaceAll(string(body), "\r\n", "\n"), "\r", "\n")
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			flush()
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name, has = value, true
		case "data":
			data, has = append(data, value), true
		}
	}
	flush()
	return out
}
