package fake

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Message threads (the message-threads-2026-08-12 beta): `thread:
// {"type":"create"}` asks the API to hold the conversation under the
// response's id; `{"type":"continue","previous_message_id":ID}` sends only
// the new messages, and the API puts the held ones (and the system prompt
// and tools the thread was created with) before them. Each response can
// be continued once. The SDKs' message threads and tool runners
// (anthropic-sdk-go v2.15.0 betamessagethread.go, @anthropic-ai/sdk 1.10.0
// lib/internal/threads/ThreadState.ts) use this by default, and recover
// from thread_not_found, thread_already_continued and
// thread_continue_in_flight by replaying the conversation under a new
// thread, so the fake answers those codes as error.details.error_code.

// threadParam is the request's thread field.
type threadParam struct {
	Type              string  `json:"type"`
	PreviousMessageID *string `json:"previous_message_id"`
}

// threadEntry is one answered turn the fake holds: what it added to the
// conversation (the request's new messages and the reply), under the
// turn it continued, so a long thread shares its history.
type threadEntry struct {
	parent *threadEntry
	model  string
	system json.RawMessage
	tools  []json.RawMessage
	added  []json.RawMessage
	// continued and inFlight guard the rule that a response is continued
	// once; both are guarded by the store's mutex.
	continued, inFlight bool
	// size is what the entry itself holds (added, and the system prompt
	// and tools of a thread's first turn); refs counts what keeps it in
	// memory: its id in the store and its one continuation, which holds
	// it as parent. The store counts size while refs is above zero.
	size, refs int
}

// history is the whole conversation up to and including e's reply.
func (e *threadEntry) history() []json.RawMessage {
	var chain []*threadEntry
	for p := e; p != nil; p = p.parent {
		chain = append(chain, p)
	}
	var out []json.RawMessage
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, chain[i].added...)
	}
	return out
}

// maxThreads and maxThreadBytes bound the turns a server holds and the
// bytes they keep in memory (a turn keeps the turns before it, so a long
// thread's history counts until its last turn goes), as the Responses
// store is bounded (responses_store.go). The oldest go first, and a
// continue from one of them is a thread_not_found, which the SDKs recover
// from by replaying the conversation.
const (
	maxThreads     = 4096
	maxThreadBytes = 64 << 20
)

// threadStore holds a server's threads.
type threadStore struct {
	mu       sync.Mutex
	byID     map[string]*threadEntry
	order    []string // ids, oldest first
	bytes    int      // the size of every entry in memory
	maxBytes int
}

func newThreadStore() *threadStore {
	return &threadStore{byID: map[string]*threadEntry{}, maxBytes: maxThreadBytes}
}

func (s *Server) threads() *threadStore { return s.threadStore }

// threadTurn is a request on a thread, from its decoding to its answer.
type threadTurn struct {
	store  *threadStore
	prev   *threadEntry // nil when the request creates the thread
	model  string
	system json.RawMessage
	tools  []json.RawMessage
	sent   []json.RawMessage // the messages the request itself carried
}

// threadError is a rejection of the thread field, with the error code the
// SDKs switch on.
func threadError(status int, code, format string, args ...any) *wireError {
	e := invalid(format, args...)
	e.status = status
	if status == http.StatusNotFound {
		e.kind = errNotFound
	}
	e.details = &anthErrorDetails{ErrorCode: code}
	return e
}

// begin reads the thread field and, for a continue, lays the held
// conversation, system prompt and tools into w. The turn it returns must
// end with finish or abandon.
func (st *threadStore) begin(raw json.RawMessage, w *anthWireRequest) (*threadTurn, *wireError) {
	var p threadParam
	if werr := anthDecodeAt(raw, "thread", &p); werr != nil {
		return nil, werr
	}
	t := &threadTurn{store: st, model: *w.Model, system: w.System, tools: w.Tools, sent: w.Messages}
	switch p.Type {
	case "create":
		if p.PreviousMessageID != nil {
			return nil, invalid("thread.create.previous_message_id: Extra inputs are not permitted")
		}
		return t, nil
	case "continue":
		if p.PreviousMessageID == nil || *p.PreviousMessageID == "" {
			return nil, invalid("thread.continue.previous_message_id: Field required")
		}
	default:
		return nil, invalid("thread: Input tag '%s' found using 'type' does not match any of the expected tags: 'create', 'continue'", p.Type)
	}
	id := *p.PreviousMessageID
	st.mu.Lock()
	defer st.mu.Unlock()
	e := st.byID[id]
	switch {
	case e == nil:
		return nil, threadError(http.StatusNotFound, "thread_not_found", "No thread state was found for previous_message_id %s. Replay the full conversation with thread type \"create\" to start a new thread.", id)
	case e.continued:
		return nil, threadError(http.StatusBadRequest, "thread_already_continued", "The response %s has already been continued, and each response can be continued only once. Continue from the thread's most recent response.", id)
	case e.inFlight:
		return nil, threadError(http.StatusBadRequest, "thread_continue_in_flight", "Another request is still continuing from %s.", id)
	}
	if werr := e.fingerprint(w); werr != nil {
		return nil, werr
	}
	e.inFlight = true
	t.prev, t.system, t.tools = e, e.system, e.tools
	w.System, w.Tools = e.system, e.tools
	w.Messages = append(e.history(), w.Messages...)
	return t, nil
}

// fingerprint refuses a continue whose model, system prompt or tools
// differ from what the thread was created with (leaving system and tools
// out, as the SDKs do, takes the thread's).
func (e *threadEntry) fingerprint(w *anthWireRequest) *wireError {
	var fields []string
	if *w.Model != e.model {
		fields = append(fields, "model")
	}
	if !isNull(w.System) && !sameJSON(w.System, e.system) {
		fields = append(fields, "system")
	}
	if w.Tools != nil && !sameJSON(mustJSON(w.Tools), mustJSON(e.tools)) {
		fields = append(fields, "tools")
	}
	if len(fields) == 0 {
		return nil
	}
	return threadError(http.StatusBadRequest, "thread_fingerprint_mismatch", "These fields differ from the values stored with the thread: %s. Send the stored values, or replay the full conversation with thread type \"create\" to change them.", strings.Join(fields, ", "))
}

// sameJSON compares two JSON values ignoring insignificant whitespace.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// finish holds the answered turn under the reply's id: the API holds the
// whole reply or none of it, so only a reply sent in full is finished.
func (t *threadTurn) finish(id string, reply json.RawMessage) {
	if t == nil {
		return
	}
	e := &threadEntry{parent: t.prev, model: t.model, system: t.system, tools: t.tools}
	e.added = append(append(e.added, t.sent...), reply)
	for _, m := range e.added {
		e.size += len(m)
	}
	if t.prev == nil {
		// A continue shares its thread's system prompt and tools.
		e.size += len(e.system)
		for _, tool := range e.tools {
			e.size += len(tool)
		}
	}
	st := t.store
	st.mu.Lock()
	defer st.mu.Unlock()
	if t.prev != nil {
		t.prev.inFlight, t.prev.continued = false, true
	}
	st.byID[id] = e
	st.order = append(st.order, id)
	st.holdLocked(e)
	for len(st.order) > 0 && (len(st.order) > maxThreads || st.bytes > st.maxBytes) {
		old := st.order[0]
		st.order = st.order[1:]
		st.releaseLocked(st.byID[old])
		delete(st.byID, old)
	}
}

// holdLocked adds a reference to e, and with the first the bytes it holds
// and its reference to its parent (which a long flight may have seen
// dropped from the store meanwhile). The caller holds st.mu.
func (st *threadStore) holdLocked(e *threadEntry) {
	for ; e != nil; e = e.parent {
		e.refs++
		if e.refs > 1 {
			return
		}
		st.bytes += e.size
	}
}

// releaseLocked drops one reference to e, and with the last the bytes it
// held, then its reference to its parent. The caller holds st.mu.
func (st *threadStore) releaseLocked(e *threadEntry) {
	for ; e != nil; e = e.parent {
		e.refs--
		if e.refs > 0 {
			return
		}
		st.bytes -= e.size
	}
}

// abandon ends a turn that was not answered: its previous response can be
// continued again.
func (t *threadTurn) abandon() {
	if t == nil || t.prev == nil {
		return
	}
	t.store.mu.Lock()
	t.prev.inFlight = false
	t.store.mu.Unlock()
}
