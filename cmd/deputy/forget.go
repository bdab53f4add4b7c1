package main

import (
	"context"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/store"
)

// forgetWorkflows deletes the durable engine's own records of the
// workflows wfs (durable.Forget), which deputy rm and prune delete with the
// instances whose runs they carried. url is where the store was opened, so
// on SQLite DBOS gets a handle of its own and st stays open.
func forgetWorkflows(ctx context.Context, st *store.Store, url string, wfs []string) error {
	return durable.Forget(ctx, st, url, wfs)
}
