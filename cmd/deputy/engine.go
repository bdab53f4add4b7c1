package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	deputylib "github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/internal/termui"
	"github.com/deputy-run/deputy/store"
)

// dbFlagHelp documents --db for every command that opens the store.
const dbFlagHelp = `database: a SQLite file or a postgres:// URL (default $DEPUTY_DB, else .deputy/deputy.db)`

// dbURL is --db, $DEPUTY_DB, or .deputy/deputy.db under the current
// directory.
func dbURL(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv("DEPUTY_DB"); v != "" {
		return v
	}
	return filepath.Join(".deputy", "deputy.db")
}

// openStore opens the database; every failure (a corrupt, locked or newer
// database, nothing listening) is a configuration error, exit 2, and
// nothing is overwritten.
func openStore(ctx context.Context, flag string) (*store.Store, string, error) {
	return openStoreMode(ctx, flag, true)
}

// openExisting is openStore for commands that only read (show, ps): a
// SQLite file that does not exist is an error, not a new empty database.
func openExisting(ctx context.Context, flag string) (*store.Store, string, error) {
	return openStoreMode(ctx, flag, false)
}

func openStoreMode(ctx context.Context, flag string, create bool) (*store.Store, string, error) {
	url := dbURL(flag)
	if path, ok := store.SQLitePath(url); ok && !create {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, "", usageErr("no database at %s: deputy run creates one there (or give --db / $DEPUTY_DB)", path)
		}
	}
	st, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		return nil, "", usageErr("%v", err)
	}
	return st, url, nil
}

// drainFlagHelp is the --drain-timeout flag's help.
const drainFlagHelp = "on SIGINT or SIGTERM, how long running steps (a tool call, a model call) may take to finish " +
	"before they are cut off; nothing new starts meanwhile, and a second signal stops at once"

// executorFlagHelp is the --executor-id flag's help.
const executorFlagHelp = "on Postgres, the executor id this process works under among the database's workers " +
	"(default: $" + executorEnv + ", else this machine's, kept in ~/.deputy/executor-id)"

// closeRuntime closes a runtime after its drain (a run stopped by a
// signal may have drained already: it closes once), bounded by drain and
// cut short when hurry ends (a second signal), and says what the user
// should know: that steps were cut off (unless quiet), that closing failed.
func closeRuntime(rt *deputylib.Runtime, hurry context.Context, drain time.Duration, quiet bool, stderr io.Writer, prefix string) {
	drained, err := rt.CloseContext(hurry, drain)
	if !drained && !quiet {
		fmt.Fprintln(stderr, "deputy: steps still running when the drain ended were cut off; "+
			"a side-effecting call among them is reported to the model as interrupted when its run resumes")
	}
	if err != nil { // the spans of the run, flushed once it stopped, or the store's close
		fmt.Fprintf(stderr, "%s: closing: %s\n", prefix, unprefixed(err.Error()))
	}
}

// openInstance opens an existing database and reads instance id from it;
// the caller closes the store.
func openInstance(ctx context.Context, db, id string) (*store.Store, string, *store.Instance, error) {
	st, where, err := openExisting(ctx, db)
	if err != nil {
		return nil, "", nil, err
	}
	in, err := st.GetInstance(ctx, id)
	if err != nil {
		st.Close()
		return nil, "", nil, notFound(where, id, err)
	}
	return st, where, in, nil
}

// notFound turns the store's ErrNotFound into a clear usage error, and
// any other failure to read into readErr.
func notFound(where, id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return usageErr("no instance %q in this database (deputy ps --all lists them)", id)
	}
	return readErr(where, err)
}

// readErr names the database in a failure to read it: a damaged page of
// an otherwise valid file shows only when a query reaches it, after the
// open succeeded. Like a failure to open, it is exit 2.
func readErr(where string, err error) error {
	return usageErr("database %s: %v", dbName(where), err)
}

// dbName names the database in messages: the file, or the Postgres URL
// without its password.
func dbName(where string) string {
	if strings.HasPrefix(where, "postgres://") || strings.HasPrefix(where, "postgresql://") {
		if u, err := url.Parse(where); err == nil {
			return u.Redacted()
		}
		return "(the Postgres database)"
	}
	return where
}

func oneLineOf(s string, n int) string { return termui.Clip(strings.Join(strings.Fields(s), " "), n) }
