package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/store"
)

// forgetWorkflows deletes the durable engine's own rows of the workflows
// wfs (DBOS's workflow status, its inputs and outputs, every step's
// checkpointed output: copies of the model calls and tool results), which
// deputy rm and prune delete with the instances whose runs they carried.
// It is done here, through DBOS's DeleteWorkflows, for want of a call in
// package durable that would do it; durable's Enqueue sets DBOS up the
// same way (a context never launched: it recovers and runs nothing, so it
// works beside a worker on the database).
func forgetWorkflows(ctx context.Context, st *store.Store, url string, wfs []string) error {
	if len(wfs) == 0 {
		return nil
	}
	cfg := dbos.Config{AppName: "deputy", ApplicationVersion: durable.AppVersion, Logger: slog.New(slog.DiscardHandler)}
	if st.Dialect() == store.SQLite {
		// DBOS closes the handle it is given at its shutdown: it gets one
		// of its own on the same file.
		peer, err := store.Open(ctx, url, store.Options{})
		if err != nil {
			return err
		}
		defer peer.Close()
		cfg.SQLiteSystemDB = peer.DB()
	} else {
		cfg.DatabaseURL = url
	}
	var dctx dbos.Context
	// Under the schema lock, as every DBOS start of deputy's: DBOS
	// migrates its tables as it starts.
	err := st.SchemaLock(ctx, func() (err error) {
		dctx, err = dbos.NewContext(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("reach the engine's records: %w", err)
	}
	defer dbos.Shutdown(dctx, 5*time.Second)
	if err := dbos.DeleteWorkflows(dctx, wfs); err != nil {
		return fmt.Errorf("delete the engine's records of %d runs: %w", len(wfs), err)
	}
	return nil
}
