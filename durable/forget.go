package durable

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/store"
)

// Forget deletes DBOS's own records of the workflows workflowIDs: their
// status rows, inputs and outputs, and every step's checkpointed output
// (copies of the model calls and tool results); ids DBOS has no record of
// are skipped. deputy rm and prune call it before deleting the instances
// (store.TreeWorkflows), so a failure leaves them to retry on. Like Enqueue
// it starts no engine, so it may run beside a worker; dbURL is the URL the
// store was opened with (withClient). One DBOS context serves every id, a
// forgetChunk of them per delete.
func Forget(ctx context.Context, st *store.Store, dbURL string, workflowIDs []string) error {
	if len(workflowIDs) == 0 {
		return nil
	}
	return withClient(ctx, st, dbURL, func(dctx dbos.Context) error {
		for ids := range slices.Chunk(workflowIDs, forgetChunk) {
			if err := dbos.DeleteWorkflows(dctx, ids); err != nil {
				return fmt.Errorf("durable: delete the engine's records of %d runs: %w", len(workflowIDs), err)
			}
		}
		return nil
	})
}

// forgetChunk bounds the ids of one DeleteWorkflows, which deletes them
// in one transaction (dbos-transact-golang v1.8.0, sysdb DeleteWorkflows):
// a prune of thousands of runs holds no long lock against a worker.
const forgetChunk = 500

// withClient runs fn on a DBOS context that is never launched: it creates
// or migrates DBOS's tables (under the schema lock, as every DBOS start of
// deputy's; a DBOS client would refuse a database no engine has opened
// yet) but recovers and dequeues nothing, and is shut down when fn
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
		return fmt.Errorf("durable: connect to the engine's tables: %w", err)
	}
	defer dbos.Shutdown(dctx, 5*time.Second)
	return fn(dctx)
}
