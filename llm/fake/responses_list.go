package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
)

// GET /v1/responses/{id}/input_items: a stored response's input items
// as the ResponseItemList of openai/openai-openapi's listInputItems
// (limit 1..100, default 20; order desc by default, or asc; after an
// item id), each item with an id as the API lists them.

// respItemIDPrefix is the id prefix the API gives an input item of each
// type.
var respItemIDPrefix = map[string]string{
	"message": "msg_", "": "msg_", "function_call": "fc_", "function_call_output": "fco_",
	"custom_tool_call": "ctc_", "custom_tool_call_output": "ctco_", "additional_tools": "at_",
}

// respWithID returns an input item as the API keeps it: with an id,
// given one in its type's style when the client sent none, and a message's
// string content as one text part.
func (s *Server) respWithID(raw json.RawMessage) json.RawMessage {
	var head struct {
		Type string          `json:"type"`
		ID   json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &head) != nil {
		return raw
	}
	if head.Type == "message" || head.Type == "" {
		raw = respMessageParts(raw)
	}
	if !isNull(head.ID) {
		return raw
	}
	prefix, ok := respItemIDPrefix[head.Type]
	if !ok {
		prefix = "item_"
	}
	i := bytes.IndexByte(raw, '{')
	out := append([]byte(nil), raw[:i+1]...)
	out = append(out, `"id":`...)
	out = appendJSONString(out, s.newID(prefix, 48))
	if rest := bytes.TrimLeft(raw[i+1:], " \t\r\n"); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, raw[i+1:]...)
}

// respMessageParts rewrites a message whose content is a string with the
// content as one part: input_text, or output_text for an assistant's.
func respMessageParts(raw json.RawMessage) json.RawMessage {
	var m respWireMessage
	if json.Unmarshal(raw, &m) != nil || len(m.Content) == 0 || m.Content[0] != '"' {
		return raw
	}
	var text string
	if json.Unmarshal(m.Content, &text) != nil {
		return raw
	}
	var part any = struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"input_text", text}
	if m.Role == "assistant" {
		part = textPart(text)
	}
	return mustJSON(struct {
		ID      json.RawMessage `json:"id,omitempty"`
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Status  json.RawMessage `json:"status,omitempty"`
		Phase   json.RawMessage `json:"phase,omitempty"`
		Content []any           `json:"content"`
	}{m.ID, "message", m.Role, m.Status, m.Phase, []any{part}})
}

// respInputItemsList answers GET /v1/responses/{id}/input_items.
func (s *Server) respInputItemsList(ex *exchange, id string) {
	if ex.r.Method != http.MethodGet {
		ex.w.Header().Set("Allow", http.MethodGet)
		ex.fail(apiErr(http.StatusMethodNotAllowed, "Method Not Allowed"))
		return
	}
	in, _, ok := s.responseStore().lookup(id)
	if !ok {
		msg := fmt.Sprintf("Response with id '%s' not found.", id)
		ex.fail(&wireError{status: http.StatusNotFound, kind: errNotFound, msg: msg, oaiMsg: msg})
		return
	}
	q := ex.r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			ex.fail(oaiInvalid("limit", "integer_above_max_value", "Invalid 'limit': expected an integer between 1 and 100, but got %q instead.", v))
			return
		}
		limit = n
	}
	items := slices.Clone(in)
	switch q.Get("order") {
	case "", "desc":
		slices.Reverse(items)
	case "asc":
	default:
		ex.fail(oaiInvalid("order", "invalid_value", "Invalid value: '%s'. Supported values are: 'asc' and 'desc'.", q.Get("order")))
		return
	}
	ex.startHeaders(false)
	_, _ = ex.w.Write(mustJSON(respPage(items, q.Get("after"), limit)))
}

// respItemList is one page of items.
type respItemList struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

// respPage cuts the page of at most limit items that follows the item
// with id after (from the start when after is ""; none when no item has
// that id).
func respPage(items []json.RawMessage, after string, limit int) respItemList {
	idOf := func(raw json.RawMessage) string {
		var h struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &h)
		return h.ID
	}
	if after != "" {
		i := slices.IndexFunc(items, func(it json.RawMessage) bool { return idOf(it) == after })
		if i < 0 {
			items = nil // no item has the id: none follow it
		} else {
			items = items[i+1:]
		}
	}
	page := respItemList{Object: "list", Data: append([]json.RawMessage{}, items[:min(limit, len(items))]...), HasMore: len(items) > limit}
	if n := len(page.Data); n > 0 {
		first, last := idOf(page.Data[0]), idOf(page.Data[n-1])
		page.FirstID, page.LastID = &first, &last
	}
	return page
}
