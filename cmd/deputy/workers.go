package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/store"
)

// workerJSON is a worker as `deputy workers --json` prints it.
type workerJSON struct {
	store.Worker
	// LeaseAge is the time since its last renewal, LeaseLeft what is left
	// of its lease (negative once it ran out), both in seconds.
	LeaseAge  float64 `json:"lease_age_s"`
	LeaseLeft float64 `json:"lease_left_s"`
}

func newWorkersCmd() *cobra.Command {
	var db string
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the workers on a Postgres database: live ones, or --all",
		Long: `Lists the processes working on this database (deputy worker, serve, run on
Postgres), each under its executor id: its host and pid, its state (live;
draining, leaving; released, claimed and gone once it left or died and another
took its runs over), the runs it carried at its last renewal (load), and its
lease: how long ago it renewed it, and what is left of it.`,
		Example: "  deputy workers --db postgres://deputy@db/deputy\n  deputy workers --all --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, where, err := openExisting(ctx, db)
			if err != nil {
				return err
			}
			defer st.Close()
			ws, err := st.Workers(ctx)
			if err != nil {
				return readErr(where, err)
			}
			now := time.Now()
			out := make([]workerJSON, 0, len(ws))
			for _, w := range ws {
				if !all && w.State != store.WorkerLive && w.State != store.WorkerDraining {
					continue
				}
				out = append(out, workerJSON{Worker: w, LeaseAge: now.Sub(w.RenewedAt).Seconds(),
					LeaseLeft: w.LeaseUntil.Sub(now).Seconds()})
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "EXECUTOR\tHOST\tPID\tSTATE\tLOAD\tRENEWED\tLEASE LEFT\tSTARTED\tCLAIMED BY")
			for _, w := range out {
				left := fmt.Sprintf("%.1fs", w.LeaseLeft)
				if w.LeaseLeft < 0 {
					left = "ran out"
				}
				by := w.ClaimedBy
				if by == "" {
					by = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%.1fs ago\t%s\t%s\t%s\n", w.ID, w.Host, w.PID, w.State, w.Load,
					w.LeaseAge, left, w.StartedAt.Local().Format("01-02 15:04:05"), by)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&db, "db", "", dbFlagHelp)
	cmd.Flags().BoolVar(&all, "all", false, "include workers that left or died")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}
