package store

import (
	"context"
	"fmt"
	"time"

	"github.com/deputy-run/deputy/llm"
)

// Attempt is one recorded try of a model call. A turn's model call that
// was retried has several attempts; a turn re-run after a crash adds more,
// numbered on from the ones before, so N counts every try the turn took.
type Attempt struct {
	InstanceID string        `json:"instance_id"`
	Turn       int           `json:"turn"`
	N          int           `json:"n"` // from 1 within the turn, assigned by the store
	Provider   string        `json:"provider,omitempty"`
	Model      string        `json:"model,omitempty"`
	Status     int           `json:"status,omitempty"`
	RequestID  string        `json:"request_id,omitempty"`
	Reason     string        `json:"reason,omitempty"`
	Error      string        `json:"error,omitempty"`
	Retry      bool          `json:"retry,omitempty"`
	Discarded  bool          `json:"discarded,omitempty"`
	Wait       time.Duration `json:"wait,omitempty"`    // kept to the millisecond
	Latency    time.Duration `json:"latency,omitempty"` // kept to the millisecond
	At         time.Time     `json:"at"`
}

// RecordAttempt records a model-call attempt of instance id's turn and
// returns it as stored. a.N (the provider's count within one Generate call)
// is not kept: N is the store's count within the turn.
func (s *Store) RecordAttempt(ctx context.Context, id string, turn int, a llm.Attempt) (Attempt, error) {
	errText := a.Error
	if errText == "" && a.Err != nil {
		errText = a.Err.Error()
	}
	rec := Attempt{
		InstanceID: id, Turn: turn, Provider: a.Provider, Model: a.Model, Status: a.Status, RequestID: a.RequestID,
		Reason: a.Reason, Error: errText, Retry: a.Retry, Discarded: a.Discarded,
		Wait: a.Wait.Truncate(time.Millisecond), Latency: a.Latency.Truncate(time.Millisecond), At: s.now(),
	}
	err := s.tx(ctx, func(q querier) error {
		if _, err := lockState(ctx, q, id); err != nil {
			return err
		}
		return q.row(ctx, `INSERT INTO deputy_attempts (instance_id, turn, n, provider, model, status, request_id,
				reason, error, retry, discarded, wait_ms, latency_ms, at)
			SELECT ?, ?, COALESCE(MAX(n), 0) + 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
			FROM deputy_attempts WHERE instance_id = ? AND turn = ?
			RETURNING n`,
			id, turn, rec.Provider, rec.Model, rec.Status, rec.RequestID, rec.Reason, rec.Error, rec.Retry, rec.Discarded,
			rec.Wait.Milliseconds(), rec.Latency.Milliseconds(), rec.At.UnixMicro(), id, turn).Scan(&rec.N)
	})
	if err != nil {
		return Attempt{}, fmt.Errorf("record attempt of %s turn %d: %w", id, turn, err)
	}
	return rec, nil
}

// Attempts lists instance id's attempts by turn, then N.
func (s *Store) Attempts(ctx context.Context, id string) ([]Attempt, error) {
	rows, err := s.q().query(ctx, `SELECT turn, n, provider, model, status, request_id, reason, error, retry, discarded,
		wait_ms, latency_ms, at FROM deputy_attempts WHERE instance_id = ? ORDER BY turn, n`, id)
	if err != nil {
		return nil, fmt.Errorf("attempts of %s: %w", id, err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		a := Attempt{InstanceID: id}
		var wait, latency, at int64
		if err := rows.Scan(&a.Turn, &a.N, &a.Provider, &a.Model, &a.Status, &a.RequestID, &a.Reason, &a.Error,
			&a.Retry, &a.Discarded, &wait, &latency, &at); err != nil {
			return nil, fmt.Errorf("attempts of %s: %w", id, err)
		}
		a.Wait, a.Latency, a.At = time.Duration(wait)*time.Millisecond, time.Duration(latency)*time.Millisecond, fromMicros(at)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attempts of %s: %w", id, err)
	}
	if len(out) == 0 {
		if err := exists(ctx, s.q(), id); err != nil {
			return nil, fmt.Errorf("attempts of %s: %w", id, err)
		}
	}
	return out, nil
}
