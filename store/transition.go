package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
)

// Transition is one recorded move of an instance's state. Seq numbers an
// instance's transitions from 1; the first is the creation, from "" to
// created.
type Transition struct {
	InstanceID string         `json:"instance_id"`
	Seq        int            `json:"seq"`
	From       instance.State `json:"from"`
	To         instance.State `json:"to"`
	Cause      string         `json:"cause,omitempty"`
	At         time.Time      `json:"at"`
}

// Transition moves instance id to state to and records why, atomically:
// of two callers racing from the same state, exactly one wins and the other
// gets a *TransitionError. A move the state machine does not allow is a
// *TransitionError (errors.Is ErrIllegalTransition) naming both states; an
// unknown id is ErrNotFound. A move to a terminal state also sets EndedAt;
// use Finish to record the result with it.
func (s *Store) Transition(ctx context.Context, id string, to instance.State, cause string) error {
	err := s.tx(ctx, func(q querier) error {
		from, err := lockState(ctx, q, id)
		if err != nil {
			return err
		}
		if err := instance.Move(id, from, to); err != nil {
			return err
		}
		now := s.now()
		set, args := `state = ?, updated_at = ?`, []any{string(to), now.UnixMicro()}
		if to.Terminal() {
			set, args = set+`, ended_at = ?`, append(args, now.UnixMicro())
		}
		return s.move(ctx, q, id, from, to, cause, now, set, args, nil)
	})
	if err != nil {
		return fmt.Errorf("transition %s to %s: %w", id, to, err)
	}
	return nil
}

// Result is how an instance ended, for Finish.
type Result struct {
	State instance.State // terminal
	// From, when set, makes Finish a compare-and-set: it ends the
	// instance only if it is in this state now, and is a *TransitionError
	// naming the state it found otherwise (a run may have started it
	// since the caller looked).
	From       instance.State
	Cause      string
	StopReason string
	Incomplete bool
	Report     string
	Error      string
	Usage      llm.Usage
	Cost       *float64 // nil: unpriced
	Turns      int
	ToolCalls  int
	Artifacts  []string
	// Tell, when set, makes the mail to post with the end, from the record
	// as it ended (its end time, its totals): Finish posts it (as Post) in
	// the end's transaction, so nobody reads the end without the mail. A
	// Finish that repeats an end recorded already posts nothing: that end
	// came with its own mail, or with none.
	Tell func(ended *instance.Record) Mail
}

// Finish ends instance id in r.State with its result, in one transaction:
// the state, the result fields, EndedAt, the transition record and r.Tell's
// mail are all written or none is. Finishing again with the same result is
// a no-op (the runtime may repeat it after a crash); an instance that
// already ended otherwise is a *TransitionError (errors.Is ErrTerminal).
func (s *Store) Finish(ctx context.Context, id string, r Result) error {
	if !r.State.Terminal() {
		return fmt.Errorf("finish %s: %w: %q is not a terminal state", id, instance.ErrIllegalTransition, string(r.State))
	}
	cause := r.Cause
	if cause == "" {
		cause = r.StopReason
	}
	err := s.tx(ctx, func(q querier) error {
		from, err := lockState(ctx, q, id)
		if err != nil {
			return err
		}
		if from == r.State {
			in, err := getInstance(ctx, q, id)
			if err != nil {
				return err
			}
			if sameResult(in, r) {
				return nil
			}
		}
		if !instance.CanMove(from, r.State) || r.From != "" && from != r.From {
			return &instance.TransitionError{ID: id, From: from, To: r.State}
		}
		now := s.now()
		set := `state = ?, updated_at = ?, ended_at = ?, stop_reason = ?, incomplete = ?, report = ?, error = ?,
			usage = ?, tokens = ?, cost = ?, turns = ?, tool_calls = ?, artifacts = ?`
		args := []any{string(r.State), now.UnixMicro(), now.UnixMicro(), r.StopReason, r.Incomplete, r.Report, r.Error,
			usageJSON(r.Usage), r.Usage.Total(), nullFloat(r.Cost), r.Turns, r.ToolCalls, artifactsColumn(r.Artifacts)}
		// The state event of an end carries the relay's facts, so a
		// follower needs no second read to show how it ended.
		ev := map[string]any{"stop_reason": r.StopReason, "report": cut(r.Report, EventReportCut),
			"usage": r.Usage, "turns": r.Turns, "tool_calls": r.ToolCalls}
		if r.Incomplete {
			ev["incomplete"] = true
		}
		if r.Error != "" {
			ev["error"] = r.Error
		}
		if r.Cost != nil {
			ev["cost"] = *r.Cost
		}
		if err := s.move(ctx, q, id, from, r.State, cause, now, set, args, ev); err != nil || r.Tell == nil {
			return err
		}
		ended, err := getInstance(ctx, q, id)
		if err != nil {
			return err
		}
		_, err = s.post(ctx, q, r.Tell(ended))
		return err
	})
	if err != nil {
		return fmt.Errorf("finish %s as %s: %w", id, r.State, err)
	}
	return nil
}

func sameResult(in *instance.Record, r Result) bool {
	return in.StopReason == r.StopReason && in.Incomplete == r.Incomplete && in.Report == r.Report &&
		in.Error == r.Error && in.Usage == r.Usage && in.Turns == r.Turns && in.ToolCalls == r.ToolCalls &&
		slices.Equal(in.Artifacts, r.Artifacts) &&
		(in.Cost == nil) == (r.Cost == nil) && (in.Cost == nil || *in.Cost == *r.Cost)
}

// lockState reads an instance's state and, on Postgres, locks its row until
// the transaction ends, so no other transition can slip in between.
func lockState(ctx context.Context, q querier, id string) (instance.State, error) {
	var st instance.State
	err := q.row(ctx, `SELECT state FROM deputy_instances WHERE id = ?`+q.forUpdate(), id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	} else if err != nil {
		return "", fmt.Errorf("read state: %w", err)
	}
	return st, nil
}

// move writes the new state (set/args, compare-and-set on from), the
// transition record and its state event (ev adds to the event's data).
func (s *Store) move(ctx context.Context, q querier, id string, from, to instance.State, cause string, now time.Time, set string, args []any, ev map[string]any) error {
	res, err := q.exec(ctx, `UPDATE deputy_instances SET `+set+` WHERE id = ? AND state = ?`, append(args, id, string(from))...)
	if err != nil {
		return fmt.Errorf("update state: %w", err)
	}
	// The row is locked, so this cannot miss; checked anyway, since two
	// winners would break the one promise this function makes.
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update state: %w", err)
	} else if n != 1 {
		return fmt.Errorf("state of %s changed under a locked transaction (%d rows)", id, n)
	}
	_, err = q.exec(ctx, `INSERT INTO deputy_transitions (instance_id, seq, from_state, to_state, cause, at)
		SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM deputy_transitions WHERE instance_id = ?`,
		id, string(from), string(to), cause, now.UnixMicro(), id)
	if err != nil {
		return fmt.Errorf("record transition: %w", err)
	}
	if ev == nil {
		ev = map[string]any{}
	}
	ev["from"], ev["to"] = from, to
	if cause != "" {
		ev["cause"] = cause
	}
	_, err = s.appendEvent(ctx, q, id, EventState, ev)
	return err
}

// Transitions lists an instance's recorded transitions in order.
func (s *Store) Transitions(ctx context.Context, id string) ([]Transition, error) {
	rows, err := s.q().query(ctx, `SELECT seq, from_state, to_state, cause, at FROM deputy_transitions
		WHERE instance_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("transitions of %s: %w", id, err)
	}
	defer rows.Close()
	var out []Transition
	for rows.Next() {
		t := Transition{InstanceID: id}
		var at int64
		if err := rows.Scan(&t.Seq, &t.From, &t.To, &t.Cause, &at); err != nil {
			return nil, fmt.Errorf("transitions of %s: %w", id, err)
		}
		t.At = fromMicros(at)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("transitions of %s: %w", id, err)
	}
	if len(out) == 0 {
		if err := exists(ctx, s.q(), id); err != nil {
			return nil, fmt.Errorf("transitions of %s: %w", id, err)
		}
	}
	return out, nil
}

// exists returns ErrNotFound for an unknown instance id, nil for a known
// one (or the error reading it). The list queries ask it when they find
// nothing, to tell an unknown instance from an empty list.
func exists(ctx context.Context, q querier, id string) error {
	var one int
	err := q.row(ctx, `SELECT 1 FROM deputy_instances WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}
