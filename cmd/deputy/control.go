package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/termui"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

// controlCmd is the shape of pause, resume, cancel, send and answer: act
// on one instance through durable.Control, say what is now true.
type controlCmd struct {
	use, short, example string
	text                bool             // takes TEXT after the id
	toChild             bool             // refused on a child without --as-parent
	states              []instance.State // the states it acts on, for completion
	// already reports that what is asked holds already for an instance in
	// this state (a second cancel): nothing is done, and it exits 0.
	already func(instance.State) bool
	act     func(ctx context.Context, c durable.Control, id, text string) error
	// said is what happened, from the states before and after: done, or
	// only requested of a run that acts at its next turn.
	said func(id string, before, after instance.State) (line string, requested bool)
}

func newControlCmds() []*cobra.Command {
	is := func(want instance.State) func(instance.State) bool {
		return func(st instance.State) bool { return st == want }
	}
	specs := []controlCmd{
		{use: "pause ID", short: "Pause an instance (a running one stops at its next turn)", states: []instance.State{instance.Running, instance.Asking},
			example: "  deputy pause " + exampleID, already: is(instance.Paused),
			act: func(ctx context.Context, c durable.Control, id, _ string) error { return c.Pause(ctx, id) },
			said: func(id string, _, after instance.State) (string, bool) {
				if after == instance.Running {
					return "pause requested: " + id + " stops at its next turn (now running)", true
				}
				return fmt.Sprintf("paused %s (now %s)", id, after), false
			}},
		{use: "resume ID", short: "Resume a paused instance (its next run is queued for the worker)", states: []instance.State{instance.Paused},
			example: "  deputy resume " + exampleID, already: is(instance.Running),
			act: func(ctx context.Context, c durable.Control, id, _ string) error { return c.Resume(ctx, id) },
			said: func(id string, _, after instance.State) (string, bool) {
				return fmt.Sprintf("resumed %s (now %s)", id, after), false
			}},
		{use: "cancel ID", short: "Cancel an instance and its subagents, keeping their partial results", states: activeStates,
			example: "  deputy cancel " + exampleID, already: is(instance.Cancelled),
			act: func(ctx context.Context, c durable.Control, id, _ string) error { return c.Cancel(ctx, id) },
			said: func(id string, _, after instance.State) (string, bool) {
				if after == instance.Running {
					return "cancel requested: " + id + " stops at its next turn, keeping its partial result (now running)", true
				}
				return fmt.Sprintf("cancelled %s (now %s)", id, after), false
			}},
		{use: "send ID TEXT", short: "Steer an instance: a message its model reads at its next turn", states: activeStates,
			example: "  deputy send " + exampleID + ` "Skip the tests; only the docs matter"`,
			text:    true, toChild: true,
			act: func(ctx context.Context, c durable.Control, id, text string) error {
				return c.Send(ctx, id, durable.Operator, text)
			},
			said: func(id string, before, after instance.State) (string, bool) {
				if before == instance.Running {
					return "sent to " + id + ": its model reads it at its next turn (now running)", true
				}
				return fmt.Sprintf("sent to %s: its model reads it when its next run starts (now %s)", id, after), true
			}},
		{use: "answer ID TEXT", short: "Answer an instance's question (deputy ps shows who is asking)", states: []instance.State{instance.Asking, instance.Paused},
			example: "  deputy answer " + exampleID + ` "Use the staging database"`,
			text:    true, toChild: true,
			act: func(ctx context.Context, c durable.Control, id, text string) error { return c.Answer(ctx, id, text) },
			said: func(id string, _, after instance.State) (string, bool) {
				if after == instance.Paused {
					return fmt.Sprintf("answered %s (now paused): it reads the answer once resumed (deputy resume %s)", id, id), false
				}
				return fmt.Sprintf("answered %s (now %s)", id, after), false
			}},
	}
	out := make([]*cobra.Command, len(specs))
	for i, s := range specs {
		out[i] = s.command()
	}
	return out
}

// controlJSON is what a control prints with --json. Effect is "done",
// "requested" (a running instance acts on it at its next turn) or
// "already" (it held already: nothing was done).
type controlJSON struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	State  string `json:"state"`
	Effect string `json:"effect"`
}

func (s controlCmd) command() *cobra.Command {
	var f controlFlags
	nargs := 1
	if s.text {
		nargs = 2
	}
	cmd := &cobra.Command{
		Use:               s.use,
		Short:             s.short,
		Example:           s.example,
		Args:              cobra.ExactArgs(nargs),
		ValidArgsFunction: completeInstances(s.states...),
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.run(cmd, f, args)
		},
	}
	cmd.Flags().StringVar(&f.db, "db", "", dbFlagHelp)
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print {id, action, state, effect} as JSON")
	if s.toChild {
		cmd.Flags().BoolVar(&f.asParent, "as-parent", false, "speak to a subagent as its parent (recorded as the operator)")
	}
	return cmd
}

// controlFlags are a control's flags.
type controlFlags struct {
	db               string
	asJSON, asParent bool
}

// run acts on the instance args name and says what is now true.
func (s controlCmd) run(cmd *cobra.Command, f controlFlags, args []string) error {
	ctx := cmd.Context()
	id, text := args[0], ""
	if s.text {
		if text = strings.TrimSpace(args[1]); text == "" {
			return usageErr("the text is empty")
		}
	}
	st, where, in, err := openInstance(ctx, f.db, id)
	if err != nil {
		return err
	}
	defer st.Close()
	if s.toChild && in.Parent != "" && !f.asParent {
		return usageErr("%s is a subagent of %s: its parent talks to it; add --as-parent to speak as its parent "+
			"(recorded as coming from the operator)", id, in.Parent)
	}
	verb := strings.Fields(s.use)[0]
	if s.already != nil && s.already(in.State) {
		if verb == "resume" {
			if err := pauseComing(ctx, st, where, id); err != nil {
				return err
			}
		}
		return s.report(cmd, f, controlJSON{id, verb, string(in.State), "already"},
			fmt.Sprintf("%s is %s already: nothing to do", id, in.State))
	}
	ctl := durable.Control{Store: st, URL: where}
	if err := s.act(ctx, ctl, id, text); err != nil {
		return controlErr(where, id, err)
	}
	if f.asParent && in.Parent != "" {
		if err := tellParent(ctx, ctl, verb, in.Parent, id, text); err != nil {
			return controlErr(where, in.Parent, err)
		}
	}
	after, err := st.GetInstance(ctx, id)
	if err != nil {
		return readErr(where, err)
	}
	line, requested := s.said(id, in.State, after.State)
	effect := "done"
	if requested {
		effect = "requested"
	}
	if err := s.report(cmd, f, controlJSON{id, verb, string(after.State), effect}, line); err != nil {
		return err
	}
	hintWorker(ctx, cmd.ErrOrStderr(), st, where, s.use, after)
	return nil
}

// pauseComing refuses to call a running instance resumed when a pause of
// it waits for its next turn: it is about to stop.
func pauseComing(ctx context.Context, st *store.Store, where, id string) error {
	mail, err := st.Pending(ctx, id)
	if err != nil {
		return readErr(where, err)
	}
	for _, m := range mail {
		if m.Kind == durable.MailPause {
			return usageErr("%s is running with a pause requested: it pauses at its next turn; resume it once it has "+
				"(deputy resume %s)", id, id)
		}
	}
	return nil
}

// report prints what a control did: its JSON, or its line.
func (s controlCmd) report(cmd *cobra.Command, f controlFlags, j controlJSON, line string) error {
	if f.asJSON {
		return writeJSON(cmd.OutOrStdout(), j)
	}
	_, err := fmt.Fprintln(cmd.OutOrStdout(), line)
	return err
}

// tellParent lets a subagent's parent hear what was said to its child in
// its name.
func tellParent(ctx context.Context, ctl durable.Control, verb, parent, id, text string) error {
	did := "sent your subagent %s a message in your name: %s"
	if verb == "answer" {
		did = "answered your subagent %s's question in your name: %s"
	}
	note := "The operator " + fmt.Sprintf(did, id, text)
	if err := ctl.Send(ctx, parent, durable.Operator, note); err != nil && !errors.Is(err, instance.ErrIllegalTransition) {
		return err
	}
	return nil
}

// hintWorker says so when what was asked needs a worker and none runs:
// a resume or an answer queues a run; a pause or cancel of a running
// instance waits for the process running it.
func hintWorker(ctx context.Context, w io.Writer, st *store.Store, where, use string, in *instance.Record) {
	verb := strings.Fields(use)[0]
	needs := verb == "resume" || verb == "answer" || in.State == instance.Running
	if !needs {
		return
	}
	unlock, err := lockEngine(ctx, st, where)
	if err != nil {
		return // a run or a worker holds the database: it will act
	}
	unlock()
	fmt.Fprintln(w, "deputy: no worker is running on this database; start one (deputy worker) to carry it on")
}

// controlErr turns a refused control into one clear line, exit 2.
func controlErr(where, id string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound(where, id, err)
	case errors.Is(err, instance.ErrIllegalTransition), errors.Is(err, instance.ErrTerminal):
		return usageErr("%s", strings.TrimPrefix(err.Error(), instance.ErrIllegalTransition.Error()+": "))
	}
	return usageErr("%v", err)
}

func newTreeCmd() *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:               "tree ID",
		Short:             "Show the tree of instances ID belongs to: states, turns, tokens and costs",
		Example:           "  deputy tree " + exampleID + "\n  deputy tree --json " + exampleID,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeInstances(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, where, in, err := openInstance(ctx, db, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			all, err := st.ListInstances(ctx, store.Filter{Root: in.Root})
			if err != nil {
				return readErr(where, err)
			}
			views := make([]instance.Record, len(all))
			for i, in := range all {
				if views[i], err = view(ctx, st, in); err != nil {
					return readErr(where, err)
				}
			}
			t := buildTree(views)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), t)
			}
			printTree(cmd.OutOrStdout(), t, "")
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", dbFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tree as nested JSON (each node with its children)")
	return cmd
}

// treeNode is an instance with its children, and its subtree's totals.
type treeNode struct {
	instance.Record             // its View, as the API shows it
	Subtree         totals      `json:"subtree"`
	Children        []*treeNode `json:"children"`
}

type totals struct {
	Usage llm.Usage `json:"usage"`
	Cost  *float64  `json:"cost"` // nil when some instance has no price
}

// buildTree nests instances, as shown (view), oldest first so parents come
// before their children, under the first one, the root.
func buildTree(list []instance.Record) *treeNode {
	nodes := map[string]*treeNode{}
	var root *treeNode
	for _, in := range list {
		n := &treeNode{Record: in, Children: []*treeNode{}}
		nodes[in.ID] = n
		if p, ok := nodes[in.Parent]; ok {
			p.Children = append(p.Children, n)
		} else if root == nil {
			root = n
		}
	}
	if root != nil {
		root.sum()
	}
	return root
}

func (n *treeNode) sum() {
	n.Subtree.Usage = n.Usage
	n.Subtree.Cost = n.Cost
	for _, c := range n.Children {
		c.sum()
		n.Subtree.Usage.Add(c.Subtree.Usage)
		if n.Subtree.Cost != nil && c.Subtree.Cost != nil {
			v := *n.Subtree.Cost + *c.Subtree.Cost
			n.Subtree.Cost = &v
		} else {
			n.Subtree.Cost = nil
		}
	}
}

func printTree(w io.Writer, n *treeNode, indent string) {
	fmt.Fprintf(w, "%s%s  %s  %s  %d turns  %d tokens  %s\n", indent, n.ID, n.Type, n.State, n.Turns,
		n.Subtree.Usage.Total(), termui.CostCell(n.Subtree.Cost))
	for _, c := range n.Children {
		printTree(w, c, indent+"  ")
	}
}

func newLogsCmd() *cobra.Command {
	var db string
	var follow, asJSON bool
	var poll time.Duration
	cmd := &cobra.Command{
		Use:               "logs ID",
		Short:             "Print an instance's transcript; -f follows it until the instance ends",
		Example:           "  deputy logs " + exampleID + "\n  deputy logs -f " + exampleID + "\n  deputy logs --json " + exampleID,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeInstances(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id := args[0]
			st, where, _, err := openInstance(ctx, db, id)
			if err != nil {
				return err
			}
			defer st.Close()
			w := cmd.OutOrStdout()
			seen := 0
			tick := time.NewTicker(poll)
			defer tick.Stop()
			for {
				msgs, err := st.Transcript(ctx, id)
				if err != nil {
					return readErr(where, err)
				}
				for ; seen < len(msgs); seen++ {
					if asJSON {
						if err := writeJSONLine(w, msgs[seen]); err != nil {
							return err
						}
						continue
					}
					printMessage(w, seen, msgs[seen])
				}
				in, err := st.GetInstance(ctx, id)
				if err != nil {
					return readErr(where, err)
				}
				if !follow || in.State.Terminal() {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
			}
		},
	}
	cmd.Flags().StringVar(&db, "db", "", dbFlagHelp)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new messages until the instance ends")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON message per line")
	cmd.Flags().DurationVar(&poll, "poll", 200*time.Millisecond, "with -f, how often to look for new messages")
	return cmd
}
