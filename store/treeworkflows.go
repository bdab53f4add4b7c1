package store

import (
	"context"
	"fmt"
)

// TreeWorkflows is what DeleteTree(id) would report as Deleted.Workflows,
// after the same checks (ErrNotFound, *ActiveError), deleting nothing.
// deputy rm deletes the engine's records of these runs before the
// instances: if that fails, the instances are still there to retry on,
// where the other order would leave the engine's rows with nothing left
// to find them by.
func (s *Store) TreeWorkflows(ctx context.Context, id string) ([]string, error) {
	var wfs []string
	err := s.tx(ctx, func(q querier) error {
		sub, err := lockSubtree(ctx, q, id)
		if err != nil {
			return err
		}
		wfs, err = workflowsOf(ctx, q, sub)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the runs of %s: %w", id, err)
	}
	return wfs, nil
}
