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

	"github.com/deputy-run/deputy/durable"
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

// removeTree deletes the engine's records of the runs of id's subtree
// (durable.Forget), then the subtree (store.DeleteTree): in that order a
// failure leaves the instances, so deputy rm can be run again. A refusal
// says why in the user's words (exit 2); a failure is exit 1.
func removeTree(ctx context.Context, st *store.Store, where, id string) (store.Deleted, error) {
	wfs, err := st.TreeWorkflows(ctx, id)
	if err != nil {
		return store.Deleted{}, treeErr(where, id, err)
	}
	if err := durable.Forget(ctx, st, where, wfs); err != nil {
		return store.Deleted{}, forgetErr(wfs, err)
	}
	d, err := st.DeleteTree(ctx, id)
	if err != nil {
		return d, treeErr(where, id, err)
	}
	if late := notIn(d.Workflows, wfs); len(late) > 0 {
		return d, forgetLate(ctx, st, where, id, len(d.Instances), late)
	}
	return d, nil
}

// treeErr is DeleteTree's (or TreeWorkflows') error said for the user.
func treeErr(where, id string, err error) error {
	var ae *store.ActiveError
	switch {
	case errors.As(err, &ae) && ae.Parent:
		return usageErr("%s is a subagent of %s, which is %s: its parent still reads it; "+
			"remove the whole tree once it has ended (deputy rm %s)", id, ae.ID, ae.State, ae.ID)
	case errors.As(err, &ae) && ae.ID == id:
		return usageErr("%s is %s, not ended: cancel it first (deputy cancel %s)", id, ae.State, id)
	case errors.As(err, &ae):
		return usageErr("%s has a subagent still at work, %s (%s): cancel the tree first (deputy cancel %s)",
			id, ae.ID, ae.State, id)
	case errors.Is(err, store.ErrNotFound):
		return notFound(where, id, err)
	}
	return readErr(where, err)
}

// forgetErr is durable.Forget's failure before anything was deleted.
func forgetErr(wfs []string, err error) error {
	return &exitError{code: exitFailed, err: fmt.Errorf("nothing removed: the engine's records of "+
		"%d runs were not deleted; run it again: %w", len(wfs), err)}
}

// forgetLate forgets the runs DeleteTree found that TreeWorkflows had not
// (an ended instance continued and ended again in between): rare, and
// then the instances are gone, so a failure names what is left.
func forgetLate(ctx context.Context, st *store.Store, where, id string, n int, late []string) error {
	if err := durable.Forget(ctx, st, where, late); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("removed %s%s, but not the engine's records of "+
			"its latest runs (%s): %w", id, subagents(n-1), strings.Join(late, ", "), err)}
	}
	return nil
}

// notIn is the elements of a not in b.
func notIn(a, b []string) []string {
	known := make(map[string]bool, len(b))
	for _, s := range b {
		known[s] = true
	}
	var out []string
	for _, s := range a {
		if !known[s] {
			out = append(out, s)
		}
	}
	return out
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
		Use:   "prune --before DURATION|TIME",
		Short: "Delete the runs that ended longer ago than DURATION (or before TIME), each with its subagents",
		Long: `Deletes every tree of instances (a run started by deputy run, serve or mcp, with
its subagents) whose instances have all ended, the last of them more than
DURATION ago (or before TIME), as "deputy rm" deletes one. A tree with anything
still at work is kept whole. DURATION is Go's (90m, 36h) or days (7d); TIME is
RFC 3339 (2026-01-02T15:04:05Z). --dry-run lists what would be deleted and
deletes nothing.`,
		Example: `  deputy prune --before 7d --dry-run
  deputy prune --before 36h
  deputy prune --before 30d --json
  deputy prune --before 2026-01-02T00:00:00Z`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cutoff, err := parseBefore(before, time.Now())
			if err != nil {
				return err
			}
			return prune(cmd.Context(), cmd.OutOrStdout(), db, cutoff, dryRun, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "", dbFlagHelp)
	f.StringVar(&before, "before", "", "delete what ended longer ago than this (90m, 36h, 7d) or before this time (RFC 3339); required")
	f.BoolVar(&dryRun, "dry-run", false, "list what would be deleted; delete nothing")
	f.BoolVar(&asJSON, "json", false, "print {dry_run, trees: [{root, instances, ended_at}], removed} as JSON")
	_ = cmd.MarkFlagRequired("before")
	return cmd
}

// parseBefore reads --before as the cutoff it names: a time (RFC 3339,
// with its offset), or an age before now, a Go duration or a whole number
// of days.
func parseBefore(s string, now time.Time) (time.Time, error) {
	if at, err := time.Parse(time.RFC3339, s); err == nil {
		return at, nil
	}
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
		return time.Time{}, usageErr("--before %q: give a positive duration, such as 90m, 36h or 7d, "+
			"or a time, such as 2026-01-02T15:04:05Z", s)
	}
	return now.Add(-d), nil
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
	if !dry {
		if trees, out.Removed, failed, err = removeTrees(ctx, st, where, trees); err != nil {
			return err
		}
	}
	for _, t := range trees {
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

// removeTrees is removeTree over many trees with one durable.Forget of
// every tree's runs before their deletes (and one after, of any run made
// in between), not a DBOS start per tree. It returns the trees removed,
// their instances and what failed; err is Forget's first failure, when
// nothing was removed.
func removeTrees(ctx context.Context, st *store.Store, where string, trees []store.EndedTree) (
	done []store.EndedTree, removed int, failed []string, err error) {
	fail := func(root string, err error) {
		failed = append(failed, fmt.Sprintf("%s: %v", root, unprefixed(err.Error())))
	}
	var wfs []string
	found := make([]store.EndedTree, 0, len(trees))
	for _, t := range trees {
		ids, err := st.TreeWorkflows(ctx, t.Root)
		if err != nil {
			fail(t.Root, treeErr(where, t.Root, err))
			continue
		}
		wfs, found = append(wfs, ids...), append(found, t)
	}
	if err := durable.Forget(ctx, st, where, wfs); err != nil {
		return nil, 0, nil, forgetErr(wfs, err)
	}
	var deleted []string
	for _, t := range found {
		d, err := st.DeleteTree(ctx, t.Root)
		if err != nil {
			fail(t.Root, treeErr(where, t.Root, err))
			continue
		}
		removed, deleted, done = removed+len(d.Instances), append(deleted, d.Workflows...), append(done, t)
	}
	if late := notIn(deleted, wfs); len(late) > 0 {
		if err := durable.Forget(ctx, st, where, late); err != nil {
			fail("the engine's records of the latest runs ("+strings.Join(late, ", ")+")", err)
		}
	}
	return done, removed, failed, nil
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
