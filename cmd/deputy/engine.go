package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/internal/setup"
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

// engineConfig is what commands that run instances share.
type engineConfig struct {
	db        string
	scenario  string
	workspace string // for the catalog, skills and deputy.yaml
	config    string
	// loaded is deputy.yaml when the caller has read it already; nil:
	// read it from config or the workspace.
	loaded    *agentdef.Config
	quiet     bool
	failpoint string
	// executorID is --executor-id: on Postgres, the id this process
	// works under among the database's workers (default: the machine's);
	// lease is --lease (durable.DefaultLease when 0).
	executorID string
	lease      time.Duration
	maxRuns    int // durable.Options.MaxRuns
	fleetRuns  int // durable.Options.FleetMaxRuns
	// drain is --drain-timeout: how long closing waits for the running
	// steps (durable.DefaultDrain when 0); hurry, when it ends, cuts that
	// wait short (a second signal: stopSignals).
	drain time.Duration
	hurry context.Context
}

// drainFlagHelp is the --drain-timeout flag's help.
const drainFlagHelp = "on SIGINT or SIGTERM, how long running steps (a tool call, a model call) may take to finish " +
	"before they are cut off; nothing new starts meanwhile, and a second signal stops at once"

// executorFlagHelp is the --executor-id flag's help.
const executorFlagHelp = "on Postgres, the executor id this process works under among the database's workers " +
	"(default: $" + setup.ExecutorEnv + ", else this machine's, kept in ~/.deputy/executor-id)"

// workerID is the executor id a process opening st works under: on
// Postgres one of its own (setup.ExecutorID), said on stderr when fresh;
// on SQLite none (the engine lock holds the database for one process).
func workerID(ctx context.Context, st *store.Store, flag string, stderr io.Writer) (string, error) {
	if st.Dialect() != store.Postgres {
		if flag != "" {
			return "", usageErr("--executor-id needs a Postgres database: SQLite is held by one process at a time")
		}
		return "", nil
	}
	id, fresh, err := setup.ExecutorID(ctx, st, flag)
	if err != nil {
		return "", usageErr("%v", err)
	}
	if fresh {
		fmt.Fprintf(stderr, "deputy: this machine's executor id is in use by a live process; working as %s\n", id)
	}
	return id, nil
}

// openEngine opens the store and the durable engine over it, with the
// catalog, skills and models of the workspace. The returned close stops
// both.
func openEngine(ctx context.Context, c engineConfig, rootSpec string, onEvent func(agent.Event), stderr io.Writer) (*durable.Engine, *store.Store, func(), error) {
	st, url, err := openStore(ctx, c.db)
	if err != nil {
		return nil, nil, nil, err
	}
	executor, err := workerID(ctx, st, c.executorID, stderr)
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	unlock := func() {}
	if executor == "" {
		if unlock, err = lockEngine(ctx, st, url); err != nil {
			st.Close()
			return nil, nil, nil, err
		}
	}
	fail := func(err error) (*durable.Engine, *store.Store, func(), error) {
		unlock()
		st.Close()
		return nil, nil, nil, err
	}
	logger, err := setup.Logger(stderr)
	if err != nil {
		return fail(usageErr("%v", err))
	}
	ms := &setup.Models{Scenario: c.scenario}
	runner, err := newRunner(c.workspace, runOptions{config: c.config, quiet: c.quiet}, rootSpec, ms, c.loaded, stderr)
	if err != nil {
		return fail(err)
	}
	// Traces, when an OTLP endpoint or deputy.yaml asks for them; export
	// failures go to the process's stderr.
	tel, closeTel, err := setup.Telemetry(ctx, runner.Config, st, nil)
	if err != nil {
		return fail(usageErr("%v", err))
	}
	pgURL := ""
	if st.Dialect() == store.Postgres {
		pgURL = url
	}
	opts := durable.Options{
		Logger:    logger,
		Store:     st,
		URL:       pgURL,
		Models:    ms.Open,
		Tools:     setup.Tools(),
		Fence:     setup.Fence(),
		Runner:    *runner,
		OnEvent:   tel.Hook(onEvent),
		Failpoint: c.failpoint,
		MaxRuns:   c.maxRuns,
		// Every worker should say the same: DBOS keeps the queue's
		// global cap as the workers declare it.
		FleetMaxRuns: c.fleetRuns,
	}
	if executor != "" {
		opts.ExecutorID, opts.Lease = executor, cmp.Or(c.lease, durable.DefaultLease)
	}
	eng, err := durable.Open(ctx, opts)
	if err != nil {
		_ = closeTel()
		return fail(usageErr("%v", err))
	}
	// What a process that died left in the workspace's repository.
	if gone, err := setup.Recover(ctx, st, c.workspace); err != nil {
		fmt.Fprintf(stderr, "deputy: cleaning up after a dead process: %v\n", err)
	} else if len(gone) > 0 && !c.quiet {
		fmt.Fprintf(stderr, "deputy: removed %d worktrees of instances no longer at work\n", len(gone))
	}
	drain, hurry := cmp.Or(c.drain, durable.DefaultDrain), c.hurry
	if hurry == nil {
		hurry = context.Background()
	}
	return eng, st, func() {
		// A drain, on SQLite as on Postgres (a run stopped by a signal
		// may have drained already: the engine closes once).
		if !eng.CloseContext(hurry, drain) && !c.quiet {
			fmt.Fprintln(stderr, "deputy: steps still running when the drain ended were cut off; "+
				"a side-effecting call among them is reported to the model as interrupted when its run resumes")
		}
		if err := closeTel(); err != nil { // the spans of the run, flushed once it stopped
			fmt.Fprintf(stderr, "deputy: %v\n", err)
		}
		unlock()
		st.Close()
	}, nil
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

func oneLineOf(s string, n int) string { return clip(strings.Join(strings.Fields(s), " "), n) }
