package fake

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// GET /v1/models and GET /v1/models/{id}, in each wire's shape: Anthropic's
// page ({data, has_more, first_id, last_id}, models {type: "model", id,
// display_name, created_at}, paged by limit, after_id and before_id;
// anthropic-sdk-go v2.15.0 model.go ModelInfo, ModelListParams) and
// OpenAI's list ({object: "list", data: [{id, object: "model", created,
// owned_by}]}; openai-go v3.98.0 Model).

// ModelLister is a Responder that knows which models it serves, such as a
// scenario that names its models: GET /v1/models lists them on both wires,
// and GET /v1/models/{id} knows only them. A Responder that is not one
// gets the defaults (defaultModels).
type ModelLister interface {
	Models() []string
}

// modelsWire tells which provider a GET /v1/models is asking, by its headers:
// Anthropic's clients send anthropic-version, OpenAI's do not.
func modelsWire(h http.Header) Provider {
	if h.Get("anthropic-version") != "" || h.Get("x-api-key") != "" {
		return Anthropic
	}
	return OpenAI
}

// models answers GET /v1/models (id empty) and GET /v1/models/{id}.
func (s *Server) models(ex *exchange, id string) {
	ids := s.modelIDs(ex.entry.Provider)
	if id != "" {
		if !slices.Contains(ids, id) {
			ex.fail(modelNotFound(ex.entry.Provider, id))
			return
		}
		ex.startHeaders(false)
		_, _ = ex.w.Write(mustJSON(modelObject(ex.entry.Provider, id)))
		return
	}
	if ex.entry.Provider == OpenAI {
		page := oaiModelList{Object: "list", Data: make([]any, 0, len(ids))}
		for _, m := range ids {
			page.Data = append(page.Data, modelObject(OpenAI, m))
		}
		ex.startHeaders(false)
		_, _ = ex.w.Write(mustJSON(page))
		return
	}
	page, werr := anthModelPage(ids, ex.r.URL.Query())
	if werr != nil {
		ex.fail(werr)
		return
	}
	ex.startHeaders(false)
	_, _ = ex.w.Write(mustJSON(page))
}

// modelIDs is what the server lists on wire p: the Responder's models, or
// the wire's defaults.
func (s *Server) modelIDs(p Provider) []string {
	if l, ok := s.responder.(ModelLister); ok {
		if ids := l.Models(); len(ids) > 0 {
			return ids
		}
	}
	return defaultModels[p]
}

// modelNotFound is the 404 each wire answers for an unknown model.
func modelNotFound(p Provider, id string) *wireError {
	e := apiErr(http.StatusNotFound, "model: "+id)
	if p == OpenAI {
		e.oaiMsg = fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", id)
		e.oaiCode = "model_not_found"
	}
	return e
}

type anthModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

type oaiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type anthModelList struct {
	Data    []anthModel `json:"data"`
	HasMore bool        `json:"has_more"`
	FirstID *string     `json:"first_id"`
	LastID  *string     `json:"last_id"`
}

type oaiModelList struct {
	Object string `json:"object"`
	Data   []any  `json:"data"`
}

// modelCreated is the creation time the fake gives every model: the real
// release times are in no SDK, and the fake says so rather than invent
// them (docs/fake-wire.md).
var modelCreated = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func modelObject(p Provider, id string) any {
	if p == OpenAI {
		return oaiModel{ID: id, Object: "model", Created: modelCreated.Unix(), OwnedBy: "system"}
	}
	return anthModel{Type: "model", ID: id, DisplayName: displayName(id), CreatedAt: modelCreated.Format(time.RFC3339)}
}

// displayName words an id as Anthropic names its models:
// claude-opus-5-5 is "Claude Opus 5.5", claude-sonnet-5 "Claude Sonnet 5";
// an id of another shape is its own name.
func displayName(id string) string {
	parts := strings.Split(id, "-")
	if len(parts) < 3 || len(parts) > 4 || parts[0] != "claude" {
		return id
	}
	for _, n := range parts[2:] {
		if _, err := strconv.Atoi(n); err != nil {
			return id
		}
	}
	family := strings.ToUpper(parts[1][:1]) + parts[1][1:]
	return "Claude " + family + " " + strings.Join(parts[2:], ".")
}

// anthModelPage pages ids (newest first) as the Models API does: limit
// (1 to 1000, default 20) items after after_id or before before_id.
func anthModelPage(ids []string, q url.Values) (anthModelList, *wireError) {
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return anthModelList{}, invalid("limit: Input should be a valid integer, unable to parse string as an integer")
		case n < 1:
			return anthModelList{}, invalid("limit: Input should be greater than or equal to 1")
		case n > 1000:
			return anthModelList{}, invalid("limit: Input should be less than or equal to 1000")
		}
		limit = n
	}
	after, before := q.Get("after_id"), q.Get("before_id")
	if after != "" && before != "" {
		return anthModelList{}, invalid("after_id: cannot be combined with before_id")
	}
	lo, hi := 0, len(ids)
	for _, c := range []struct{ name, id string }{{"after_id", after}, {"before_id", before}} {
		if c.id == "" {
			continue
		}
		i := slices.Index(ids, c.id)
		if i < 0 {
			return anthModelList{}, invalid("%s: no model with id %s", c.name, c.id)
		}
		if c.name == "after_id" {
			lo = i + 1
		} else {
			hi = i
		}
	}
	var page []string
	var more bool
	if before != "" {
		// A page before an id ends next to it.
		page, more = ids[max(lo, hi-limit):hi], hi-limit > lo
	} else {
		page, more = ids[lo:min(hi, lo+limit)], lo+limit < hi
	}
	out := anthModelList{Data: make([]anthModel, 0, len(page)), HasMore: more}
	for _, id := range page {
		out.Data = append(out.Data, modelObject(Anthropic, id).(anthModel))
	}
	if n := len(page); n > 0 {
		out.FirstID, out.LastID = &page[0], &page[n-1]
	}
	return out, nil
}
