package main

import (
	"context"
	"errors"

	deputylib "github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/store"
)

// lockEngine is deputy.LockEngine in the CLI's words (busyErr): the
// controls probe with it whether a run or a worker holds the database.
func lockEngine(ctx context.Context, st *store.Store, url string) (release func(), err error) {
	release, err = deputylib.LockEngine(ctx, st, url)
	switch {
	case errors.Is(err, deputylib.ErrBusy):
		return nil, busyErr(url)
	case err != nil:
		return nil, usageErr("database %s: %v", dbName(url), err)
	}
	return release, nil
}
