package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Run is one durable execution that carries an instance from where it
// stands to its next suspension or its end. An instance that asks, pauses
// or waits ends its run; the answer or the resume starts the next one.
type Run struct {
	ID         int64     `json:"id"`
	InstanceID string    `json:"instance_id"`
	N          int       `json:"n"` // from 1 within the instance
	WorkflowID string    `json:"workflow_id,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at,omitzero"` // zero while it runs
	// Outcome says how the run ended, in the runtime's words ("suspended",
	// "completed", "failed", "interrupted"...); "" while it runs.
	Outcome string `json:"outcome,omitempty"`
}

// StartRun records a new run of an active instance, carried by the durable
// workflow workflowID. Starting a run for a workflow that already has one
// for this instance returns that run (a recovered workflow repeats the
// call); with workflowID "" every call starts a new run. An ended instance
// is ErrTerminal.
func (s *Store) StartRun(ctx context.Context, instanceID, workflowID string) (Run, error) {
	var r Run
	err := s.tx(ctx, func(q querier) error {
		st, err := lockState(ctx, q, instanceID)
		if err != nil {
			return err
		}
		if workflowID != "" {
			r, err = scanRun(q.row(ctx, `SELECT `+runColumns+` FROM deputy_runs WHERE instance_id = ? AND workflow_id = ?`,
				instanceID, workflowID))
			if err == nil || !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if st.Terminal() {
			return fmt.Errorf("%w (%s)", ErrTerminal, st)
		}
		now := s.now()
		r = Run{InstanceID: instanceID, WorkflowID: workflowID, StartedAt: now}
		return q.row(ctx, `INSERT INTO deputy_runs (instance_id, n, workflow_id, started_at)
			SELECT ?, COALESCE(MAX(n), 0) + 1, ?, ? FROM deputy_runs WHERE instance_id = ?
			RETURNING id, n`, instanceID, nullString(workflowID), now.UnixMicro(), instanceID).Scan(&r.ID, &r.N)
	})
	if err != nil {
		return Run{}, fmt.Errorf("start run of %s: %w", instanceID, err)
	}
	return r, nil
}

// EndRun records how run runID ended. Ending it again with the same outcome
// is a no-op; with another outcome it is ErrConflict; an unknown run is
// ErrNotFound.
func (s *Store) EndRun(ctx context.Context, runID int64, outcome string) error {
	if outcome == "" {
		return fmt.Errorf("end run %d: empty outcome", runID)
	}
	err := s.tx(ctx, func(q querier) error {
		var ended sql.NullInt64
		var prev string
		err := q.row(ctx, `SELECT ended_at, outcome FROM deputy_runs WHERE id = ?`+q.forUpdate(), runID).Scan(&ended, &prev)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		} else if err != nil {
			return err
		}
		if ended.Valid {
			if prev == outcome {
				return nil
			}
			return fmt.Errorf("%w: it ended %q", ErrConflict, prev)
		}
		_, err = q.exec(ctx, `UPDATE deputy_runs SET ended_at = ?, outcome = ? WHERE id = ?`, s.now().UnixMicro(), outcome, runID)
		return err
	})
	if err != nil {
		return fmt.Errorf("end run %d: %w", runID, err)
	}
	return nil
}

// Runs lists an instance's runs in order.
func (s *Store) Runs(ctx context.Context, instanceID string) ([]Run, error) {
	rows, err := s.q().query(ctx, `SELECT `+runColumns+` FROM deputy_runs WHERE instance_id = ? ORDER BY n`, instanceID)
	if err != nil {
		return nil, fmt.Errorf("runs of %s: %w", instanceID, err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("runs of %s: %w", instanceID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs of %s: %w", instanceID, err)
	}
	if len(out) == 0 {
		if err := exists(ctx, s.q(), instanceID); err != nil {
			return nil, fmt.Errorf("runs of %s: %w", instanceID, err)
		}
	}
	return out, nil
}

const runColumns = `id, instance_id, n, workflow_id, started_at, ended_at, outcome`

func scanRun(r scanner) (Run, error) {
	var run Run
	var wf sql.NullString
	var started int64
	var ended sql.NullInt64
	if err := r.Scan(&run.ID, &run.InstanceID, &run.N, &wf, &started, &ended, &run.Outcome); err != nil {
		return Run{}, err
	}
	run.WorkflowID, run.StartedAt = wf.String, fromMicros(started)
	if ended.Valid {
		run.EndedAt = fromMicros(ended.Int64)
	}
	return run, nil
}
