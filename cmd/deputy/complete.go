package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/store"
)

// Shell completion reads the database and the catalog as the command
// being completed would (its --db, the working directory's definitions),
// briefly, and never says anything: a completion that cannot read them
// offers nothing, since whatever it printed would land in the user's
// command line.

// completionBudget bounds a completion's reading: a shell waits for it.
const completionBudget = 2 * time.Second

// completionLimit is how many instances a completion offers, newest first.
const completionLimit = 200

// completeInstances completes an instance id as the first argument, among
// the instances in one of states (any when none), newest first, each with
// its type, state and task as the description the shell shows.
func completeInstances(states ...instance.State) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		db, _ := cmd.Flags().GetString("db")
		return instanceIDs(cmd.Context(), db, states), cobra.ShellCompDirectiveNoFileComp
	}
}

// instanceIDs lists the completions of instance ids in db, nil when the
// database cannot be read (or does not exist: reading creates nothing).
func instanceIDs(ctx context.Context, db string, states []instance.State) []cobra.Completion {
	url := dbURL(db)
	if path, ok := store.SQLitePath(url); ok && !fileExists(path) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completionBudget)
	defer cancel()
	st, err := store.Open(ctx, url, store.Options{BusyTimeout: completionBudget / 4})
	if err != nil {
		return nil
	}
	defer st.Close()
	list, err := st.ListInstances(ctx, store.Filter{States: states})
	if err != nil {
		return nil
	}
	slices.Reverse(list)
	out := make([]cobra.Completion, 0, min(len(list), completionLimit))
	for _, in := range list[:min(len(list), completionLimit)] {
		out = append(out, cobra.CompletionWithDesc(in.ID, fmt.Sprintf("%s %s: %s", in.Type, in.State, oneLineOf(in.Task, 50))))
	}
	return out
}

// completeTypes completes a definition's name: the catalog deputy run
// would read here (the project's, the user's and the built-ins).
func completeTypes(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	defs, _, _ := loadAgents(nil)
	out := make([]cobra.Completion, 0, len(defs))
	for _, d := range defs {
		out = append(out, cobra.CompletionWithDesc(d.Name, oneLineOf(d.Description, 60)))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeStates completes a state's name.
func completeStates(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, s := range instance.States() {
		out = append(out, string(s))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// activeStates are the states a control acts on.
var activeStates = []instance.State{instance.Created, instance.Running, instance.Asking, instance.Paused}

// endedStates are the states rm deletes.
var endedStates = []instance.State{instance.Completed, instance.Failed, instance.TimedOut, instance.Cancelled}

// fileExists reports whether path names something (a completion opens no
// database that is not there: opening would create it).
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
