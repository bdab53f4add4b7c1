// Package dbosclient makes deputy's DBOS contexts (always under the
// store's schema lock) and runs code on the kind that is never launched:
// a client of the engine's tables that enqueues runs for a worker or
// deletes a removed run's records, and may do so beside a live worker,
// since it recovers and dequeues nothing. The durable engine is its one
// user; what the context is configured with (its application, version,
// logger) is the engine's to say.
package dbosclient

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/store"
)

// New makes a DBOS context under the store's schema lock: DBOS creates
// and migrates its tables as it starts, and workers starting at once on a
// new Postgres database would race to ("duplicate key value violates
// unique constraint pg_namespace_nspname_index").
func New(ctx context.Context, st *store.Store, cfg dbos.Config) (dbos.Context, error) {
	var dctx dbos.Context
	err := st.SchemaLock(ctx, func() (err error) {
		dctx, err = dbos.NewContext(ctx, cfg)
		return err
	})
	return dctx, err
}

// With runs fn on a context of cfg that is never launched: it creates or
// migrates DBOS's tables (a DBOS client would refuse a database no engine
// has opened yet) but recovers and dequeues nothing, and is shut down when
// fn returns. On SQLite DBOS closes the handle it is given when it shuts
// down: with dbURL (the URL st was opened with) set it gets a handle of
// its own on the same file and st stays open.
func With(ctx context.Context, st *store.Store, dbURL string, cfg dbos.Config, fn func(dbos.Context) error) error {
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
	dctx, err := New(ctx, st, cfg)
	if err != nil {
		return fmt.Errorf("durable: connect to the engine's tables: %w", err)
	}
	defer dbos.Shutdown(dctx, 5*time.Second)
	return fn(dctx)
}

// Forget deletes DBOS's records of the workflows ids on one context of
// cfg (With), forgetChunk of them per delete; ids it has no record of are
// skipped.
func Forget(ctx context.Context, st *store.Store, dbURL string, cfg dbos.Config, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return With(ctx, st, dbURL, cfg, func(dctx dbos.Context) error {
		for chunk := range slices.Chunk(ids, forgetChunk) {
			if err := dbos.DeleteWorkflows(dctx, chunk); err != nil {
				return fmt.Errorf("durable: delete the engine's records of %d runs: %w", len(ids), err)
			}
		}
		return nil
	})
}

// forgetChunk bounds the ids of one DeleteWorkflows, which deletes them
// in one transaction (dbos-transact-golang v1.8.0, sysdb DeleteWorkflows):
// a prune of thousands of runs holds no long lock against a worker.
const forgetChunk = 500
