package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
)

const instanceColumns = `id, parent, root, depth, type, definition, task, mode, model, state,
	stop_reason, incomplete, report, error, usage, cost, turns, tool_calls, artifacts, workflow_id,
	created_at, updated_at, ended_at`

// insertSeq is a new instance's created_seq (migration 5), per dialect.
// SQLite's writers take turns (BEGIN IMMEDIATE), so the next number after
// the largest is unique and follows the inserts' order. On Postgres two
// transactions would read the same largest number, so a sequence hands
// them out: in the order the inserts ran, which for parallel spawns is the
// order their creation reached the database.
var insertSeq = map[Dialect]string{
	SQLite:   `(SELECT COALESCE(MAX(created_seq), 0) + 1 FROM deputy_instances)`,
	Postgres: `nextval('deputy_instances_created_seq')`,
}

// CreateInstance records in as a new instance in state created, filling in
// Root, Depth, State and the times. Creating the same id again with the same
// identity is not an error (the runtime may repeat the write after a crash):
// in is then filled with the stored instance. The same id with a different
// identity is ErrConflict; a parent that does not exist is ErrNotFound.
func (s *Store) CreateInstance(ctx context.Context, in *instance.Record) error {
	if err := checkNew(in); err != nil {
		return err
	}
	var stored *instance.Record
	err := s.tx(ctx, func(q querier) error {
		var err error
		stored, _, err = s.create(ctx, q, in, map[string]lineage{})
		return err
	})
	if err != nil {
		return fmt.Errorf("create instance %s: %w", in.ID, err)
	}
	*in = *stored
	return nil
}

// Listed is an instance to create with its first messages
// (CreateInstances).
type Listed struct {
	Instance *instance.Record
	Messages []llm.Message
}

// CreateInstances creates every instance of list as CreateInstance would,
// with its first messages as AppendMessages(id, 0, 0, msgs) would, all in
// one transaction: a fan-out's children are listed by one commit, not two
// per child, and a crash leaves all of them or none. The same list again
// (a replay) is a no-op; an instance that exists with a different identity
// or first messages is ErrConflict, and then nothing is created. Each
// Instance is filled in as CreateInstance fills in.
func (s *Store) CreateInstances(ctx context.Context, list []Listed) error {
	contents := make([][]string, len(list))
	for i, l := range list {
		if err := checkNew(l.Instance); err != nil {
			return err
		}
		c, err := encodeAppend(l.Instance.ID, 0, l.Messages, nil)
		if err != nil {
			return err
		}
		contents[i] = c
	}
	stored := make([]*instance.Record, len(list))
	err := s.tx(ctx, func(q querier) error {
		parents := map[string]lineage{}
		for i, l := range list {
			in, created, err := s.create(ctx, q, l.Instance, parents)
			if err != nil {
				return fmt.Errorf("create instance %s: %w", l.Instance.ID, err)
			}
			stored[i] = in
			next := 0
			if !created {
				// Recorded before (a replay): what is stored must match.
				if next, err = checkAppend(ctx, q, in.ID, 0, 0, contents[i]); err != nil {
					return fmt.Errorf("first messages of %s: %w", in.ID, err)
				}
			}
			if err := insertMessages(ctx, q, in.ID, 0, next, 0, l.Messages, contents[i], in.CreatedAt.UnixMicro()); err != nil {
				return fmt.Errorf("first messages of %s: %w", in.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create %d instances: %w", len(list), err)
	}
	for i, l := range list {
		*l.Instance = *stored[i]
	}
	return nil
}

// checkNew refuses an instance to create that is wrong in itself.
func checkNew(in *instance.Record) error {
	if in.ID == "" {
		return errors.New("create instance: empty id")
	}
	if len(in.Definition) > 0 && !json.Valid(in.Definition) {
		return fmt.Errorf("create instance %s: definition is not valid JSON", in.ID)
	}
	if in.Parent == in.ID {
		return fmt.Errorf("create instance %s: it cannot be its own parent", in.ID)
	}
	return nil
}

// lineage is where a parent stands in its tree, as create reads it.
type lineage struct {
	root  string
	depth int
}

// create records in (see CreateInstance) inside transaction q and returns
// the stored record, and whether this call created it. parents caches the
// parents read so far in q: a fan-out's children share one.
func (s *Store) create(ctx context.Context, q querier, in *instance.Record, parents map[string]lineage) (*instance.Record, bool, error) {
	want := *in
	if want.Parent == "" {
		if want.Root != "" && want.Root != want.ID {
			return nil, false, fmt.Errorf("a root instance is its own root, not %s", want.Root)
		}
		if want.Depth != 0 {
			return nil, false, fmt.Errorf("a root instance has depth 0, not %d", want.Depth)
		}
		want.Root = want.ID
	} else {
		p, ok := parents[want.Parent]
		if !ok {
			err := q.row(ctx, `SELECT root, depth FROM deputy_instances WHERE id = ?`, want.Parent).Scan(&p.root, &p.depth)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, false, fmt.Errorf("parent %s: %w", want.Parent, ErrNotFound)
			} else if err != nil {
				return nil, false, fmt.Errorf("read parent %s: %w", want.Parent, err)
			}
			parents[want.Parent] = p
		}
		if want.Root == "" {
			want.Root = p.root
		} else if want.Root != p.root {
			return nil, false, fmt.Errorf("root %s differs from its parent's root %s", want.Root, p.root)
		}
		if want.Depth == 0 {
			want.Depth = p.depth + 1
		} else if want.Depth != p.depth+1 {
			return nil, false, fmt.Errorf("depth %d is not its parent's depth + 1 (%d)", want.Depth, p.depth+1)
		}
	}
	now := s.now()
	res, err := q.exec(ctx, `INSERT INTO deputy_instances
		(id, parent, root, depth, type, definition, task, mode, model, state, usage, created_at, updated_at, created_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, `+insertSeq[s.dialect]+`)
		ON CONFLICT (id) DO NOTHING`,
		want.ID, nullString(want.Parent), want.Root, want.Depth, want.Type, nullJSON(want.Definition),
		want.Task, want.Mode, want.Model, string(instance.Created), usageJSON(llm.Usage{}), now.UnixMicro(), now.UnixMicro())
	if err != nil {
		return nil, false, fmt.Errorf("insert: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, false, fmt.Errorf("insert: %w", err)
	}
	created := n == 1
	if created {
		_, err := q.exec(ctx, `INSERT INTO deputy_transitions (instance_id, seq, from_state, to_state, cause, at)
			VALUES (?, 1, '', ?, 'create', ?)`, want.ID, string(instance.Created), now.UnixMicro())
		if err != nil {
			return nil, false, fmt.Errorf("record creation: %w", err)
		}
		ev := map[string]any{"from": "", "to": instance.Created, "cause": "create", "type": want.Type,
			"model": want.Model, "mode": want.Mode, "depth": want.Depth}
		if _, err := s.appendEvent(ctx, q, want.ID, EventState, ev); err != nil {
			return nil, false, err
		}
		// The row as just inserted: no read needed to return it.
		rec := &instance.Record{ID: want.ID, Parent: want.Parent, Root: want.Root, Depth: want.Depth, Type: want.Type,
			Task: want.Task, Mode: want.Mode, Model: want.Model, State: instance.Created, CreatedAt: now, UpdatedAt: now}
		if len(want.Definition) > 0 {
			rec.Definition = json.RawMessage(string(want.Definition))
		}
		return rec, true, nil
	}
	stored, err := getInstance(ctx, q, want.ID)
	if err != nil {
		return nil, false, err
	}
	if diff := identityDiff(&want, stored); diff != "" {
		return nil, false, fmt.Errorf("%w: it exists with a different %s", ErrConflict, diff)
	}
	return stored, created, nil
}

// identityDiff names the first identity field in which a and b differ.
func identityDiff(a, b *instance.Record) string {
	switch {
	case a.Parent != b.Parent:
		return "parent"
	case a.Root != b.Root:
		return "root"
	case a.Depth != b.Depth:
		return "depth"
	case a.Type != b.Type:
		return "type"
	case !bytes.Equal(a.Definition, b.Definition):
		return "definition"
	case a.Task != b.Task:
		return "task"
	case a.Mode != b.Mode:
		return "mode"
	case a.Model != b.Model:
		return "model"
	}
	return ""
}

// GetInstance reads one instance; an unknown id is ErrNotFound.
func (s *Store) GetInstance(ctx context.Context, id string) (*instance.Record, error) {
	in, err := getInstance(ctx, s.q(), id)
	if err != nil {
		return nil, fmt.Errorf("get instance %s: %w", id, err)
	}
	return in, nil
}

func getInstance(ctx context.Context, q querier, id string) (*instance.Record, error) {
	in, err := scanInstance(q.row(ctx, `SELECT `+instanceColumns+` FROM deputy_instances WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return in, err
}

// Filter selects instances for ListInstances. Zero fields select all.
type Filter struct {
	Root      string           // in this tree (root included)
	Parent    string           // children of this instance
	OnlyRoots bool             // roots only (no parent)
	States    []instance.State // in one of these states
	Active    bool             // in an active (non-terminal) state
	Limit     int              // at most this many; 0: no limit
}

// ListInstances lists the instances f selects, oldest first (ties by id).
func (s *Store) ListInstances(ctx context.Context, f Filter) ([]*instance.Record, error) {
	var where []string
	var args []any
	if f.Root != "" {
		where, args = append(where, "root = ?"), append(args, f.Root)
	}
	if f.Parent != "" {
		where, args = append(where, "parent = ?"), append(args, f.Parent)
	}
	if f.OnlyRoots {
		where = append(where, "parent IS NULL")
	}
	inStates := func(states []instance.State) {
		marks := make([]string, len(states))
		for i, st := range states {
			marks[i] = "?"
			args = append(args, string(st))
		}
		where = append(where, "state IN ("+strings.Join(marks, ", ")+")")
	}
	if len(f.States) > 0 {
		inStates(f.States)
	}
	if f.Active {
		inStates([]instance.State{instance.Created, instance.Running, instance.Asking, instance.Paused})
	}
	query := `SELECT ` + instanceColumns + ` FROM deputy_instances`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY created_seq, id"
	if f.Limit > 0 {
		query += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.q().query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	defer rows.Close()
	var out []*instance.Record
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("list instances: %w", err)
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return out, nil
}

// UpdateProgress sets an active instance's running totals (absolute values,
// so a repeated write is harmless). An ended instance is ErrTerminal.
//
// It writes a "progress" event with the totals in the same transaction.
func (s *Store) UpdateProgress(ctx context.Context, id string, turns, toolCalls int, usage llm.Usage, cost *float64) error {
	err := s.tx(ctx, func(q querier) error {
		err := s.updateActive(ctx, q, id, `turns = ?, tool_calls = ?, usage = ?, tokens = ?, cost = ?`,
			turns, toolCalls, usageJSON(usage), usage.Total(), nullFloat(cost))
		if err != nil {
			return err
		}
		ev := map[string]any{"turns": turns, "tool_calls": toolCalls, "usage": usage}
		if cost != nil {
			ev["cost"] = *cost
		}
		_, err = s.appendEvent(ctx, q, id, EventProgress, ev)
		return err
	})
	if err != nil {
		return fmt.Errorf("update progress of %s: %w", id, err)
	}
	return nil
}

// Progress is an instance's running totals while a run goes on
// (AppendWith writes them).
type Progress struct {
	Turns, ToolCalls int
	Usage            llm.Usage
	Cost             *float64 // nil: unpriced
}

// setProgress writes an active instance's running totals and a "progress"
// event with them, inside transaction q, which holds the instance's row:
// what a live view shows while a run goes on. The totals a run leaves when
// it waits or ends (UpdateProgress, Finish) replace them.
func (s *Store) setProgress(ctx context.Context, q querier, id string, p Progress) error {
	if err := s.updateActive(ctx, q, id, `turns = ?, tool_calls = ?, usage = ?, tokens = ?, cost = ?`,
		p.Turns, p.ToolCalls, usageJSON(p.Usage), p.Usage.Total(), nullFloat(p.Cost)); err != nil {
		return err
	}
	ev := map[string]any{"turns": p.Turns, "tool_calls": p.ToolCalls, "usage": p.Usage}
	if p.Cost != nil {
		ev["cost"] = *p.Cost
	}
	_, err := s.appendEvent(ctx, q, id, EventProgress, ev)
	return err
}

// SetWorkflow records the durable workflow carrying an active instance.
func (s *Store) SetWorkflow(ctx context.Context, id, workflowID string) error {
	if err := s.updateActive(ctx, s.q(), id, `workflow_id = ?`, workflowID); err != nil {
		return fmt.Errorf("set workflow of %s: %w", id, err)
	}
	return nil
}

// updateActive sets columns of an instance that has not ended, and its
// updated_at.
func (s *Store) updateActive(ctx context.Context, q querier, id, set string, args ...any) error {
	args = append(args, s.now().UnixMicro(), id, string(instance.Completed), string(instance.Failed), string(instance.TimedOut), string(instance.Cancelled))
	res, err := q.exec(ctx, `UPDATE deputy_instances SET `+set+`, updated_at = ?
		WHERE id = ? AND state NOT IN (?, ?, ?, ?)`, args...)
	if err != nil {
		return classify(s.dialect, s.busy, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 1 {
		return nil
	}
	var st instance.State
	err = q.row(ctx, `SELECT state FROM deputy_instances WHERE id = ?`, id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	} else if err != nil {
		return err
	}
	return fmt.Errorf("%w (%s)", instance.ErrTerminal, st)
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanInstance(r scanner) (*instance.Record, error) {
	var (
		in                instance.Record
		parent, def, arts sql.NullString
		usage             string
		cost              sql.NullFloat64
		created, updated  int64
		ended             sql.NullInt64
	)
	err := r.Scan(&in.ID, &parent, &in.Root, &in.Depth, &in.Type, &def, &in.Task, &in.Mode, &in.Model, &in.State,
		&in.StopReason, &in.Incomplete, &in.Report, &in.Error, &usage, &cost, &in.Turns, &in.ToolCalls, &arts,
		&in.WorkflowID, &created, &updated, &ended)
	if err != nil {
		return nil, err
	}
	in.Parent = parent.String
	if def.Valid {
		in.Definition = json.RawMessage(def.String)
	}
	if arts.Valid {
		// A list that does not decode (a damaged row) leaves the record
		// readable, with the problem said (see package instance): the
		// instance's end must still reach its parent.
		if err := json.Unmarshal([]byte(arts.String), &in.Artifacts); err != nil {
			in.Artifacts = nil
			in.Problems = append(in.Problems, fmt.Sprintf("its artifacts (the files it wrote) could not be read: %v", err))
		}
	}
	if err := json.Unmarshal([]byte(usage), &in.Usage); err != nil {
		return nil, fmt.Errorf("instance %s: stored usage: %w", in.ID, err)
	}
	if cost.Valid {
		c := cost.Float64
		in.Cost = &c
	}
	in.CreatedAt, in.UpdatedAt = fromMicros(created), fromMicros(updated)
	if ended.Valid {
		in.EndedAt = fromMicros(ended.Int64)
	}
	return &in, nil
}

// The column encodings shared by the files of this package.

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// artifactsColumn encodes an artifact list (NULL when empty).
func artifactsColumn(paths []string) any {
	if len(paths) == 0 {
		return nil
	}
	b, _ := json.Marshal(paths) // strings: cannot fail
	return string(b)
}

func nullFloat(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

func usageJSON(u llm.Usage) string {
	b, _ := json.Marshal(u) // four integers: cannot fail
	return string(b)
}
