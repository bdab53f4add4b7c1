package serve

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/deputy-run/deputy"
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

// attemptsPage is the most attempts one answer carries: a long instance
// with many retries has thousands, a dashboard shows a page of them.
const attemptsPage = 1000

// getAttempts answers the tries of an instance's model calls, so a person
// can see which calls were retried, why, and what it cost in time: all
// turns or ?turn='s, a page of them at a time (?offset=, ?limit=), with
// the total the selection has.
func (s *Server) getAttempts(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := pageParams(r, attemptsPage, attemptsPage)
	if err != nil {
		fail(w, err)
		return
	}
	turn, err := turnParam(r)
	if err != nil {
		fail(w, err)
		return
	}
	all, err := s.rt.Attempts(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	if turn > 0 {
		all = slices.DeleteFunc(all, func(a deputy.Attempt) bool { return a.Turn != turn })
	}
	page := pageOf(all, offset, limit)
	out := make([]attempt, len(page))
	for i, a := range page {
		out[i] = attempt{Turn: a.Turn, N: a.N, Provider: a.Provider, Model: a.Model, Status: a.Status,
			RequestID: a.RequestID, Reason: a.Reason, Error: a.Error, Retry: a.Retry, Discarded: a.Discarded,
			WaitMS: a.Wait.Milliseconds(), LatencyMS: a.Latency.Milliseconds(), At: a.At}
	}
	writeJSON(w, http.StatusOK, map[string]any{"attempts": out, "offset": offset, "total": len(all)})
}

// turnParam reads ?turn=: 0 when absent (every turn), else a turn number,
// which counts from 1.
func turnParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("turn")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, badRequest("turn=%q is not a turn number (1 or more)", v)
	}
	return n, nil
}
