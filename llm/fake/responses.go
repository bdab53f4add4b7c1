package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// openaiResponses answers POST /v1/responses, OpenAI's Responses API, in
// JSON or, with stream: true, as typed SSE events (responses_stream.go).
func (s *Server) openaiResponses(ex *exchange) {
	store := s.responseStore()
	d, werr := decodeResponses(ex.entry.Body, store)
	if werr != nil {
		ex.fail(werr)
		return
	}
	ex.entry.Request, ex.entry.Stream = d.req, d.stream
	lim := wireLimits{maxTokens: d.maxTokens}
	g, ok := s.generate(ex, d.req, lim, d.stream, "call_", func() cachePlan { return s.cache.planOpenAI(d.elems, d.retention) })
	if !ok {
		return
	}
	if d.schema != nil {
		if err := schemaContent(g, d.schema); err != nil {
			ex.fail(internalErr(err))
			return
		}
	}
	if !s.begin(ex, g) {
		return
	}
	run := &respRun{d: d, g: g, id: s.newID("resp_", 48), created: s.clock.Now().Unix()}
	run.items = s.respOutItems(g, d)
	if d.stream {
		s.respStream(ex, run)
		return
	}
	if clock.Sleep(ex.r.Context(), s.clock, time.Duration(g.output)*g.perToken) != nil {
		ex.record(statusClientGone)
		return
	}
	body := mustJSON(run.object(run.finalStatus(), s.clock.Now().Unix()))
	s.respKeep(run, body)
	ex.startHeaders(false)
	_ = newBodyWriter(ex.w, g.fault).whole(body)
}

// respKeep stores a finished response when the request asked for it.
func (s *Server) respKeep(run *respRun, body []byte) {
	if !run.d.store {
		return
	}
	out := make([]json.RawMessage, len(run.items))
	for i, it := range run.items {
		out[i] = it.json(true)
	}
	in := make([]json.RawMessage, len(run.d.items))
	for i, it := range run.d.items {
		in[i] = s.respWithID(it)
	}
	s.responseStore().put(run.id, in, out, body)
}

// openaiResponseByID answers GET and DELETE /v1/responses/{id}: a stored
// response, or 404 as the API answers an id it does not hold; and GET
// /v1/responses/{id}/input_items.
func (s *Server) openaiResponseByID(ex *exchange, id string) {
	store := s.responseStore()
	if rid, ok := strings.CutSuffix(id, "/input_items"); ok {
		s.respInputItemsList(ex, rid)
		return
	}
	notFound := &wireError{status: http.StatusNotFound, kind: errNotFound,
		msg: fmt.Sprintf("Response with id '%s' not found.", id), oaiMsg: fmt.Sprintf("Response with id '%s' not found.", id)}
	switch ex.r.Method {
	case http.MethodGet:
		body, ok := store.get(id)
		if !ok {
			ex.fail(notFound)
			return
		}
		ex.startHeaders(false)
		_, _ = ex.w.Write(body)
	case http.MethodDelete:
		if !store.remove(id) {
			ex.fail(notFound)
			return
		}
		ex.startHeaders(false)
		_, _ = ex.w.Write(mustJSON(struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Deleted bool   `json:"deleted"`
		}{id, "response", true}))
	default:
		ex.w.Header().Set("Allow", "GET, DELETE")
		ex.fail(apiErr(http.StatusMethodNotAllowed, "Method Not Allowed"))
	}
}
