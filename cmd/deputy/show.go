package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/termui"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

func newShowCmd() *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:               "show ID",
		Short:             "Show one instance: its state, usage, result and transcript",
		Example:           "  deputy show " + exampleID + "\n  deputy show --json " + exampleID,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeInstances(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, where, in, err := openInstance(ctx, db, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			msgs, err := st.Transcript(ctx, in.ID)
			if err != nil {
				return readErr(where, err)
			}
			trs, err := st.Transitions(ctx, in.ID)
			if err != nil {
				return readErr(where, err)
			}
			shown, err := view(ctx, st, in)
			if err != nil {
				return readErr(where, err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), struct {
					instance.Record
					Transcript  []llm.Message      `json:"transcript"`
					Transitions []store.Transition `json:"transitions"`
				}{shown, msgs, trs})
			}
			showText(cmd.OutOrStdout(), in, msgs, trs)
			if shown.Question != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "\nquestion (deputy answer %s TEXT)\n%s\n", in.ID, shown.Question)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", dbFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the instance, its transcript and its transitions as JSON")
	return cmd
}

// view is in as deputy shows an instance, here as in the HTTP API: its
// record's View, with its open question while it waits (asking, or paused
// while asking).
func view(ctx context.Context, st *store.Store, in *instance.Record) (instance.Record, error) {
	v := in.View()
	if in.State.Waiting() {
		q, err := (durable.Control{Store: st}).Question(ctx, in.ID)
		if err != nil {
			return v, err
		}
		if q != nil {
			v.Question = q.Body
		} else if a, err := (durable.Control{Store: st}).Approval(ctx, in.ID); err != nil {
			return v, err
		} else if a != nil {
			// A call waiting for approval is its question, in words, with
			// what answers it (deputy ps and show, the API).
			v.Question = approvalQuestion(a.Tool, string(a.Input), a.Rule, a.Reason, in.ID)
		}
	}
	return v, nil
}

func showText(w io.Writer, in *instance.Record, msgs []llm.Message, trs []store.Transition) {
	fmt.Fprintf(w, "%s  %s  %s", in.ID, in.Type, in.State)
	if in.Incomplete {
		fmt.Fprint(w, " (incomplete)")
	}
	fmt.Fprintln(w)
	if in.Parent != "" {
		fmt.Fprintf(w, "parent   %s\n", in.Parent)
	}
	fmt.Fprintf(w, "model    %s\nturns    %d, %d tool calls\nusage    %d in (%d cached), %d out\n", in.Model, in.Turns, in.ToolCalls,
		in.Usage.Prompt(), in.Usage.CacheReadTokens, in.Usage.OutputTokens)
	if in.Cost != nil {
		fmt.Fprintf(w, "cost     %s\n", termui.USD(*in.Cost))
	}
	if in.Error != "" {
		fmt.Fprintf(w, "error    %s\n", in.Error)
	}
	fmt.Fprintf(w, "task     %s\n", oneLineOf(in.Task, 200))
	for _, t := range trs {
		fmt.Fprintf(w, "  %s  %s → %s  %s\n", t.At.Format("15:04:05.000"), t.From, t.To, t.Cause)
	}
	fmt.Fprintf(w, "\ntranscript (%d messages)\n", len(msgs))
	for i, m := range msgs {
		printMessage(w, i, m)
	}
	if in.Report != "" {
		fmt.Fprintf(w, "\nresult\n%s\n", in.Report)
	}
}

func newPsCmd() *cobra.Command {
	var db, typ, state string
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List instances, newest first: the active ones, or --all",
		Example: `  deputy ps
  deputy ps --all --type explorer
  deputy ps --all --state failed --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, where, err := openExisting(ctx, db)
			if err != nil {
				return err
			}
			defer st.Close()
			f, err := psFilter(all, state)
			if err != nil {
				return err
			}
			list, err := st.ListInstances(ctx, f)
			if err != nil {
				return readErr(where, err)
			}
			out := make([]instance.Record, 0, len(list))
			// Newest first: what a person looks for is what just ran.
			for _, in := range slices.Backward(list) {
				if typ != "" && in.Type != typ {
					continue
				}
				v, err := view(ctx, st, in)
				if err != nil {
					return readErr(where, err)
				}
				out = append(out, v)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPARENT\tTYPE\tSTATE\tTURNS\tTOKENS\tCREATED\tTASK")
			for _, in := range out {
				parent := in.Parent
				if parent == "" {
					parent = "-"
				}
				state := string(in.State)
				if strings.HasPrefix(in.Question, "approval: ") {
					state += " (approval)" // a call waits for deputy approve or deny
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", in.ID, parent, in.Type, state, in.Turns,
					in.Usage.Total(), in.CreatedAt.Local().Format("01-02 15:04:05"), strings.TrimSpace(oneLineOf(in.Task, 60)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&db, "db", "", dbFlagHelp)
	cmd.Flags().BoolVar(&all, "all", false, "include ended instances")
	cmd.Flags().StringVar(&typ, "type", "", "only instances of this type (an agent definition's name, or root)")
	cmd.Flags().StringVar(&state, "state", "", "only instances in this state (with an ended state, --all is implied)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array, newest first")
	_ = cmd.RegisterFlagCompletionFunc("type", completeTypes)
	_ = cmd.RegisterFlagCompletionFunc("state", completeStates)
	return cmd
}

// psFilter is ps's selection: one state, or the active ones unless all.
func psFilter(all bool, state string) (store.Filter, error) {
	if state == "" {
		return store.Filter{Active: !all}, nil
	}
	st, err := instance.ParseState(state)
	if err != nil {
		return store.Filter{}, usageErr("--state: %v", err)
	}
	return store.Filter{States: []instance.State{st}}, nil
}

// printMessage prints message i of a transcript, a line per block.
func printMessage(w io.Writer, i int, m llm.Message) {
	for _, b := range m.Content {
		var line string
		switch b.Type {
		case llm.TypeText:
			line = oneLineOf(b.Text, 160)
		case llm.TypeToolUse:
			line = "call " + b.Name + " " + oneLineOf(b.Arguments(), 120)
		case llm.TypeToolResult:
			line = "result " + oneLineOf(b.Text, 140)
			if b.IsError {
				line = "error " + oneLineOf(b.Text, 140)
			}
		default:
			line = "[" + b.Type + "]"
		}
		fmt.Fprintf(w, "%3d %-9s %s\n", i, m.Role, line)
	}
}

// approvalQuestion is how a call waiting for approval reads where a
// question would: "approval: TOOL ARGS (rule R): deputy approve ID".
func approvalQuestion(tool, input, rule, reason, id string) string {
	why := reason
	if rule != "" {
		why = "rule " + rule
	}
	return fmt.Sprintf("approval: %s %s (%s): deputy approve %s [--always] or deputy deny %s --reason TEXT", tool, input, why, id, id)
}
