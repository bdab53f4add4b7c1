package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
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
once no instance in the database is active.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
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
			if _, err := eng.Adopt(ctx); err != nil {
				return err
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
	f.DurationVar(&c.lease, "lease", durable.DefaultLease, "on Postgres, this worker's lease: another takes its runs over once it has not renewed it for this long")
	return cmd
}

// waitIdle returns once the engine has nothing left to do (Engine.Idle).
func waitIdle(ctx context.Context, eng *durable.Engine, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		idle, err := eng.Idle(ctx)
		if err != nil {
			return err
		}
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("stopped before the work was done")
		case <-t.C:
		}
	}
}
