package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// A worker is one process running instances on this database, under its
// executor id (DBOS's name for a process's share of the work). While it
// lives it holds a lease and renews it; a lease that runs out means the
// worker is dead, and another claims it and takes its work over. The
// database decides who wins: a claim is one UPDATE, so two survivors that
// notice the same dead worker at once cannot both take it.
//
// Lease times come from the store's clock, like every time it records;
// workers on several machines need clocks that agree to well within the
// margin a worker keeps before its lease runs out (durable: a third of
// the lease).

// WorkerState is where a worker stands.
type WorkerState string

const (
	// WorkerLive holds a lease and takes work.
	WorkerLive WorkerState = "live"
	// WorkerDraining holds its lease but takes no new work: it is
	// finishing its running steps before it leaves.
	WorkerDraining WorkerState = "draining"
	// WorkerReleased left on purpose, its lease given back: its unfinished
	// work is claimable at once, without waiting for the lease to run out.
	WorkerReleased WorkerState = "released"
	// WorkerClaimed was claimed (its lease ran out, or it released it):
	// the worker ClaimedBy is taking its unfinished work over.
	WorkerClaimed WorkerState = "claimed"
	// WorkerGone was taken over: its work went to the worker ClaimedBy.
	WorkerGone WorkerState = "gone"
)

// Worker is one row of the workers table.
type Worker struct {
	ID      string `json:"id"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
	// State: live and draining workers hold a lease until LeaseUntil.
	State      WorkerState `json:"state"`
	StartedAt  time.Time   `json:"started_at"`
	RenewedAt  time.Time   `json:"renewed_at"`
	LeaseUntil time.Time   `json:"lease_until"`
	// Load is the runs it carried at its last renewal.
	Load      int       `json:"load"`
	ClaimedBy string    `json:"claimed_by,omitempty"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// ErrLeaseHeld is JoinWorkers' answer when a live worker holds the id's
// lease: another process runs under that executor id (or this one did,
// before a crash, and its lease has not run out yet).
var ErrLeaseHeld = errors.New("the executor id's lease is held")

// ErrLeaseLost is RenewLease's answer when the worker no longer holds its
// lease: it ran out and another worker claimed it, or it was released.
// The worker must stop at once: its work belongs to another now.
var ErrLeaseLost = errors.New("the lease was lost")

// JoinWorkers records w as live with a lease of ttl from now: a new
// executor id, or one whose last worker is gone, released, or let its
// lease run out (a process restarted under its own id; a claimer that has
// not yet come takes nothing then, since this worker recovers its own
// work). While a live worker's lease on the id lasts it is ErrLeaseHeld,
// with the time it ends.
func (s *Store) JoinWorkers(ctx context.Context, w Worker, ttl time.Duration) (heldUntil time.Time, err error) {
	if w.ID == "" || ttl <= 0 {
		return time.Time{}, errors.New("join workers: empty executor id or no lease")
	}
	now := s.now()
	var until int64
	err = s.tx(ctx, func(q querier) error {
		res, err := q.exec(ctx, `INSERT INTO deputy_workers (id, host, pid, version, state, started_at, renewed_at, lease_until)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, version = excluded.version,
				state = excluded.state, started_at = excluded.started_at, renewed_at = excluded.renewed_at,
				lease_until = excluded.lease_until, load = 0, claimed_by = '', ended_at = NULL
			WHERE deputy_workers.state NOT IN (?, ?) OR deputy_workers.lease_until < ?`,
			w.ID, w.Host, w.PID, w.Version, WorkerLive, now.UnixMicro(), now.UnixMicro(), now.Add(ttl).UnixMicro(),
			WorkerLive, WorkerDraining, now.UnixMicro())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err // inserted, or taken over from a worker no longer live
		}
		if err := q.row(ctx, `SELECT lease_until FROM deputy_workers WHERE id = ?`, w.ID).Scan(&until); err != nil {
			return err
		}
		return ErrLeaseHeld
	})
	if errors.Is(err, ErrLeaseHeld) {
		held := fromMicros(until)
		return held, fmt.Errorf("join workers as %s: %w until %s", w.ID, ErrLeaseHeld, held.Format(time.RFC3339))
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("join workers as %s: %w", w.ID, classify(s.dialect, s.busy, err))
	}
	return time.Time{}, nil
}

// RejoinWorkers is JoinWorkers for a worker whose predecessor under the
// same id is known dead (same host, its process gone): it takes the lease
// over at once if that predecessor (host, pid) still holds it, instead of
// waiting for it to run out. It is ErrLeaseHeld when another holds it.
func (s *Store) RejoinWorkers(ctx context.Context, w Worker, ttl time.Duration, deadPID int) error {
	now := s.now()
	res, err := s.q().exec(ctx, `UPDATE deputy_workers SET pid = ?, version = ?, state = ?, started_at = ?, renewed_at = ?,
			lease_until = ?, load = 0, claimed_by = '', ended_at = NULL
		WHERE id = ? AND host = ? AND pid = ? AND state IN (?, ?)`,
		w.PID, w.Version, WorkerLive, now.UnixMicro(), now.UnixMicro(), now.Add(ttl).UnixMicro(),
		w.ID, w.Host, deadPID, WorkerLive, WorkerDraining)
	if err != nil {
		return fmt.Errorf("rejoin workers as %s: %w", w.ID, classify(s.dialect, s.busy, err))
	}
	if unchanged(res) {
		return fmt.Errorf("rejoin workers as %s: %w", w.ID, ErrLeaseHeld)
	}
	return nil
}

// RenewLease extends worker id's lease to ttl from now and records its
// load. It is ErrLeaseLost when the worker no longer holds a lease.
func (s *Store) RenewLease(ctx context.Context, id string, ttl time.Duration, load int) error {
	now := s.now()
	res, err := s.q().exec(ctx, `UPDATE deputy_workers SET renewed_at = ?, lease_until = ?, load = ?
		WHERE id = ? AND state IN (?, ?) AND lease_until >= ?`,
		now.UnixMicro(), now.Add(ttl).UnixMicro(), load, id, WorkerLive, WorkerDraining, now.UnixMicro())
	if err != nil {
		return fmt.Errorf("renew the lease of %s: %w", id, classify(s.dialect, s.busy, err))
	}
	if unchanged(res) {
		// A lease that ran out is lost even when nobody claimed it yet: a
		// claimer may be about to, and must find the work unowned.
		return fmt.Errorf("renew the lease of %s: %w", id, ErrLeaseLost)
	}
	return nil
}

// DrainWorker marks worker id draining: it keeps its lease while it
// finishes, and `deputy workers` shows it leaving.
func (s *Store) DrainWorker(ctx context.Context, id string) error {
	return s.setWorker(ctx, id, "drain", `state = ?`, WorkerDraining)
}

// ReleaseLease gives worker id's lease back: its unfinished work is
// claimable at once. Call it only when the worker runs nothing more.
func (s *Store) ReleaseLease(ctx context.Context, id string) error {
	now := s.now().UnixMicro()
	return s.setWorker(ctx, id, "release", `state = ?, lease_until = ?, ended_at = ?`, WorkerReleased, now, now)
}

func (s *Store) setWorker(ctx context.Context, id, what, set string, args ...any) error {
	res, err := s.q().exec(ctx, `UPDATE deputy_workers SET `+set+` WHERE id = ? AND state IN (?, ?)`,
		append(args, id, WorkerLive, WorkerDraining)...)
	if err != nil {
		return fmt.Errorf("%s worker %s: %w", what, id, classify(s.dialect, s.busy, err))
	}
	if unchanged(res) {
		return fmt.Errorf("%s worker %s: %w", what, id, ErrLeaseLost)
	}
	return nil
}

// ClaimExpired claims, for worker by, every other worker whose lease ran
// out or was released, and returns the ids by now owes a takeover (then
// FinishTakeover): those it claims now, those it claimed before and did
// not finish (a restart under its id), and those whose claimer died
// before it finished. Each is claimed by one worker at a time: the claim
// is one UPDATE, and a row a live worker claimed is not claimed again.
func (s *Store) ClaimExpired(ctx context.Context, by string) ([]string, error) {
	now := s.now().UnixMicro()
	rows, err := s.q().query(ctx, `UPDATE deputy_workers SET state = ?, claimed_by = ?, ended_at = COALESCE(ended_at, ?)
		WHERE id <> ? AND (state = ?
			OR (state IN (?, ?) AND lease_until < ?)
			OR (state = ? AND (claimed_by = ? OR claimed_by NOT IN (
				SELECT id FROM deputy_workers WHERE state IN (?, ?) AND lease_until >= ?))))
		RETURNING id`,
		WorkerClaimed, by, now, by, WorkerReleased, WorkerLive, WorkerDraining, now,
		WorkerClaimed, by, WorkerLive, WorkerDraining, now)
	if err != nil {
		return nil, fmt.Errorf("claim expired leases: %w", classify(s.dialect, s.busy, err))
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("claim expired leases: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim expired leases: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// FinishTakeover records that worker by took dead's work over.
func (s *Store) FinishTakeover(ctx context.Context, dead, by string) error {
	res, err := s.q().exec(ctx, `UPDATE deputy_workers SET state = ? WHERE id = ? AND state = ? AND claimed_by = ?`,
		WorkerGone, dead, WorkerClaimed, by)
	if err != nil {
		return fmt.Errorf("finish the takeover of %s: %w", dead, classify(s.dialect, s.busy, err))
	}
	if unchanged(res) {
		return fmt.Errorf("finish the takeover of %s: %s does not hold its claim", dead, by)
	}
	return nil
}

// Workers lists the workers table, live ones first, then by id.
func (s *Store) Workers(ctx context.Context) ([]Worker, error) {
	rows, err := s.q().query(ctx, `SELECT id, host, pid, version, state, started_at, renewed_at, lease_until, load,
		claimed_by, ended_at FROM deputy_workers
		ORDER BY CASE state WHEN 'live' THEN 0 WHEN 'draining' THEN 1 WHEN 'claimed' THEN 2 ELSE 3 END, id`)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", classify(s.dialect, s.busy, err))
	}
	defer rows.Close()
	var out []Worker
	for rows.Next() {
		var w Worker
		var started, renewed, until int64
		var ended sql.NullInt64
		if err := rows.Scan(&w.ID, &w.Host, &w.PID, &w.Version, &w.State, &started, &renewed, &until, &w.Load,
			&w.ClaimedBy, &ended); err != nil {
			return nil, fmt.Errorf("workers: %w", err)
		}
		w.StartedAt, w.RenewedAt, w.LeaseUntil = fromMicros(started), fromMicros(renewed), fromMicros(until)
		if ended.Valid {
			w.EndedAt = fromMicros(ended.Int64)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	return out, nil
}

// unchanged reports whether a conditional UPDATE changed no row (its
// condition did not hold), or cannot say.
func unchanged(res sql.Result) bool {
	n, err := res.RowsAffected()
	return err != nil || n == 0
}
