package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/store"
)

func newRmCmd() *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rm ID",
		Short: "Delete an ended instance and its subagents, with their transcripts and every record of them",
		Long: `Deletes the instance ID and every subagent under it from the database: their
records, transcripts, events, model-call attempts, mailboxes and what was kept
to resume their runs. Only what has ended is deleted: an instance still at work
(or waiting, or paused) is refused with the reason; cancel it first. A subagent
whose parent is still at work is refused too, since its parent still reads it.`,
		Example:           "  deputy rm " + exampleID + "\n  deputy rm --json " + exampleID,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeInstances(endedStates...),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, where, _, err := openInstance(ctx, db, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			d, err := removeTree(ctx, st, where, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), removedJSON{Removed: d.Instances, Rows: d.Rows})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s%s (%d records)\n", args[0], subagents(len(d.Instances)-1), d.Rows)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", dbFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {removed: [ids], rows} as JSON")
	return cmd
}

// removedJSON is what rm prints with --json.
type removedJSON struct {
	Removed []string `json:"removed"` // the ids, the one named first
	Rows    int64    `json:"rows"`    // deputy's records deleted with them
}

// removeTree deletes id's subtree (store.DeleteTree), then the engine's
// records of its runs. A refusal says why in the user's words (exit 2); a
// failure of the second step is a failure (exit 1) that names what is left.
func removeTree(ctx context.Context, st *store.Store, where, id string) (store.Deleted, error) {
	d, err := st.DeleteTree(ctx, id)
	var ae *store.ActiveError
	switch {
	case errors.As(err, &ae) && ae.Parent:
		return d, usageErr("%s is a subagent of %s, which is %s: its parent still reads it; "+
			"remove the whole tree once it has ended (deputy rm %s)", id, ae.ID, ae.State, ae.ID)
	case errors.As(err, &ae) && ae.ID == id:
		return d, usageErr("%s is %s, not ended: cancel it first (deputy cancel %s)", id, ae.State, id)
	case errors.As(err, &ae):
		return d, usageErr("%s has a subagent still at work, %s (%s): cancel the tree first (deputy cancel %s)",
			id, ae.ID, ae.State, id)
	case errors.Is(err, store.ErrNotFound):
		return d, notFound(where, id, err)
	case err != nil:
		return d, readErr(where, err)
	}
	if err := forgetWorkflows(ctx, st, where, d.Workflows); err != nil {
		return d, &exitError{code: exitFailed, err: fmt.Errorf("removed %s%s, but not the engine's records of its runs "+
			"(%s): %w", id, subagents(len(d.Instances)-1), strings.Join(d.Workflows, ", "), err)}
	}
	return d, nil
}

// subagents is " and its N subagents", or "" for none.
func subagents(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " and its subagent"
	}
	return fmt.Sprintf(" and its %d subagents", n)
}

func newPruneCmd() *cobra.Command {
	var db, before string
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "prune --before DURATION",
		Short: "Delete the runs that ended longer ago than DURATION, each with its subagents",
		Long: `Deletes every tree of instances (a run started by deputy run, serve or mcp, with
its subagents) whose instances have all ended, the last of them more than
DURATION ago, as "deputy rm" deletes one. A tree with anything still at work is
kept whole. DURATION is Go's (90m, 36h) or days (7d). --dry-run lists what
would be deleted and deletes nothing.`,
		Example: `  deputy prune --before 7d --dry-run
  deputy prune --before 36h
  deputy prune --before 30d --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			age, err := parseAge(before)
			if err != nil {
				return err
			}
			return prune(cmd.Context(), cmd.OutOrStdout(), db, time.Now().Add(-age), dryRun, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "", dbFlagHelp)
	f.StringVar(&before, "before", "", "delete what ended longer ago than this: 90m, 36h, 7d (required)")
	f.BoolVar(&dryRun, "dry-run", false, "list what would be deleted; delete nothing")
	f.BoolVar(&asJSON, "json", false, "print {dry_run, trees: [{root, instances, ended_at}], removed} as JSON")
	_ = cmd.MarkFlagRequired("before")
	return cmd
}

// parseAge reads --before: a Go duration, or a whole number of days.
func parseAge(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, usageErr("--before %q: give a positive duration, such as 90m, 36h or 7d", s)
	}
	return d, nil
}

// pruneJSON is what prune prints with --json.
type pruneJSON struct {
	DryRun  bool       `json:"dry_run"`
	Trees   []treeJSON `json:"trees"`
	Removed int        `json:"removed"` // instances deleted (0 on a dry run)
}

type treeJSON struct {
	Root      string    `json:"root"`
	Instances int       `json:"instances"`
	EndedAt   time.Time `json:"ended_at"`
}

// prune deletes (or, dry, lists) the trees that ended before cutoff, one
// transaction each; a tree that fails is said and the others go on.
func prune(ctx context.Context, w io.Writer, db string, cutoff time.Time, dry, asJSON bool) error {
	st, where, err := openExisting(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	trees, err := st.EndedTrees(ctx, cutoff)
	if err != nil {
		return readErr(where, err)
	}
	out := pruneJSON{DryRun: dry, Trees: make([]treeJSON, 0, len(trees))}
	var failed []string
	for _, t := range trees {
		if !dry {
			d, err := removeTree(ctx, st, where, t.Root)
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", t.Root, unprefixed(err.Error())))
				continue
			}
			out.Removed += len(d.Instances)
		}
		out.Trees = append(out.Trees, treeJSON{Root: t.Root, Instances: t.Instances, EndedAt: t.EndedAt})
	}
	if asJSON {
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else {
		printPruned(w, out)
	}
	if len(failed) > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("%d trees not removed: %s", len(failed), strings.Join(failed, "; "))}
	}
	return nil
}

// printPruned lists the trees pruned (or that would be) and the count.
func printPruned(w io.Writer, p pruneJSON) {
	if len(p.Trees) == 0 {
		fmt.Fprintln(w, "nothing ended before then")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROOT\tINSTANCES\tENDED")
	n := 0
	for _, t := range p.Trees {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", t.Root, t.Instances, t.EndedAt.Local().Format("2006-01-02 15:04:05"))
		n += t.Instances
	}
	tw.Flush()
	if p.DryRun {
		fmt.Fprintf(w, "would remove %d trees (%d instances); nothing was deleted (--dry-run)\n", len(p.Trees), n)
		return
	}
	fmt.Fprintf(w, "removed %d trees (%d instances)\n", len(p.Trees), p.Removed)
}
