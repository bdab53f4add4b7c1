package main

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	deputylib "github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/durable"
)

func newWorkerCmd() *cobra.Command {
	var in cliInputs
	var quiet, untilIdle bool
	var poll, drain time.Duration
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
			stderr := cmd.ErrOrStderr()
			drain := cmp.Or(drain, durable.DefaultDrain)
			ctx, hurry, release := stopSignals(cmd.Context(), stderr, drain, quiet)
			defer release()
			if !quiet {
				in.onEvent = progress(stderr)
			}
			in.stderr = stderr
			o, err := cliOptions(in)
			if err != nil {
				return err
			}
			// Open resumes this executor's pending runs and starts the
			// roots recorded but never started; the queue brings the rest.
			rt, err := deputylib.Open(ctx, o)
			if err != nil {
				return openErr(err, o.DB)
			}
			defer closeRuntime(rt, hurry, drain, quiet, stderr, "deputy")
			opened(rt, stderr, "deputy", quiet)
			if !untilIdle {
				<-ctx.Done()
				return nil
			}
			return waitIdle(ctx, rt, poll)
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.db, "db", "", dbFlagHelp)
	f.StringVar(&in.scenario, "scenario", "", "scenario file for instances on --model fake")
	f.StringVar(&in.workspace, "workspace", ".", "directory whose agents, skills and deputy.yaml the runs use")
	f.StringVar(&in.config, "config", "", "deputy.yaml (default: WORKSPACE/deputy.yaml, then ~/.deputy/deputy.yaml)")
	f.BoolVar(&untilIdle, "until-idle", false, "exit once no instance is active (for scripts and tests)")
	f.DurationVar(&poll, "poll", 100*time.Millisecond, "with --until-idle, how often to look")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	f.IntVar(&in.maxRuns, "max-runs", durable.DefaultMaxRuns, "runs this worker carries at once (on Postgres also the most it takes from the queue at once)")
	f.IntVar(&in.fleetRuns, "fleet-max-runs", 0, "on Postgres, the most queued runs all the workers carry at once (give every worker the same); 0: only each worker's --max-runs")
	f.StringVar(&in.executorID, "executor-id", "", executorFlagHelp)
	f.DurationVar(&drain, "drain-timeout", durable.DefaultDrain, drainFlagHelp)
	f.DurationVar(&in.lease, "lease", durable.DefaultLease, "on Postgres, this worker's lease: another takes its runs over once it has not renewed it for this long")
	return cmd
}

// waitIdle returns once the runtime has nothing left to do (Runtime.Idle).
func waitIdle(ctx context.Context, rt *deputylib.Runtime, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	// The runtime drains as the command returns; what is left is saved for
	// the next worker.
	stopped := &exitError{code: exitInterrupted, err: errors.New("stopped before the work was done; " +
		"what is left is saved as of its last finished step: deputy worker resumes it")}
	for {
		idle, err := rt.Idle(ctx)
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
