package main

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/durable"
)

func newWorkerCmd() *cobra.Command {
	var c engineConfig
	var untilIdle bool
	var poll time.Duration
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run queued instances and resume interrupted ones, until stopped",
		Long: `A worker resumes the runs that a stopped process left pending (from their last
finished step) and runs those queued with "deputy run --detach". It starts
nothing new of its own. It stops on SIGINT or SIGTERM, or, with --until-idle,
once no instance in the database is active.

SIGINT or SIGTERM drains the worker, on SQLite as on Postgres: no step
starts any more, the running ones (a tool call, a model call) finish within
--drain-timeout, and it exits 0; its runs stay saved as of their last
finished step, for the next worker (on Postgres, the others take them over at
once). A second signal stops at once, cutting off what still runs. With
--until-idle, a signal before the work is done exits 6 (interrupted,
resumable).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, hurry, release := stopSignals(cmd.Context(), cmd.ErrOrStderr(), cmp.Or(c.drain, durable.DefaultDrain), c.quiet)
			defer release()
			c.hurry = hurry
			ws, err := filepath.Abs(c.workspace)
			if err != nil {
				return usageErr("workspace: %v", err)
			}
			c.workspace = ws
			c.failpoint = os.Getenv("DEPUTY_FAILPOINT")
			var onEvent = progress(cmd.ErrOrStderr())
			if c.quiet {
				onEvent = nil
			}
			eng, _, closeEng, err := openEngine(ctx, c, "", onEvent, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closeEng()
			if _, err := eng.Adopt(ctx); err != nil && ctx.Err() == nil {
				return err // a look cut short by a signal is a stop like any other
			}
			if !untilIdle {
				<-ctx.Done()
				return nil
			}
			return waitIdle(ctx, eng, poll)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.db, "db", "", dbFlagHelp)
	f.StringVar(&c.scenario, "scenario", "", "scenario file for instances on --model fake")
	f.StringVar(&c.workspace, "workspace", ".", "directory whose agents, skills and deputy.yaml the runs use")
	f.StringVar(&c.config, "config", "", "deputy.yaml (default: WORKSPACE/deputy.yaml, then ~/.deputy/deputy.yaml)")
	f.BoolVar(&untilIdle, "until-idle", false, "exit once no instance is active (for scripts and tests)")
	f.DurationVar(&poll, "poll", 100*time.Millisecond, "with --until-idle, how often to look")
	f.BoolVarP(&c.quiet, "quiet", "q", false, "no progress on stderr")
	f.IntVar(&c.maxRuns, "max-runs", durable.DefaultMaxRuns, "runs this worker carries at once (on Postgres also the most it takes from the queue at once)")
	f.IntVar(&c.fleetRuns, "fleet-max-runs", 0, "on Postgres, the most queued runs all the workers carry at once (give every worker the same); 0: only each worker's --max-runs")
	f.StringVar(&c.executorID, "executor-id", "", executorFlagHelp)
	f.DurationVar(&c.drain, "drain-timeout", durable.DefaultDrain, drainFlagHelp)
	f.DurationVar(&c.lease, "lease", durable.DefaultLease, "on Postgres, this worker's lease: another takes its runs over once it has not renewed it for this long")
	return cmd
}

// waitIdle returns once the engine has nothing left to do (Engine.Idle).
func waitIdle(ctx context.Context, eng *durable.Engine, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	// The engine drains as the command returns; what is left is saved for
	// the next worker.
	stopped := &exitError{code: exitInterrupted, err: errors.New("stopped before the work was done; " +
		"what is left is saved as of its last finished step: deputy worker resumes it")}
	for {
		idle, err := eng.Idle(ctx)
		switch {
		case ctx.Err() != nil:
			return stopped // a look cut short by the signal
		case err != nil:
			return err
		case idle:
			return nil
		}
		select {
		case <-ctx.Done():
			return stopped
		case <-t.C:
		}
	}
}
