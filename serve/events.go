package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/clock"
)

// A stream's scope: every event, one instance's, one tree's.
type scope int

const (
	scopeAll scope = iota
	scopeInstance
	scopeTree
)

// frame is one event ready to send: its SSE bytes are encoded once and
// shared by every subscriber.
type frame struct {
	id             int64
	instance, root string
	sse            []byte
}

// subBuffer is how many frames a subscriber may lag behind the hub before
// it is cut loose to read the store instead.
const subBuffer = 256

// subscriber is one open stream.
type subscriber struct {
	instance, root string // filter; empty: any
	ch             chan frame
}

func (s *subscriber) wants(f frame) bool {
	return (s.instance == "" || s.instance == f.instance) && (s.root == "" || s.root == f.root)
}

// hub follows the event feed, one reader per process however many streams
// are open, and hands each new event to the streams that want it. A stream
// that falls subBuffer frames behind loses its channel (closed) and catches
// up from the store, so a slow client costs the others nothing and still
// misses nothing.
type hub struct {
	rt    *deputy.Runtime
	clock clock.Clock
	poll  time.Duration
	log   *slog.Logger

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	last int64 // the newest event handed out
	shut bool  // closed: no more subscribers

	stop context.CancelFunc
	done chan struct{}
}

func newHub(rt *deputy.Runtime, c clock.Clock, poll time.Duration, log *slog.Logger) (*hub, error) {
	last, err := rt.LastEventID(context.Background())
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	h := &hub{rt: rt, clock: c, poll: poll, log: log, subs: map[*subscriber]struct{}{}, last: last, stop: stop,
		done: make(chan struct{})}
	go h.follow(ctx)
	return h, nil
}

func (h *hub) close() {
	h.stop()
	<-h.done
	h.mu.Lock()
	h.shut = true
	for s := range h.subs {
		close(s.ch)
		delete(h.subs, s)
	}
	h.mu.Unlock()
}

// follow reads the feed whenever an event is committed (this process's, and
// on Postgres any process's: Store.EventsWritten), and every poll interval
// for what it cannot hear of (SQLite's other processes, a listener
// reconnecting).
func (h *hub) follow(ctx context.Context) {
	defer close(h.done)
	failing := false
	for {
		written := h.rt.EventsWritten() // before the read: nothing slips between
		// A failed read is tried again at the next wake-up; the streams
		// lose nothing, they only wait. The log hears of the first
		// failure and of the recovery, not of every poll in between.
		switch err := h.read(ctx); {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			h.log.Error("serve: reading the event feed failed; streams wait until it reads again", "err", err)
		case err == nil && failing:
			failing = false
			h.log.Info("serve: the event feed reads again")
		}
		tick := make(chan struct{})
		t := h.clock.AfterFunc(h.poll, func() { close(tick) })
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-written:
		case <-tick:
		}
		t.Stop()
	}
}

// read hands out every event after the last one, in pages.
func (h *hub) read(ctx context.Context) error {
	for {
		evs, err := h.rt.Events(ctx, deputy.EventFilter{After: h.last, Limit: 500})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			h.publish(encode(ev))
		}
		if len(evs) < 500 {
			return nil
		}
	}
}

func (h *hub) publish(f frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = f.id
	for s := range h.subs {
		if !s.wants(f) {
			continue
		}
		select {
		case s.ch <- f:
		default: // too slow: it reads the store from where it is
			close(s.ch)
			delete(h.subs, s)
		}
	}
}

func (h *hub) subscribe(instance, root string) *subscriber {
	s := &subscriber{instance: instance, root: root, ch: make(chan frame, subBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shut {
		// A stream opened as the server closes ends at once rather than
		// waiting on a hub that hands out nothing more.
		close(s.ch)
		return s
	}
	h.subs[s] = struct{}{}
	return s
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
	h.mu.Unlock()
}

func (h *hub) head() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// encode renders an event as one SSE frame. The data is one line of JSON
// (no newline inside, so no frame splitting).
func encode(ev deputy.StoredEvent) frame {
	data, _ := json.Marshal(ev) // plain fields and raw JSON: cannot fail
	var b bytes.Buffer
	b.Grow(len(data) + 48)
	b.WriteString("id: ")
	b.WriteString(strconv.FormatInt(ev.ID, 10))
	b.WriteString("\nevent: ")
	b.WriteString(ev.Kind)
	b.WriteString("\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	return frame{id: ev.ID, instance: ev.InstanceID, root: ev.Root, sse: b.Bytes()}
}

// events serves one stream: from Last-Event-ID (or ?after) if given, from
// now otherwise.
func (s *Server) events(sc scope) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		instance, root, err := s.streamScope(r, sc)
		if err != nil {
			fail(w, err)
			return
		}
		after, resumed, err := resumeFrom(r)
		if err != nil {
			fail(w, err)
			return
		}
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		sub := s.hub.subscribe(instance, root)
		defer func() { s.hub.unsubscribe(sub) }()
		if !resumed {
			// From now: the client learns where now is, so its reconnect
			// resumes from here.
			after = s.hub.head()
			fmt.Fprintf(w, "id: %d\nevent: ready\ndata: {\"last_event_id\":%d}\n\n", after, after)
		} else {
			fmt.Fprintf(w, "event: ready\ndata: {\"last_event_id\":%d}\n\n", after)
		}
		if rc.Flush() != nil {
			return
		}
		st := stream{w: w, rc: rc, last: after}
		p := newPinger(s.o.Clock, s.o.Ping)
		defer p.stop()
		for {
			// What the store has beyond the last sent event: the backlog of
			// a resumed stream, or what a cut-loose stream missed.
			if err := st.catchUp(ctx, s.rt, instance, root); err != nil {
				return
			}
			if !st.live(ctx, sub, p.c, p.rearm) {
				return
			}
			// The hub cut this stream loose (too slow) or closed: read on
			// from the store with a new subscription, unless the server is
			// closing.
			if s.hub.closed() {
				return
			}
			sub = s.hub.subscribe(instance, root)
		}
	}
}

// streamScope is the instance or the tree a stream of scope sc follows
// (neither for every event's), each checked to exist first, so a wrong
// id is a 404 rather than a stream that stays silent; a tree's must be a
// root's.
func (s *Server) streamScope(r *http.Request, sc scope) (instance, root string, err error) {
	switch sc {
	case scopeInstance:
		instance = r.PathValue("id")
	case scopeTree:
		root = r.PathValue("id")
	}
	for _, id := range []string{instance, root} {
		if id == "" {
			continue
		}
		in, err := s.rt.Get(r.Context(), id)
		if err != nil {
			return "", "", err
		}
		if id == root && in.Parent != "" {
			return "", "", badRequest("%s is not a root: its tree's root is %s", id, in.Root)
		}
	}
	return instance, root, nil
}

// resumeFrom is the event a stream resumes after: Last-Event-ID, which a
// reconnecting EventSource sends, else ?after; resumed is false when
// neither is given.
func resumeFrom(r *http.Request) (after int64, resumed bool, err error) {
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, false, badRequest("event id %q is not a non-negative integer", v)
		}
		return n, true, nil
	}
	return 0, false, nil
}

// pinger wakes a stream every interval for a keep-alive comment, so that
// proxies and clients do not take a quiet stream for a dead one. Its
// timer is only touched by the stream's goroutine; c holds at most one
// wake-up.
type pinger struct {
	clock clock.Clock
	every time.Duration
	c     chan struct{}
	t     clock.Timer
}

func newPinger(c clock.Clock, every time.Duration) *pinger {
	p := &pinger{clock: c, every: every, c: make(chan struct{}, 1)}
	p.t = c.AfterFunc(every, p.fire)
	return p
}

func (p *pinger) fire() {
	select {
	case p.c <- struct{}{}:
	default:
	}
}

// rearm starts the interval again, after a ping was sent.
func (p *pinger) rearm() {
	p.t.Stop()
	p.t = p.clock.AfterFunc(p.every, p.fire)
}

func (p *pinger) stop() { p.t.Stop() }

func (h *hub) closed() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// stream writes one client's frames, skipping what it sent already.
type stream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	last int64
}

func (st *stream) catchUp(ctx context.Context, rt *deputy.Runtime, instance, root string) error {
	for {
		evs, err := rt.Events(ctx, deputy.EventFilter{Instance: instance, Root: root, After: st.last, Limit: 500})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if _, err := st.w.Write(encode(ev).sse); err != nil {
				return err
			}
			st.last = ev.ID
		}
		if err := st.rc.Flush(); err != nil {
			return err
		}
		if len(evs) < 500 {
			return nil
		}
	}
}

// live sends the hub's frames until the client leaves (false) or the
// subscription's channel closes (true: catch up and go on).
func (st *stream) live(ctx context.Context, sub *subscriber, ping <-chan struct{}, rearm func()) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-ping:
			if _, err := st.w.Write([]byte(": ping\n\n")); err != nil {
				return false
			}
			if st.rc.Flush() != nil {
				return false
			}
			rearm()
		case f, ok := <-sub.ch:
			if !ok {
				return true
			}
			// Send what is queued before flushing once: under load one
			// write per batch, not per event.
			for more := true; more; {
				if f.id > st.last {
					if _, err := st.w.Write(f.sse); err != nil {
						return false
					}
					st.last = f.id
				}
				select {
				case f, ok = <-sub.ch:
					more = ok
				default:
					more = false
				}
			}
			if st.rc.Flush() != nil {
				return false
			}
			if !ok {
				return true
			}
		}
	}
}
