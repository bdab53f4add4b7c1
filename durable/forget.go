package durable

import (
	"context"
	"fmt"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/store"
)

// Forget deletes DBOS's own records of the workflows workflowIDs: their
// status rows, inputs and outputs, and every step's checkpointed output
// (copies of the model calls and tool results). deputy rm and prune call it
// with store.Deleted.Workflows once the instances whose runs they were are
// deleted, so nothing of a removed run stays in the database. Like Enqueue
// it starts no engine (it recovers and runs nothing), so it may run beside
// a worker on the database. dbURL is the URL the store was opened with: on
// SQLite, without it, DBOS closes st's handle at its shutdown. IDs DBOS
// has no record of are skipped.
func Forget(ctx context.Context, st *store.Store, dbURL string, workflowIDs []string) error {
	if len(workflowIDs) == 0 {
		return nil
	}
	return withClient(ctx, st, dbURL, func(dctx dbos.Context) error {
		if err := dbos.DeleteWorkflows(dctx, workflowIDs); err != nil {
			return fmt.Errorf("durable: delete the engine's records of %d runs: %w", len(workflowIDs), err)
		}
		return nil
	})
}

// withClient runs fn on a DBOS context that is never launched: it creates
// or migrates DBOS's tables (under the schema lock, as every DBOS start of
// deputy's) but recovers and dequeues nothing, and is shut down when fn
// returns. On SQLite DBOS closes the handle it is given when it shuts down:
// with dbURL set it gets a handle of its own on the same file and st stays
// open.
func withClient(ctx context.Context, st *store.Store, dbURL string, fn func(dbos.Context) error) error {
	cfg := dbosConfig(discard)
	if st.Dialect() == store.SQLite {
		cfg.SQLiteSystemDB = st.DB()
		if dbURL != "" {
			peer, err := store.Open(ctx, dbURL, store.Options{})
			if err != nil {
				return fmt.Errorf("durable: a handle of DBOS's own: %w", err)
			}
			defer peer.Close()
			cfg.SQLiteSystemDB = peer.DB()
		}
	} else {
		cfg.DatabaseURL = dbURL
	}
	dctx, err := newDBOS(ctx, st, cfg)
	if err != nil {
		return fmt.Errorf("durable: reach the engine's records: %w", err)
	}
	defer dbos.Shutdown(dctx, 5*time.Second)
	return fn(dctx)
}
