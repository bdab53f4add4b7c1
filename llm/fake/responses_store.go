package fake

import (
	"encoding/json"
	"slices"
	"sync"
)

// Stored responses: what store: true keeps (the default), for
// previous_response_id and GET/DELETE /v1/responses/{id}. The store is in
// memory and bounded: past maxStoredResponses responses or
// maxStoredBytes bytes, the oldest go first, so a long-running fake does
// not grow without end. (The real API keeps them 30 days.)
const (
	maxStoredResponses = 1000
	maxStoredBytes     = 64 << 20
)

type itemRef struct {
	response string
	raw      json.RawMessage
}

// storedResponse is one stored response: its whole input (a continued
// response's input and output first), its output items, and the response
// object as GET answers it.
type storedResponse struct {
	input, output []json.RawMessage
	body          []byte
	size          int
	itemIDs       []string // the ids this response indexed in items
}

type respStore struct {
	mu   sync.Mutex
	byID map[string]*storedResponse
	// items indexes the items that carry an id (every output item, and
	// input items a client gave one) by it, for item_reference: an id
	// names the response that stored it last.
	items map[string]itemRef
	order []string // oldest first; may name deleted ids
	bytes int
}

// responseStore returns s's store of responses (previous_response_id).
func (s *Server) responseStore() *respStore { return s.respStore }

func newRespStore() *respStore {
	return &respStore{byID: map[string]*storedResponse{}, items: map[string]itemRef{}}
}

// put stores a response, evicting the oldest past the bounds.
func (st *respStore) put(id string, input, output []json.RawMessage, body []byte) {
	r := &storedResponse{input: input, output: output, body: body, size: len(body)}
	for _, it := range input {
		r.size += len(it)
	}
	for _, it := range output {
		r.size += len(it)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.byID[id] = r
	st.order = append(st.order, id)
	st.bytes += r.size
	for _, it := range slices.Concat(input, output) {
		var head struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(it, &head) == nil && head.ID != "" {
			st.items[head.ID] = itemRef{response: id, raw: it}
			r.itemIDs = append(r.itemIDs, head.ID)
		}
	}
	for len(st.byID) > maxStoredResponses || (st.bytes > maxStoredBytes && len(st.byID) > 1) {
		old := st.order[0]
		st.order = st.order[1:]
		if _, ok := st.byID[old]; ok {
			st.dropLocked(old)
		}
	}
}

// dropLocked forgets a stored response and the items it indexed.
func (st *respStore) dropLocked(id string) {
	r := st.byID[id]
	st.bytes -= r.size
	delete(st.byID, id)
	for _, k := range r.itemIDs {
		if st.items[k].response == id {
			delete(st.items, k)
		}
	}
}

// item returns a stored item by its id.
func (st *respStore) item(id string) (json.RawMessage, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ref, ok := st.items[id]
	return ref.raw, ok
}

// lookup returns a stored response's input and output items.
func (st *respStore) lookup(id string) (input, output []json.RawMessage, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.byID[id]
	if !ok {
		return nil, nil, false
	}
	return r.input, r.output, true
}

// get returns a stored response's body.
func (st *respStore) get(id string) ([]byte, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.byID[id]
	if !ok {
		return nil, false
	}
	return r.body, true
}

// remove deletes a stored response, reporting whether it was there.
func (st *respStore) remove(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.byID[id]; !ok {
		return false
	}
	st.dropLocked(id)
	// order keeps deleted ids until eviction reaches them; once they
	// outnumber the live ones it is rebuilt, so deletes cannot grow it.
	if len(st.order) > 2*len(st.byID)+64 {
		live := st.order[:0]
		for _, k := range st.order {
			if _, ok := st.byID[k]; ok {
				live = append(live, k)
			}
		}
		st.order = live
	}
	return true
}
