// Command deputy-bench runs deputy's macro benchmarks and prints one JSON
// object per figure: "loop" (the agent loop's cost per turn, issue 2),
// "subagents" (context economy, fork cache reuse, fan-out, issue 4) and
// "orchestration" (a fan_out of many tasks and a dependency graph, in memory
// and durably, issue 7). docs/benchmarks.md has the full runs.
//
// It is a command of its own rather than a `deputy bench` subcommand so that
// the deputy binary users install does not carry the benchmark workloads
// (internal/benchsub, internal/benchloop) nor the code that drives them.
//
// Exit codes: 0 every figure was printed; 1 a benchmark failed; 2 usage
// error (nothing ran).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
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

// failed marks err as a benchmark's failure (exit 1), not a usage error.
func failed(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitFailed, err: err}
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
		fmt.Fprintln(stderr, "deputy-bench:", ee.err)
		return ee.code
	}
	// cobra's own errors (unknown flag or command, wrong arg count) are
	// usage errors.
	fmt.Fprintln(stderr, "deputy-bench:", err)
	return exitUsage
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	var repeats int
	root := &cobra.Command{
		Use:           "deputy-bench",
		Short:         "Run deputy's macro benchmarks; one JSON line per figure",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Naming no benchmark runs nothing: an error, so a script does not
		// read an empty output as figures.
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usageErr("name a benchmark: loop, subagents or orchestration (see deputy-bench --help)")
		},
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if repeats < 1 {
				return usageErr("--repeats must be at least 1")
			}
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().IntVar(&repeats, "repeats", 5, "repeats; figures are medians")
	root.AddCommand(newLoopCmd(&repeats), newSubagentsCmd(&repeats), newOrchestrationCmd(&repeats), newFakeLLMCmd(), newFakeWireCmd(&repeats))
	return root
}
