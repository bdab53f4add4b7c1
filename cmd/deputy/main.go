// Command deputy runs LLM agents that delegate to managed subagents.
//
// Exit codes: 0 the run completed; 1 the run failed (model error,
// cancelled); 2 usage or configuration error (nothing ran); 3 the run was
// stopped by a limit (its partial answer is still printed).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitLimited = 3
	// exitWaiting: the run stopped to wait, the instance has not ended: it
	// asks a question (deputy answer) or was paused (deputy resume).
	exitWaiting = 4
)

// exitError carries an exit code up to main; its message is printed once.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes the CLI and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, errLine(ee.err))
		}
		return ee.code
	}
	// cobra's own errors (unknown flag, wrong arg count) are usage errors.
	fmt.Fprintln(stderr, errLine(err))
	return exitUsage
}

// errLine is err as deputy prints it: "deputy: " once. The library's
// errors begin with "deputy: " too (a program printing them needs it), and
// layers that wrap them would otherwise print it twice.
func errLine(err error) string { return "deputy: " + unprefixed(err.Error()) }

// unprefixed is msg without the "deputy: " its layers put in front of it
// or after their own context.
func unprefixed(msg string) string {
	for {
		rest, ok := strings.CutPrefix(msg, "deputy: ")
		if !ok {
			break
		}
		msg = rest
	}
	return strings.ReplaceAll(msg, ": deputy: ", ": ")
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "deputy",
		Short: "Run LLM agents that hand subtasks to managed subagents",
		Example: `  deputy run --model fake "Describe this workspace"   # offline, on the scripted model
  deputy ps --all                                     # what ran here, newest first
  deputy completion bash > ~/.local/share/bash-completion/completions/deputy`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().Bool(noColorFlag, false, "no colour and no spinner, even on a terminal (as $NO_COLOR does)")
	root.AddCommand(newRunCmd(), newWorkerCmd(), newWorkersCmd(), newShowCmd(), newPsCmd(), newTreeCmd(), newLogsCmd(), newFakeLLMCmd(),
		newVersionCmd(), newAgentsCmd(), newDoctorCmd(), newMergeCmd(), newServeCmd(), newMcpCmd(), newRmCmd(), newPruneCmd())
	root.AddCommand(newControlCmds()...)
	root.AddCommand(newApprovalCmds()...)
	// Made here rather than by Execute, so that they get examples (and
	// the tests see them) like every other command.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	addExamples(root)
	return root
}
