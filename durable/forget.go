package durable

import (
	"context"

	"github.com/deputy-run/deputy/durable/internal/dbosclient"
	"github.com/deputy-run/deputy/store"
)

// Forget deletes DBOS's own records of the workflows workflowIDs (status
// rows, inputs, outputs and every step's checkpointed output: copies of
// the model calls and tool results), skipping ids it never had. deputy rm
// and prune call it before deleting the instances (store.TreeWorkflows),
// so a failure leaves them to retry on. Like Enqueue it starts no engine;
// dbURL is the store's URL, so DBOS gets a handle of its own on SQLite.
func Forget(ctx context.Context, st *store.Store, dbURL string, workflowIDs []string) error {
	return dbosclient.Forget(ctx, st, dbURL, dbosConfig(discard), workflowIDs)
}
