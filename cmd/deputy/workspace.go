package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	deputylib "github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/provider"
	"github.com/deputy-run/deputy/store"
)

// This file is the one step of the CLI that reads its environment and the
// user's files, and makes of them the deputy.Options every command that
// runs instances opens the runtime with (run, worker, serve, mcp). It
// calls the exported helpers a program would; deputy.Open itself reads
// nothing it is not given.

// cliInputs are a command's flags that shape its runtime.
type cliInputs struct {
	db       string // --db; default $DEPUTY_DB, else .deputy/deputy.db
	model    string // the roots' model spec; "" for a worker
	scenario string // --scenario: a file, "demo" or ""
	// workspace is where the runtime works and whose .deputy/ and
	// .claude/ definitions and skills are read; config its deputy.yaml
	// (--config), loaded the config when the caller read it already.
	workspace, config string
	loaded            *deputylib.Config
	searchURL         string
	executorID        string // --executor-id; default $DEPUTY_EXECUTOR_ID
	lease             time.Duration
	maxRuns           int
	fleetRuns         int
	onEvent           func(deputylib.Event)
	stderr            io.Writer
}

// executorEnv names this process's executor id when no flag does.
const executorEnv = "DEPUTY_EXECUTOR_ID"

// logEnv names the level of the engine's own log (DBOS's recovery, queues
// and workflow errors) written to stderr: debug, info, warn or error.
// Unset, that log is discarded: a run's progress is what a user reads, and
// the engine's log is for finding out why a worker did what it did.
const logEnv = "DEPUTY_LOG"

// cliOptions is the runtime the flags and the environment describe:
//
//   - the database: --db, $DEPUTY_DB, else .deputy/deputy.db under the
//     current directory;
//   - models through the provider variables (ANTHROPIC_API_KEY, ...), the
//     fake's latency unless $DEPUTY_FAKE_LATENCY=off;
//   - the workspace's and ~/.deputy's definitions and skills, and
//     deputy.yaml (cliConfig);
//   - every root holding the built-in tools of its own workspace;
//   - traces when deputy.yaml or an OTEL_EXPORTER_OTLP_*ENDPOINT variable
//     asks, the engine's log at $DEPUTY_LOG's level;
//   - on Postgres, a worker of the fleet under --executor-id,
//     $DEPUTY_EXECUTOR_ID or this machine's id (in $DEPUTY_HOME or
//     ~/.deputy); SQLite is held alone;
//   - $DEPUTY_FAILPOINT, for the crash tests.
//
// Every failure is a usage error (exit 2).
func cliOptions(in cliInputs) (deputylib.Options, error) {
	ws, err := filepath.Abs(in.workspace)
	if err != nil {
		return deputylib.Options{}, usageErr("workspace: %v", err)
	}
	db := dbURL(in.db)
	executor := in.executorID
	if executor == "" {
		executor = os.Getenv(executorEnv)
	}
	if _, sqlite := store.SQLitePath(db); sqlite && in.executorID != "" {
		return deputylib.Options{}, usageErr("--executor-id needs a Postgres database: SQLite is held by one process at a time")
	} else if sqlite {
		executor = "" // $DEPUTY_EXECUTOR_ID is for the fleet's processes; SQLite has none
	}
	cfg := in.loaded
	if cfg == nil {
		if cfg, err = cliConfig(ws, in.config, in.model); err != nil {
			return deputylib.Options{}, err
		}
	}
	logger, err := cliLogger(in.stderr)
	if err != nil {
		return deputylib.Options{}, err
	}
	o := deputylib.Options{
		ModelSpec:   in.model,
		Provider:    deputylib.ProviderOptions{Getenv: os.LookupEnv},
		FakeLatency: os.Getenv("DEPUTY_FAKE_LATENCY") != "off",
		Stream:      true,
		Workspace:   ws,
		DB:          db,
		RunTools:    deputylib.BuiltinTools,
		SearchURL:   in.searchURL,
		Sources:     deputylib.Sources{Project: ws},
		Config:      cfg,
		MaxRuns:     in.maxRuns,
		OnEvent:     in.onEvent,
		Telemetry:   cliTelemetry(cfg),
		Logger:      logger,
		// Every process on Postgres is a worker of its fleet.
		Fleet:          true,
		ExecutorID:     executor,
		ExecutorIDFile: filepath.Join(cliHome(), "executor-id"),
		Lease:          in.lease,
		FleetMaxRuns:   in.fleetRuns,
		Failpoint:      os.Getenv("DEPUTY_FAILPOINT"),
	}
	if user, err := deputylib.UserDir(); err == nil {
		o.Sources.User = user
	}
	home, _ := os.UserHomeDir() // none: no user settings file
	if o.Hooks, err = deputylib.LoadHooks(ws, home); err != nil {
		return deputylib.Options{}, usageErr("hooks: %v", err)
	}
	// Permissions are enforced once a settings file or deputy.yaml's
	// permissions say something: with none, deputy runs as it always did.
	// A file that cannot be read, or a deny rule that cannot, stops it
	// here (fail closed).
	ps, err := deputylib.LoadPermissions(ws, home, cfg)
	if err != nil {
		return deputylib.Options{}, usageErr("permissions: %v", err)
	}
	if len(ps.Files) > 0 {
		o.Permissions, o.Home = &ps, home
	}
	if in.scenario != "" && in.scenario != "demo" {
		if o.Scenario, err = os.ReadFile(in.scenario); err != nil {
			return deputylib.Options{}, usageErr("load scenario: %v", err)
		}
		o.ScenarioName = in.scenario
	}
	return o, nil
}

// cliConfig is --config, or the first deputy.yaml in the workspace and
// then ~/.deputy; with none and a fake root model, the demo's
// configuration; with none otherwise, an empty one.
func cliConfig(ws, path, rootSpec string) (*deputylib.Config, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, usageErr("config %s: %v", path, err)
		}
		cfg, err := deputylib.LoadConfig(path)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		return cfg, nil
	}
	user, _ := deputylib.UserDir() // none: the workspace's only
	cfg, err := deputylib.FindConfig(ws, user)
	switch {
	case err != nil:
		return nil, usageErr("%v", err)
	case cfg != nil:
		return cfg, nil
	case deputylib.IsFake(rootSpec):
		return deputylib.DemoConfig(), nil
	}
	return &deputylib.Config{}, nil
}

// cliTelemetry asks for traces when deputy.yaml's telemetry section or an
// OTLP endpoint variable does (OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER=none
// still turn them off: the exporter reads those).
func cliTelemetry(cfg *deputylib.Config) *deputylib.Telemetry {
	tc := cfg.Telemetry
	if !tc.Enabled && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil
	}
	return &deputylib.Telemetry{Endpoint: tc.Endpoint, Content: tc.Content}
}

// cliLogger is the engine's logger for $DEPUTY_LOG on w, nil when unset
// (the engine then discards its log). DBOS masks the database URL's
// password in what it logs; nothing else it logs carries a secret deputy
// holds.
func cliLogger(w io.Writer) (*slog.Logger, error) {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(logEnv)))
	if v == "" || v == "off" {
		return nil, nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(v)); err != nil {
		return nil, usageErr("$%s=%q: want debug, info, warn, error or off", logEnv, v)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}

// cliHome is deputy's own directory for what belongs to the machine
// rather than to a database file (the executor id, a Postgres server's
// token): $DEPUTY_HOME, else ~/.deputy.
func cliHome() string {
	if h := os.Getenv("DEPUTY_HOME"); h != "" {
		return h
	}
	if h, err := deputylib.UserDir(); err == nil {
		return h
	}
	return ".deputy"
}

// loadScenario reads a scenario file; "demo" and "" name the built-in
// demo.
func loadScenario(path string) (*fake.Scenario, error) {
	if path == "" || path == "demo" {
		return fake.DemoScenario(), nil
	}
	return fake.LoadScenario(path)
}

// openErr is a failed deputy.Open (or Enqueue) in the CLI's words: every
// failure is a usage error (exit 2), nothing having run.
func openErr(err error, db string) error {
	msg := strings.TrimPrefix(err.Error(), "deputy: ")
	switch {
	case errors.Is(err, deputylib.ErrBusy):
		return busyErr(db)
	case errors.Is(err, deputylib.ErrScenarioNotFake):
		return usageErr("--scenario applies only to --model fake")
	case errors.Is(err, provider.ErrBadSpec):
		return usageErr("%s; or fake, for the offline scripted model", msg)
	}
	return usageErr("%s", msg)
}

// busyErr is the CLI's word for a database another process holds:
// `deputy run --detach` needs no engine, so it never waits on the lock,
// and is the way out.
func busyErr(db string) error { return &exitError{code: exitUsage, err: busyError{db}} }

// busyError is busyErr's error: errors.Is ErrBusy, for the commands that
// have a better way out to offer (deputy mcp: serve's /mcp).
type busyError struct{ db string }

func (b busyError) Error() string {
	return fmt.Sprintf("another deputy process (a run or a worker) is running instances on %s; wait for it to end, "+
		"or queue this run with --detach for the worker", dbName(b.db))
}

func (busyError) Unwrap() error { return deputylib.ErrBusy }

// opened is what the CLI says once a runtime is open: the problems Open
// skipped (a definition file that does not parse, unless quiet), a failed
// clean-up, the worktrees removed, a fresh executor id. prefix is the
// command's ("deputy", "deputy serve: warning").
func opened(rt *deputylib.Runtime, w io.Writer, prefix string, quiet bool) {
	for _, p := range rt.Problems() {
		if quiet && errors.Is(p, deputylib.ErrSkipped) {
			continue
		}
		fmt.Fprintf(w, "%s: %s\n", prefix, unprefixed(p.Error()))
	}
	if n := len(rt.CleanedUp()); n > 0 && !quiet {
		fmt.Fprintf(w, "deputy: removed %d worktrees of instances no longer at work\n", n)
	}
	if id, fresh := rt.ExecutorID(); fresh {
		fmt.Fprintf(w, "deputy: this machine's executor id is in use by a live process; working as %s\n", id)
	}
}
