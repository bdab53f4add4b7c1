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
// DELETE /_deputy/requests empties the log (Seq goes on counting, so a
// poller's since stays good). With Options.APIKey set it wants the key,
// as the model endpoints do: the log holds whatever clients sent.
func (s *Server) serveRequestLog(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	fail := func(e *wireError) {
		w.WriteHeader(e.status)
		_, _ = w.Write(e.body(Anthropic, ""))
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
	for _, e := range s.log {
		if e.Seq > since {
			c := *e
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
// exchanges in flight are logged when they end.
func (s *Server) ClearRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log, s.logNext = nil, 0
}
