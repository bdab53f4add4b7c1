package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Mail is a message waiting for an instance: an answer to its question, a
// note from its parent, a control request. Mail is consumed exactly once.
type Mail struct {
	ID         int64  `json:"id"` // set by Post; grows with each post
	InstanceID string `json:"instance_id"`
	Sender     string `json:"sender,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Body       string `json:"body,omitempty"`
	// Key, when set, makes Post idempotent: a second post with the same key
	// to the same instance returns the first one's id and stores nothing.
	// A sender that may repeat a post after a crash sets it.
	Key        string    `json:"key,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	ConsumedAt time.Time `json:"consumed_at,omitzero"` // zero while pending
}

// Post puts m in its instance's mailbox and returns its id. An unknown
// instance is ErrNotFound. A repeated post with the same Key and the same
// content returns the first post's id; the same Key with different content
// is ErrConflict.
func (s *Store) Post(ctx context.Context, m Mail) (int64, error) {
	var id int64
	err := s.tx(ctx, func(q querier) (err error) {
		id, err = s.post(ctx, q, m)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("post %s mail to %s: %w", m.Kind, m.InstanceID, err)
	}
	return id, nil
}

// post is Post inside the transaction of q.
func (s *Store) post(ctx context.Context, q querier, m Mail) (int64, error) {
	// Locking the instance row serialises posts to it, so two posts with
	// one key cannot both miss the check below.
	if _, err := lockState(ctx, q, m.InstanceID); err != nil {
		return 0, err
	}
	if m.Key != "" {
		var prev Mail
		err := q.row(ctx, `SELECT id, sender, kind, body FROM deputy_mailbox WHERE instance_id = ? AND dedup_key = ?`,
			m.InstanceID, m.Key).Scan(&prev.ID, &prev.Sender, &prev.Kind, &prev.Body)
		if err == nil {
			if prev.Sender != m.Sender || prev.Kind != m.Kind || prev.Body != m.Body {
				return 0, fmt.Errorf("%w: key %q was posted with different content", ErrConflict, m.Key)
			}
			return prev.ID, nil
		} else if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
	}
	var id int64
	err := q.row(ctx, `INSERT INTO deputy_mailbox (instance_id, sender, kind, body, dedup_key, created_at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
		m.InstanceID, m.Sender, m.Kind, m.Body, nullString(m.Key), s.now().UnixMicro()).Scan(&id)
	if err != nil {
		return 0, err
	}
	_, err = s.appendEvent(ctx, q, m.InstanceID, EventMail, map[string]any{"mail_id": id, "mail_kind": m.Kind,
		"sender": m.Sender, "body": cut(m.Body, EventBodyCut)})
	return id, err
}

// Pending lists instance id's unconsumed mail, oldest first.
func (s *Store) Pending(ctx context.Context, id string) ([]Mail, error) {
	rows, err := s.q().query(ctx, `SELECT id, sender, kind, body, dedup_key, created_at FROM deputy_mailbox
		WHERE instance_id = ? AND consumed_at IS NULL ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("pending mail of %s: %w", id, err)
	}
	defer rows.Close()
	var out []Mail
	for rows.Next() {
		m := Mail{InstanceID: id}
		var key sql.NullString
		var at int64
		if err := rows.Scan(&m.ID, &m.Sender, &m.Kind, &m.Body, &key, &at); err != nil {
			return nil, fmt.Errorf("pending mail of %s: %w", id, err)
		}
		m.Key, m.CreatedAt = key.String, fromMicros(at)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending mail of %s: %w", id, err)
	}
	if len(out) == 0 {
		if err := exists(ctx, s.q(), id); err != nil {
			return nil, fmt.Errorf("pending mail of %s: %w", id, err)
		}
	}
	return out, nil
}

// Consume marks mail mailID consumed. Exactly one call succeeds for a given
// mail: a later one is ErrAlreadyConsumed, an unknown id ErrNotFound.
func (s *Store) Consume(ctx context.Context, mailID int64) error {
	res, err := s.q().exec(ctx, `UPDATE deputy_mailbox SET consumed_at = ? WHERE id = ? AND consumed_at IS NULL`,
		s.now().UnixMicro(), mailID)
	if err != nil {
		return fmt.Errorf("consume mail %d: %w", mailID, classify(s.dialect, s.busy, err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("consume mail %d: %w", mailID, err)
	} else if n == 1 {
		return nil
	}
	var one int
	err = s.q().row(ctx, `SELECT 1 FROM deputy_mailbox WHERE id = ?`, mailID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("consume mail %d: %w", mailID, ErrNotFound)
	case err != nil:
		return fmt.Errorf("consume mail %d: %w", mailID, err)
	}
	return fmt.Errorf("consume mail %d: %w", mailID, ErrAlreadyConsumed)
}
