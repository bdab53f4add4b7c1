package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// TreeTotal is what a tree's instances have recorded spending, over all
// their runs: the sum of their tokens (llm.Usage.Total) and of their
// costs (unpriced instances count nothing).
type TreeTotal struct {
	Tokens int64
	USD    float64
}

// TreeSpent reads the running total of the tree under root (migration 6):
// one row, kept by the database in the transaction of every write of an
// instance's usage or cost, so it always equals the sum over the tree's
// instances. An unknown root is ErrNotFound.
func (s *Store) TreeSpent(ctx context.Context, root string) (TreeTotal, error) {
	var t TreeTotal
	err := s.q().row(ctx, `SELECT tokens, usd FROM deputy_tree_totals WHERE root = ?`, root).Scan(&t.Tokens, &t.USD)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return TreeTotal{}, fmt.Errorf("tree total of %s: %w", root, err)
	}
	return t, nil
}
