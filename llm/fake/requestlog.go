package fake

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
)

// RequestLog is what GET /_deputy/requests answers: the exchanges that
// ended, in the order they ended, and the last one's Seq, which the next
// poll passes as ?since= to get only what came after.
type RequestLog struct {
	Requests []LogEntry `json:"requests"`
	LastSeq  int        `json:"last_seq"`
}

// serveRequestLog answers deputy's own endpoint for tests in other
// languages: GET /_deputy/requests[?since=N] lists the logged exchanges
// whose Seq is above N (those still in flight come once they end), and
// DELETE /_deputy/requests empties the log (Seq and the request numbers
// N go on counting, so a poller's since stays good; an exchange in flight
// is logged when it ends). With Options.APIKey set it wants the key, as
// the model endpoints do: the log holds whatever clients sent. Its errors
// are in the wire of the caller's headers, as GET /v1/models answers.
func (s *Server) serveRequestLog(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	wire := modelsWire(r.Header)
	fail := func(e *wireError) {
		w.WriteHeader(e.statusOn(wire))
		_, _ = w.Write(e.body(wire, ""))
	}
	if !s.authorized(r.Header) {
		fail(authErr(r.Header))
		return
	}
	switch r.Method {
	case http.MethodGet:
		since := 0
		if v := r.URL.Query().Get("since"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				fail(invalid("since: %q is not a sequence number (an integer from 0)", v))
				return
			}
			since = n
		}
		_ = json.NewEncoder(w).Encode(s.requestLog(since))
	case http.MethodDelete:
		s.ClearRequests()
		w.WriteHeader(http.StatusNoContent)
	default:
		h.Set("Allow", "GET, DELETE")
		fail(apiErr(http.StatusMethodNotAllowed, "Method Not Allowed"))
	}
}

// requestLog collects the ended exchanges after since, in Seq order.
func (s *Server) requestLog(since int) RequestLog {
	s.mu.Lock()
	var done []*LoggedRequest
	for _, slot := range s.log {
		if slot.entry.Seq > since {
			c := slot.entry
			done = append(done, &c)
		}
	}
	out := RequestLog{Requests: make([]LogEntry, 0, len(done)), LastSeq: max(s.seq, since)}
	s.mu.Unlock()
	slices.SortFunc(done, func(a, b *LoggedRequest) int { return a.Seq - b.Seq })
	for _, e := range done {
		out.Requests = append(out.Requests, e.Entry())
	}
	return out
}

// ClearRequests empties the request log (Requests, GET /_deputy/requests);
// exchanges in flight are logged again when they end, with their Seq.
// Request numbers (RequestInfo.N, Options.Faults' keys) are not reset.
func (s *Server) ClearRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLogLocked()
}
