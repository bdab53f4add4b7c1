package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	deputylib "github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/internal/termui"
	"github.com/deputy-run/deputy/store"
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
resumable).

A run on --model fake plays the scenario it was started on, which it
recorded: without --scenario the worker plays that one, and it refuses runs
started on another scenario than its own (or on several), naming the
--scenario FILE they need. Unless -q, it prints one line on stdout for each
instance it carried to an end: its id, type, state, turns and cost.`,
		Example: `  deputy worker
  deputy worker --until-idle -q
  deputy worker --db postgres://deputy@db/deputy --max-runs 16`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stderr := cmd.ErrOrStderr()
			drain := cmp.Or(drain, durable.DefaultDrain)
			ctx, hurry, release := stopSignals(cmd.Context(), stderr, drain, quiet)
			defer release()
			ends := newEndLines(cmd.OutOrStdout(), quiet)
			in.onEvent = ends.event
			if !quiet {
				prog := progress(stderr)
				in.onEvent = func(e agent.Event) { prog(e); ends.event(e) }
			}
			in.stderr = stderr
			o, err := cliOptions(in)
			if err != nil {
				return err
			}
			if in.scenario == "" {
				if err := playRecorded(ctx, &o, stderr, quiet); err != nil {
					return err
				}
			}
			// Open resumes this executor's pending runs and starts the
			// roots recorded but never started; the queue brings the rest.
			rt, err := deputylib.Open(ctx, o)
			if err != nil {
				return openErr(err, o.DB)
			}
			defer closeRuntime(rt, hurry, drain, quiet, stderr, "deputy")
			opened(rt, stderr, "deputy", quiet)
			// The last ends, those the stop or the idle check came with,
			// are printed before the runtime closes.
			defer ends.sweep(context.WithoutCancel(ctx), rt)
			return carry(ctx, rt, poll, untilIdle, ends)
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.db, "db", "", dbFlagHelp)
	f.StringVar(&in.scenario, "scenario", "", "scenario file for instances on --model fake")
	f.StringVar(&in.workspace, "workspace", ".", "directory whose agents, skills and deputy.yaml the runs use")
	f.StringVar(&in.config, "config", "", "deputy.yaml (default: WORKSPACE/deputy.yaml, then ~/.deputy/deputy.yaml)")
	f.BoolVar(&untilIdle, "until-idle", false, "exit once no instance is active (for scripts and tests)")
	f.DurationVar(&poll, "poll", 100*time.Millisecond, "with --until-idle, how often to look")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr, no lines of ended instances on stdout")
	f.IntVar(&in.maxRuns, "max-runs", durable.DefaultMaxRuns, "runs this worker carries at once (on Postgres also the most it takes from the queue at once)")
	f.IntVar(&in.fleetRuns, "fleet-max-runs", 0, "on Postgres, the most queued runs all the workers carry at once (give every worker the same); 0: only each worker's --max-runs")
	f.StringVar(&in.executorID, "executor-id", "", executorFlagHelp)
	f.DurationVar(&drain, "drain-timeout", durable.DefaultDrain, drainFlagHelp)
	f.DurationVar(&in.lease, "lease", durable.DefaultLease, "on Postgres, this worker's lease: another takes its runs over once it has not renewed it for this long")
	return cmd
}

// playRecorded makes o play the scenario the database's active roots were
// started on, for a worker given no --scenario.
func playRecorded(ctx context.Context, o *deputylib.Options, stderr io.Writer, quiet bool) error {
	name, yaml, err := deputylib.RecordedScenario(ctx, *o)
	if err != nil {
		return openErr(err, o.DB)
	}
	if yaml != nil {
		o.Scenario, o.ScenarioName = yaml, name
		if !quiet {
			fmt.Fprintf(stderr, "deputy worker: playing scenario %s, which its runs were started on\n", name)
		}
	}
	return nil
}

// carry waits until ctx ends or, with untilIdle, the runtime has nothing
// left to do (Runtime.Idle), printing the instances that ended meanwhile.
func carry(ctx context.Context, rt *deputylib.Runtime, poll time.Duration, untilIdle bool, ends *endLines) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	// The runtime drains as the command returns; what is left is saved for
	// the next worker.
	stopped := &exitError{code: exitInterrupted, err: errors.New("stopped before the work was done; " +
		"what is left is saved as of its last finished step: deputy worker resumes it")}
	for {
		if untilIdle {
			idle, err := rt.Idle(ctx)
			switch {
			case ctx.Err() != nil:
				return stopped // a look cut short by the signal
			case err != nil:
				return err
			case idle:
				return nil
			}
		}
		ends.sweep(ctx, rt)
		select {
		case <-ctx.Done():
			if untilIdle {
				return stopped
			}
			return nil
		case <-t.C:
		}
	}
}

// endLines prints one line per instance the worker carried to an end. An
// instance's end event comes before its end is written (a root's state is
// recorded after its loop returns), so ended instances wait in pending
// until the store shows them ended. Nothing is kept once printed (a
// long-lived worker would keep every id it ever carried): a run ends
// once, so an instance's next end line is its next run's.
type endLines struct {
	w       io.Writer
	mu      sync.Mutex
	pending map[string]bool
}

// newEndLines prints to w, or nowhere when quiet.
func newEndLines(w io.Writer, quiet bool) *endLines {
	if quiet {
		w = io.Discard
	}
	return &endLines{w: w, pending: map[string]bool{}}
}

// event notes the instances whose runs here ended.
func (l *endLines) event(e agent.Event) {
	if e.Kind != agent.EventEnded || e.Instance == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[e.Instance] = true
}

// sweep prints the pending instances the store shows ended: id, type,
// state, turns and cost. One whose run stopped without ending (it asks,
// it is paused, the worker drained) is dropped; its next run's end brings
// it back. The store is read without the lock, which the runs' events
// take.
func (l *endLines) sweep(ctx context.Context, rt *deputylib.Runtime) {
	l.mu.Lock()
	ids := make([]string, 0, len(l.pending))
	for id := range l.pending {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	for _, id := range ids {
		in, err := rt.Get(ctx, id)
		if err != nil || in.State == store.Running || in.State == store.Created {
			continue // asked again at the next sweep
		}
		l.mu.Lock()
		if in.State.Terminal() {
			fmt.Fprintf(l.w, "%s %s %s turns=%d cost=%s\n", in.ID, in.Type, in.State, in.Turns, termui.CostCell(in.Cost))
		}
		delete(l.pending, id)
		l.mu.Unlock()
	}
}
