package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/fence"
	"github.com/deputy-run/deputy/sandbox"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool/shell/tether"
	"github.com/deputy-run/deputy/worktree"
)

// `deputy doctor` and `deputy merge`: the isolation levels as a person
// meets them.

func newDoctorCmd() *cobra.Command {
	var workspace, config string
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "doctor",
		Short:   "Report which isolation levels work on this machine (with the fix for each missing piece), and the permission rules and hooks in force",
		Example: "  deputy doctor\n  deputy doctor --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := filepath.Abs(workspace)
			if err != nil {
				return usageErr("workspace: %v", err)
			}
			cfg, err := cliConfig(ws, config, "")
			if err != nil {
				return err
			}
			rep := sandbox.Check("", cfg.Isolation.RootFS)
			git := sandbox.Item{Name: "git", Needed: "worktree"}
			if v, err := worktree.GitVersion(cmd.Context()); err != nil {
				git.Detail, git.Fix = err.Error(), "apt-get install git"
			} else {
				git.OK, git.Detail = true, v
			}
			rep.Items = append(rep.Items, git)
			teth := tetherItem()
			rep.Items = append(rep.Items, teth, trustItem(ws))
			levels := []level{{"none", nil}, {"sandbox", rep.Sandbox()}, {"container", rep.Container()},
				{"worktree", itemErr(git)}}
			perms := permissionsReport(ws, cfg)
			if asJSON {
				out := struct {
					Items  []itemJSON         `json:"items"`
					Levels map[string]*string `json:"levels"` // null: works; else why not
					Tether string             `json:"tether"` // tether.Mode(), after a trial program
					Perms  permsReport        `json:"permissions"`
				}{Items: itemsJSON(rep.Items), Levels: map[string]*string{}, Tether: tether.Mode(), Perms: perms}
				for _, l := range levels {
					out.Levels[l.name] = nil
					if l.err != nil {
						msg := l.err.Error()
						out.Levels[l.name] = &msg
					}
				}
				return writeJSONLine(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			fmt.Fprint(w, rep.String())
			fmt.Fprintln(w)
			for _, l := range levels {
				if l.err == nil {
					fmt.Fprintf(w, "isolation %-9s works\n", l.name)
				} else {
					fmt.Fprintf(w, "isolation %-9s does not work here (see above)\n", l.name)
				}
			}
			fmt.Fprintf(w, "unfenced tools are tethered by: %s\n", tetherMeaning[tether.Mode()])
			perms.print(w)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&workspace, "workspace", ".", "directory whose deputy.yaml names the root filesystem, and whose .claude/settings*.json are read")
	f.StringVar(&config, "config", "", "deputy.yaml to read (default: the workspace's, then ~/.deputy's)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// trustItem reports a fired fence tripwire's marker: while it exists no
// run starts on the workspace (fence.CheckTrusted), and doctor is where a
// user looking for the reason finds it.
func trustItem(ws string) sandbox.Item {
	it := sandbox.Item{Name: "trust", Needed: "every run in this workspace"}
	var ue *fence.UntrustedError
	switch err := fence.CheckTrusted(ws); {
	case err == nil:
		it.OK, it.Detail = true, "no fence tripwire has fired here"
	case errors.As(err, &ue):
		it.Detail, it.Fix = err.Error(), "review the files it names, then remove "+ue.Marker
	default:
		it.Detail = err.Error()
	}
	return it
}

// tetherMeaning says what each tether mode promises for the programs
// unfenced tools start (docs/tool-processes.md).
var tetherMeaning = map[string]string{
	tether.ModePIDNamespace: tether.ModePIDNamespace + " + parent-death signal (a program and everything it " +
		"started die with deputy, even SIGKILLed)",
	tether.ModeUserPIDNamespace: tether.ModeUserPIDNamespace + " + parent-death signal (a program and everything " +
		"it started die with deputy, even SIGKILLed)",
	tether.ModeParentDeath: tether.ModeParentDeath + " (namespaces are refused here: a program dies with deputy, " +
		"but what it left running in the background may survive it)",
	tether.ModeNone: tether.ModeNone + " (not Linux: deputy ends programs while it lives; nothing ends them after)",
}

// tetherItem starts a trial program (deputy version) as the bash tool and
// stdio MCP servers start theirs, so that the mode reported is what works
// here, not only what would be tried first (until a program has started,
// tether.Mode says the latter).
func tetherItem() sandbox.Item {
	it := sandbox.Item{Name: "tether", Needed: "unfenced tools"}
	exe, err := os.Executable()
	if err == nil {
		var cmd *exec.Cmd
		var release func()
		cmd, release, err = tether.Start(func() *exec.Cmd { return exec.Command(exe, "version") },
			func(c *exec.Cmd) error { return c.Start() })
		if err == nil {
			err = cmd.Wait()
			release()
		}
	}
	mode := tether.Mode()
	it.Detail = mode
	if mode == tether.ModePIDNamespace || mode == tether.ModeUserPIDNamespace {
		it.Detail += " + parent-death signal"
	}
	switch {
	case err != nil:
		it.Detail = fmt.Sprintf("%s; the trial program failed: %v", mode, err)
		it.Fix = "see the error"
	case mode == tether.ModePIDNamespace || mode == tether.ModeUserPIDNamespace:
		it.OK = true
	case mode == tether.ModeParentDeath && os.Geteuid() == 0:
		it.Fix = "allow PID namespaces: CAP_SYS_ADMIN (in a container: --cap-add SYS_ADMIN, or a seccomp profile that allows unshare)"
	case mode == tether.ModeParentDeath:
		it.Fix = "allow unprivileged user namespaces (user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1, " +
			"kernel.apparmor_restrict_unprivileged_userns=0)"
	default:
		it.Fix = "run deputy on Linux"
	}
	return it
}

// itemJSON is a check of doctor's as --json prints it: the JSON keys
// every command prints are snake_case, and sandbox.Item has no tags.
type itemJSON struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
	Needed string `json:"needed"`
}

func itemsJSON(items []sandbox.Item) []itemJSON {
	out := make([]itemJSON, len(items))
	for i, it := range items {
		out[i] = itemJSON(it)
	}
	return out
}

type level struct {
	name string
	err  error
}

func itemErr(it sandbox.Item) error {
	if it.OK {
		return nil
	}
	return fmt.Errorf("%s: %s; fix: %s", it.Name, it.Detail, it.Fix)
}

func newMergeCmd() *cobra.Command {
	var db, workspace string
	cmd := &cobra.Command{
		Use:   "merge ID",
		Short: "Merge the branch of a subagent that worked in a worktree into the workspace's current branch",
		Long: `A subagent of a type with worktree: true works on its own branch, deputy/ID; when
it completes, its changes are committed there and its report names the branch.
merge brings them into the workspace's current branch with a merge commit. A
conflict changes nothing and names the files.`,
		Example:           "  deputy merge " + exampleID,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeInstances(store.Completed),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id := args[0]
			st, _, in, err := openInstance(ctx, db, id)
			if err != nil {
				return err
			}
			st.Close()
			if in.State != store.Completed {
				return usageErr("instance %s is %s: only a completed subagent's branch is merged", id, in.State)
			}
			ws, err := filepath.Abs(workspace)
			if err != nil {
				return usageErr("workspace: %v", err)
			}
			return mergeBranch(ctx, cmd, ws, worktree.BranchName(id))
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "", dbFlagHelp)
	f.StringVar(&workspace, "workspace", ".", "the workspace (a git repository) the subagent's parent worked in")
	return cmd
}

func mergeBranch(ctx context.Context, cmd *cobra.Command, ws, branch string) error {
	err := worktree.Merge(ctx, ws, branch)
	var conflict *worktree.ConflictError
	switch {
	case errors.As(err, &conflict):
		return &exitError{code: exitFailed, err: err}
	case err != nil:
		return usageErr("%v", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "merged %s into the workspace's current branch\n", branch)
	return nil
}
