package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
)

// newApprovalCmds are deputy approve and deputy deny: the person's answer
// to a call waiting for approval in ID's tree (ID's own, or the nearest
// one below it: deputy run prints the root's id).
func newApprovalCmds() []*cobra.Command {
	return []*cobra.Command{approvalCmd(true), approvalCmd(false)}
}

func approvalCmd(approve bool) *cobra.Command {
	var db, reason string
	var always, asJSON bool
	use, short := "approve ID", "Approve the call an instance (or the nearest one below it) waits to have approved"
	example := "  deputy approve " + exampleID + "\n  deputy approve --always " + exampleID
	if !approve {
		use, short = "deny ID", "Refuse the call an instance (or the nearest one below it) waits to have approved"
		example = "  deputy deny " + exampleID + ` --reason "no pushes today"`
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Example: example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeInstances(instance.Asking),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, where, _, err := openInstance(ctx, db, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			ctl := durable.Control{Store: st, URL: where}
			a, err := ctl.Waiting(ctx, args[0])
			if err != nil {
				return controlErr(where, args[0], err)
			}
			if a == nil {
				return usageErr("no call of %s or below it waits for approval", args[0])
			}
			verb := "approved"
			if approve {
				err = ctl.Approve(ctx, a.InstanceID, always)
			} else {
				verb = "denied"
				err = ctl.Deny(ctx, a.InstanceID, strings.TrimSpace(reason))
			}
			if err != nil {
				return controlErr(where, a.InstanceID, err)
			}
			after, err := st.GetInstance(ctx, a.InstanceID)
			if err != nil {
				return readErr(where, err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), controlJSON{a.InstanceID, strings.Fields(use)[0], string(after.State), "done"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s's %s call (now %s)\n", verb, a.InstanceID, a.Tool, after.State)
			hintWorker(ctx, cmd.ErrOrStderr(), st, where, "answer", after)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", dbFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {id, action, state, effect} as JSON")
	if approve {
		cmd.Flags().BoolVar(&always, "always", false, "also allow the call's rule for the rest of the root's session")
	} else {
		cmd.Flags().StringVar(&reason, "reason", "", "why: the model reads it as the call's error")
	}
	return cmd
}
