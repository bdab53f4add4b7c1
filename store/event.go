package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// Event is one entry of an instance's event feed (what the dashboard and
// `deputy show` follow). IDs grow across all instances, so a reader resumes
// a feed from the last id it saw.
type Event struct {
	ID         int64           `json:"id"`
	InstanceID string          `json:"instance_id"`
	Kind       string          `json:"kind"`
	Data       json.RawMessage `json:"data,omitempty"`
	At         time.Time       `json:"at"`
}

// AppendEvent adds an event to instance id's feed and returns its id. data
// may be nil.
func (s *Store) AppendEvent(ctx context.Context, id, kind string, data json.RawMessage) (int64, error) {
	if kind == "" {
		return 0, fmt.Errorf("append event to %s: empty kind", id)
	}
	if len(data) > 0 && !json.Valid(data) {
		return 0, fmt.Errorf("append event %s to %s: data is not valid JSON", kind, id)
	}
	var eid int64
	err := s.tx(ctx, func(q querier) error {
		if err := exists(ctx, q, id); err != nil {
			return err
		}
		return q.row(ctx, `INSERT INTO deputy_events (instance_id, kind, data, at) VALUES (?, ?, ?, ?) RETURNING id`,
			id, kind, nullJSON(data), s.now().UnixMicro()).Scan(&eid)
	})
	if err != nil {
		return 0, fmt.Errorf("append event %s to %s: %w", kind, id, err)
	}
	return eid, nil
}

// Events lists the events after id `after` (0: from the start), oldest
// first, at most limit of them (0: all). Instance id "" reads the feed of
// every instance; an unknown instance is ErrNotFound.
func (s *Store) Events(ctx context.Context, id string, after int64, limit int) ([]Event, error) {
	query, args := `SELECT id, instance_id, kind, data, at FROM deputy_events WHERE id > ?`, []any{after}
	if id != "" {
		query, args = query+` AND instance_id = ?`, append(args, id)
	}
	query += ` ORDER BY id`
	if limit > 0 {
		query, args = query+` LIMIT ?`, append(args, limit)
	}
	rows, err := s.q().query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("events of %q: %w", id, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var data sql.NullString
		var at int64
		if err := rows.Scan(&e.ID, &e.InstanceID, &e.Kind, &data, &at); err != nil {
			return nil, fmt.Errorf("events of %q: %w", id, err)
		}
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		e.At = fromMicros(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events of %q: %w", id, err)
	}
	if len(out) == 0 && id != "" {
		if err := exists(ctx, s.q(), id); err != nil {
			return nil, fmt.Errorf("events of %s: %w", id, err)
		}
	}
	return out, nil
}
