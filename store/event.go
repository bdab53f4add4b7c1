package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"
)

// Event is one entry of the event feed: what the dashboard, the API's
// server-sent events and `deputy show` follow. IDs grow across all
// instances, so a reader resumes the feed from the last id it saw.
//
// The store writes the events of what it records itself, in the same
// transaction: a state change ("state"), an instance's totals after a model
// call ("progress"), a posted mail ("mail"). So an event is never lost when a
// process dies, and never announces what did not commit. Writers add their
// own kinds with an append (With.Events: the engine's "tool_call" and
// "tool_result", in the transaction of the message they come from) or
// alone, with AppendEvent.
type Event struct {
	ID         int64           `json:"id"`
	InstanceID string          `json:"instance"`
	Root       string          `json:"root"`
	Parent     string          `json:"parent,omitempty"`
	Kind       string          `json:"kind"`
	Data       json.RawMessage `json:"data,omitempty"`
	At         time.Time       `json:"at"`
}

// The kinds of events the store writes itself.
const (
	EventState    = "state"
	EventProgress = "progress"
	EventMail     = "mail"
)

// Cuts of long texts inside event data: an event announces, the instance's
// record and transcript hold the whole.
const (
	EventReportCut = 2000
	EventBodyCut   = 2000
)

// pgEventLock keys the transaction lock that orders event inserts on
// Postgres ("deputy events" in ASCII, cut to 63 bits). Identity values are
// handed out at insert, not at commit: without the lock, event 11 could
// commit before event 10, a reader that saw 11 would resume after it and
// never see 10. Holding the lock from the insert to the commit makes ids
// commit in order. The insert is the last statement of its transaction, so
// the lock is held for the commit alone.
//
// Deadlock rule: a transaction takes every row lock it needs before this
// lock, and none after it. The event's insert checks its foreign key,
// which takes a share lock on the instance's row, so that row must be
// locked by the transaction already (AppendEvent locks it first; the state
// changes, progress and mail lock it anyway). Otherwise a transaction
// holding the row (posting mail to it) and waiting for this lock, and one
// holding this lock and waiting for the row (an event of that instance),
// deadlock: seen in the crash tests before the rule.
const pgEventLock = 0x64657075747965

// AppendEvent adds an event of kind to instance id's feed and returns its
// id. data may be nil.
func (s *Store) AppendEvent(ctx context.Context, id, kind string, data json.RawMessage) (int64, error) {
	if err := checkEvent(kind, data); err != nil {
		return 0, fmt.Errorf("append event to %s: %w", id, err)
	}
	var eid int64
	err := s.tx(ctx, func(q querier) error {
		// The row lock comes first (see pgEventLock).
		if _, err := lockState(ctx, q, id); err != nil {
			return err
		}
		var err error
		eid, err = s.appendEvent(ctx, q, id, kind, data)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("append event %s to %s: %w", kind, id, err)
	}
	return eid, nil
}

// eventKind is what a kind may be: it is a line of the server-sent event
// stream (event: KIND), where a newline would forge frames.
var eventKind = regexp.MustCompile(`^[a-z][a-z_]{0,31}$`)

// checkEvent refuses an event the feed could not carry.
func checkEvent(kind string, data json.RawMessage) error {
	if !eventKind.MatchString(kind) {
		return fmt.Errorf("event kind %q is not lower-case letters and _ (at most 32)", kind)
	}
	if len(data) > 0 && !json.Valid(data) {
		return fmt.Errorf("event %s: data is not valid JSON", kind)
	}
	return nil
}

// appendEvent inserts an event inside transaction q; it must be the
// transaction's last write (see pgEventLock). data is raw JSON or a value
// to marshal.
func (s *Store) appendEvent(ctx context.Context, q querier, id, kind string, data any) (int64, error) {
	if q.events == nil {
		return 0, errors.New("an event is written inside a transaction")
	}
	var raw json.RawMessage
	switch d := data.(type) {
	case nil:
	case json.RawMessage:
		raw = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			return 0, fmt.Errorf("event data: %w", err)
		}
		raw = b
	}
	if q.d == Postgres {
		if _, err := q.exec(ctx, fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", pgEventLock)); err != nil {
			return 0, fmt.Errorf("take the event lock: %w", err)
		}
	}
	var eid int64
	err := q.row(ctx, `INSERT INTO deputy_events (instance_id, kind, data, at) VALUES (?, ?, ?, ?) RETURNING id`,
		id, kind, nullJSON(raw), s.now().UnixMicro()).Scan(&eid)
	if err != nil {
		return 0, fmt.Errorf("insert event: %w", err)
	}
	*q.events = true
	return eid, nil
}

// EventFilter selects events: all of them, one instance's, or one tree's.
type EventFilter struct {
	Instance string
	Root     string
	After    int64 // only events with a greater id
	Limit    int   // at most this many; 0: all
}

// Events lists the events after id `after` (0: from the start), oldest
// first, at most limit of them (0: all). Instance id "" reads the feed of
// every instance; an unknown instance is ErrNotFound.
func (s *Store) Events(ctx context.Context, id string, after int64, limit int) ([]Event, error) {
	return s.ListEvents(ctx, EventFilter{Instance: id, After: after, Limit: limit})
}

// ListEvents lists the events f selects, oldest first. A named instance or
// root that does not exist is ErrNotFound.
func (s *Store) ListEvents(ctx context.Context, f EventFilter) ([]Event, error) {
	query := `SELECT e.id, e.instance_id, i.root, i.parent, e.kind, e.data, e.at
		FROM deputy_events e JOIN deputy_instances i ON i.id = e.instance_id WHERE e.id > ?`
	args := []any{f.After}
	if f.Instance != "" {
		query, args = query+` AND e.instance_id = ?`, append(args, f.Instance)
	}
	if f.Root != "" {
		query, args = query+` AND i.root = ?`, append(args, f.Root)
	}
	query += ` ORDER BY e.id`
	if f.Limit > 0 {
		query, args = query+` LIMIT ?`, append(args, f.Limit)
	}
	what := "events"
	if f.Instance != "" {
		what += " of " + f.Instance
	} else if f.Root != "" {
		what += " of tree " + f.Root
	}
	rows, err := s.q().query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var parent, data sql.NullString
		var at int64
		if err := rows.Scan(&e.ID, &e.InstanceID, &e.Root, &parent, &e.Kind, &data, &at); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		e.Parent = parent.String
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		e.At = fromMicros(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(out) == 0 {
		for _, id := range []string{f.Instance, f.Root} {
			if id == "" {
				continue
			}
			if err := exists(ctx, s.q(), id); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
	}
	return out, nil
}

// LastEventID is the id of the newest event, 0 when there is none.
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	var id sql.NullInt64
	if err := s.q().row(ctx, `SELECT MAX(id) FROM deputy_events`).Scan(&id); err != nil {
		return 0, fmt.Errorf("last event id: %w", err)
	}
	return id.Int64, nil
}

// EventsWritten returns a channel that is closed when an event is next
// committed: by this process, and on Postgres by any process (the first
// call starts a listener: see listen.go). On SQLite another process's
// events are not signalled, and while the listener reconnects neither
// are they on Postgres: a reader that follows other processes also polls.
func (s *Store) EventsWritten() <-chan struct{} {
	if s.pgcfg != nil {
		s.listen.start(s)
	}
	s.evMu.Lock()
	defer s.evMu.Unlock()
	return s.evCh
}

// eventsCommitted wakes EventsWritten's waiters.
func (s *Store) eventsCommitted() {
	s.evMu.Lock()
	close(s.evCh)
	s.evCh = make(chan struct{})
	s.evMu.Unlock()
}

// cut bounds s to n runes for event data, marking the cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
