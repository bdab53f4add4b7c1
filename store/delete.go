package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deputy-run/deputy/instance"
)

// ErrActive is in DeleteTree's error when an instance it would delete, or
// the parent of the one named, has not ended: deleting a live instance
// would pull its rows from under the process running it.
var ErrActive = errors.New("has not ended")

// ActiveError says which instance stands in the way of a delete, and how.
type ActiveError struct {
	ID    string         // the instance that has not ended
	State instance.State // its state
	// Parent is set when ID is the parent of the instance to delete: a
	// live parent still reads its children's records (their relays).
	Parent bool
}

func (e *ActiveError) Error() string {
	if e.Parent {
		return fmt.Sprintf("its parent %s %s: %s (a live parent still reads its subagents' results)", e.ID, ErrActive, e.State)
	}
	return fmt.Sprintf("%s %s: it is %s", e.ID, ErrActive, e.State)
}

func (e *ActiveError) Unwrap() error { return ErrActive }

// Deleted is what DeleteTree removed.
type Deleted struct {
	// Instances are the ids deleted, the named one first, parents before
	// their children.
	Instances []string
	// Workflows are the durable workflow ids their runs were carried by:
	// the engine's own rows of them are its to delete (DBOS keeps them in
	// its tables, not deputy's).
	Workflows []string
	// Rows counts the rows deleted over every table.
	Rows int64
}

// instanceTables are the tables whose rows belong to one instance, by its
// instance_id column: everything DeleteTree deletes besides the instances'
// own rows. storetest's delete test fails when a table with an
// instance_id column is missing here.
var instanceTables = []string{
	"deputy_transitions", "deputy_runs", "deputy_messages", "deputy_compactions",
	"deputy_attempts", "deputy_mailbox", "deputy_events",
}

// deleteChunk bounds the ids bound in one statement: far below either
// dialect's limit on parameters, and a tree of a thousand children stays
// a handful of statements per table.
const deleteChunk = 500

// treeRow is one instance of a tree as DeleteTree reads it.
type treeRow struct {
	id, parent, workflow string
	state                instance.State
	depth                int
}

// DeleteTree deletes instance id and every instance under it, with every
// row of theirs (transitions, runs, transcripts, compactions, attempts,
// mailbox, events), in one transaction: all of it or nothing. Every one of
// them must have ended, and so must id's parent, if it has one; otherwise
// it is an *ActiveError (errors.Is ErrActive) and nothing is deleted. An
// unknown id is ErrNotFound.
func (s *Store) DeleteTree(ctx context.Context, id string) (Deleted, error) {
	var d Deleted
	err := s.tx(ctx, func(q querier) error {
		sub, err := lockSubtree(ctx, q, id)
		if err != nil {
			return err
		}
		if d.Workflows, err = workflowsOf(ctx, q, sub); err != nil {
			return err
		}
		d.Instances = make([]string, len(sub))
		for i, r := range sub {
			d.Instances[i] = r.id
		}
		d.Rows, err = deleteRows(ctx, q, sub)
		return err
	})
	if err != nil {
		return Deleted{}, fmt.Errorf("delete %s: %w", id, err)
	}
	return d, nil
}

// lockSubtree reads and locks (on Postgres; SQLite's transaction holds the
// write lock already) the tree id belongs to, and returns id's subtree,
// parents first, once it has checked that all of it and id's parent have
// ended. The tree is read whole, by its root: a subtree is a walk over it,
// with no recursive query to write twice.
func lockSubtree(ctx context.Context, q querier, id string) ([]treeRow, error) {
	var root string
	err := q.row(ctx, `SELECT root FROM deputy_instances WHERE id = ?`, id).Scan(&root)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	} else if err != nil {
		return nil, fmt.Errorf("read instance: %w", err)
	}
	rows, err := q.query(ctx, `SELECT id, parent, workflow_id, state, depth FROM deputy_instances
		WHERE root = ? ORDER BY depth, created_at, id`+q.forUpdate(), root)
	if err != nil {
		return nil, fmt.Errorf("read the tree of %s: %w", root, err)
	}
	defer rows.Close()
	byID := map[string]treeRow{}
	kids := map[string][]string{}
	for rows.Next() {
		var r treeRow
		var parent sql.NullString
		if err := rows.Scan(&r.id, &parent, &r.workflow, &r.state, &r.depth); err != nil {
			return nil, fmt.Errorf("read the tree of %s: %w", root, err)
		}
		r.parent = parent.String
		byID[r.id] = r
		kids[r.parent] = append(kids[r.parent], r.id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the tree of %s: %w", root, err)
	}
	if p, ok := byID[byID[id].parent]; ok && !p.state.Terminal() {
		return nil, &ActiveError{ID: p.id, State: p.state, Parent: true}
	}
	// Breadth first from id: parents come before their children.
	sub := []treeRow{byID[id]}
	for i := 0; i < len(sub); i++ {
		if !sub[i].state.Terminal() {
			return nil, &ActiveError{ID: sub[i].id, State: sub[i].state}
		}
		for _, k := range kids[sub[i].id] {
			sub = append(sub, byID[k])
		}
	}
	return sub, nil
}

// workflowsOf lists the workflow ids that carried the runs of sub: each
// run's, and the instance's own (set before its first run is recorded).
func workflowsOf(ctx context.Context, q querier, sub []treeRow) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(wf string) {
		if wf != "" && !seen[wf] {
			seen[wf] = true
			out = append(out, wf)
		}
	}
	for _, r := range sub {
		add(r.workflow)
	}
	err := inChunks(sub, func(ids []any, marks string) error {
		rows, err := q.query(ctx, `SELECT workflow_id FROM deputy_runs WHERE workflow_id IS NOT NULL
			AND instance_id IN (`+marks+`) ORDER BY instance_id, n`, ids...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var wf string
			if err := rows.Scan(&wf); err != nil {
				return err
			}
			add(wf)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read the runs' workflows: %w", err)
	}
	return out, nil
}

// deleteRows deletes every row of sub's instances: their tables' first,
// then the instances, children before parents (the parent column is a
// foreign key).
func deleteRows(ctx context.Context, q querier, sub []treeRow) (int64, error) {
	var n int64
	exec := func(table, column string, rows []treeRow) error {
		return inChunks(rows, func(ids []any, marks string) error {
			res, err := q.exec(ctx, `DELETE FROM `+table+` WHERE `+column+` IN (`+marks+`)`, ids...)
			if err != nil {
				return fmt.Errorf("delete from %s: %w", table, err)
			}
			k, err := res.RowsAffected()
			n += k
			return err
		})
	}
	for _, t := range instanceTables {
		if err := exec(t, "instance_id", sub); err != nil {
			return 0, err
		}
	}
	deepest := slices.Clone(sub)
	slices.SortStableFunc(deepest, func(a, b treeRow) int { return b.depth - a.depth })
	if err := exec("deputy_instances", "id", deepest); err != nil {
		return 0, err
	}
	return n, nil
}

// inChunks calls fn with the ids of rows, deleteChunk at a time, and the
// placeholders that bind them.
func inChunks(rows []treeRow, fn func(ids []any, marks string) error) error {
	for len(rows) > 0 {
		k := min(len(rows), deleteChunk)
		ids := make([]any, k)
		for i, r := range rows[:k] {
			ids[i] = r.id
		}
		if err := fn(ids, strings.TrimSuffix(strings.Repeat("?, ", k), ", ")); err != nil {
			return err
		}
		rows = rows[k:]
	}
	return nil
}

// EndedTree is a tree of instances every one of which has ended.
type EndedTree struct {
	Root      string
	Instances int       // in the tree, the root included
	EndedAt   time.Time // when its last instance ended
}

// EndedTrees lists the trees whose instances have all ended, the last of
// them before before, oldest first: what a prune deletes (DeleteTree of
// each root).
func (s *Store) EndedTrees(ctx context.Context, before time.Time) ([]EndedTree, error) {
	active := []any{string(instance.Created), string(instance.Running), string(instance.Asking), string(instance.Paused)}
	rows, err := s.q().query(ctx, `SELECT root, COUNT(*), MAX(ended_at) FROM deputy_instances GROUP BY root
		HAVING SUM(CASE WHEN state IN (?, ?, ?, ?) OR ended_at IS NULL THEN 1 ELSE 0 END) = 0 AND MAX(ended_at) < ?
		ORDER BY MAX(ended_at), root`, append(active, before.UTC().UnixMicro())...)
	if err != nil {
		return nil, fmt.Errorf("list ended trees: %w", err)
	}
	defer rows.Close()
	var out []EndedTree
	for rows.Next() {
		var t EndedTree
		var ended int64
		if err := rows.Scan(&t.Root, &t.Instances, &ended); err != nil {
			return nil, fmt.Errorf("list ended trees: %w", err)
		}
		t.EndedAt = fromMicros(ended)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list ended trees: %w", err)
	}
	return out, nil
}
