package main

import (
	"context"
	"errors"

	"github.com/deputy-run/deputy/internal/setup"
	"github.com/deputy-run/deputy/store"
)

// lockEngine is setup.LockEngine with the CLI's messages: `deputy run
// --detach` needs no engine, so it never waits on this, and is the way
// out when the database is busy.
func lockEngine(ctx context.Context, st *store.Store, url string) (release func(), err error) {
	release, err = setup.LockEngine(ctx, st, url)
	switch {
	case errors.Is(err, setup.ErrBusy):
		return nil, usageErr("another deputy process (a run or a worker) is running instances on %s; wait for it to end, "+
			"or queue this run with --detach for the worker", dbName(url))
	case err != nil:
		return nil, usageErr("database %s: %v", dbName(url), err)
	}
	return release, nil
}
