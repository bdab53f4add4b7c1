package serve

import (
	"net/http"
	"time"
)

// attempt is a stored model-call attempt as the API shows it: durations in
// milliseconds (a dashboard's unit), not Go's nanoseconds.
type attempt struct {
	Turn      int       `json:"turn"`
	N         int       `json:"n"`
	Provider  string    `json:"provider,omitempty"`
	Model     string    `json:"model,omitempty"`
	Status    int       `json:"status,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Error     string    `json:"error,omitempty"`
	Retry     bool      `json:"retry"`
	Discarded bool      `json:"discarded,omitempty"`
	WaitMS    int64     `json:"wait_ms"`
	LatencyMS int64     `json:"latency_ms"`
	At        time.Time `json:"at"`
}

// getAttempts answers every try of every model call an instance made, so
// a person can see which calls were retried, why, and what it cost in time.
func (s *Server) getAttempts(w http.ResponseWriter, r *http.Request) {
	all, err := s.rt.Attempts(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	out := make([]attempt, len(all))
	for i, a := range all {
		out[i] = attempt{Turn: a.Turn, N: a.N, Provider: a.Provider, Model: a.Model, Status: a.Status,
			RequestID: a.RequestID, Reason: a.Reason, Error: a.Error, Retry: a.Retry, Discarded: a.Discarded,
			WaitMS: a.Wait.Milliseconds(), LatencyMS: a.Latency.Milliseconds(), At: a.At}
	}
	writeJSON(w, http.StatusOK, map[string]any{"attempts": out})
}
