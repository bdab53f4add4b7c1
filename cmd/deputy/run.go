package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
)

// rootSystemPrompt is the system prompt of an agent started by `deputy run`.
const rootSystemPrompt = `You are deputy, an agent that completes the user's task by working in a workspace directory with tools.
Read before you change anything; make the smallest change that does the job; check your work.
Paths are relative to the workspace root %s; the file tools cannot reach outside it.
When you are done, answer with a short report of what you did and what you found.`

type runOptions struct {
	model     string
	scenario  string
	workspace string
	maxTurns  int
	asJSON    bool
	quiet     bool
	searchURL string
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [flags] TASK",
		Short: "Run one agent on a task in a workspace and print its answer",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTask(cmd.Context(), o, strings.Join(args, " "), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "", modelFlagHelp)
	f.StringVar(&o.scenario, "scenario", "", "scenario file (YAML) for --model fake (default: the built-in demo)")
	f.StringVar(&o.workspace, "workspace", ".", "directory the agent's file and shell tools work in")
	f.IntVar(&o.maxTurns, "max-turns", loop.DefaultMaxTurns, "maximum model calls")
	f.BoolVar(&o.asJSON, "json", false, "print a JSON object: answer, stop_reason, usage, turns, tool_calls")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "do not print tool calls as they happen (stderr)")
	f.StringVar(&o.searchURL, "search-url", os.Getenv("DEPUTY_SEARCH_URL"), "SearXNG-compatible JSON search API for web_search (default $DEPUTY_SEARCH_URL; without it the tool is absent)")
	return cmd
}

// runResult is the --json output.
type runResult struct {
	Answer     string          `json:"answer"`
	StopReason loop.StopReason `json:"stop_reason"`
	Usage      llm.Usage       `json:"usage"`
	Turns      int             `json:"turns"`
	ToolCalls  int             `json:"tool_calls"`
	Model      string          `json:"model"`
	Error      string          `json:"error,omitempty"`
}

func runTask(ctx context.Context, o runOptions, task string, stdout, stderr io.Writer) error {
	if strings.TrimSpace(task) == "" {
		return usageErr("the task is empty")
	}
	if o.maxTurns < 1 {
		return usageErr("--max-turns must be at least 1")
	}
	model, modelName, err := resolveModel(o.model, o.scenario)
	if err != nil {
		return err
	}
	ws, err := filepath.Abs(o.workspace)
	if err != nil {
		return usageErr("workspace: %v", err)
	}
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return usageErr("workspace %s is not a directory", ws)
	}
	tools, err := builtin.Tools(builtin.Config{Workspace: ws, SearchURL: o.searchURL})
	if err != nil {
		return usageErr("tools: %v", err)
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		return usageErr("tools: %v", err)
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := loop.Config{
		Model:     model,
		ModelName: modelName,
		System:    fmt.Sprintf(rootSystemPrompt, ws),
		Tools:     set,
		Limits:    loop.Limits{MaxTurns: o.maxTurns},
	}
	if !o.quiet {
		cfg.OnEvent = progress(stderr)
	}
	res, runErr := loop.Run(ctx, cfg, []llm.Message{llm.UserText(task)})

	if o.asJSON {
		out := runResult{Answer: res.Answer, StopReason: res.StopReason, Usage: res.Usage,
			Turns: res.Turns, ToolCalls: res.ToolCalls, Model: modelName}
		if runErr != nil {
			out.Error = runErr.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else if res.Answer != "" {
		fmt.Fprintln(stdout, res.Answer)
	}
	switch {
	case runErr != nil && isConfigError(runErr):
		return &exitError{code: exitUsage, err: runErr}
	case runErr != nil:
		return &exitError{code: exitFailed, err: fmt.Errorf("run %s: %w", res.StopReason, runErr)}
	case res.StopReason != loop.StopCompleted:
		return &exitError{code: exitLimited, err: fmt.Errorf("run stopped: %s after %d turns", res.StopReason, res.Turns)}
	}
	return nil
}

// isConfigError tells a failure of the setup (wrong key, unknown model,
// nothing listening at the endpoint) from a failure of the run, so scripts
// can react: the former exits 2 like any configuration error.
func isConfigError(err error) bool {
	var api *llm.APIError
	if errors.As(err, &api) {
		switch api.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return true
		}
		return false
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// progress prints one line per tool call to w, so a person watching sees
// the agent work without the answer on stdout being mixed with it.
func progress(w io.Writer) func(loop.Event) {
	return func(e loop.Event) {
		switch e.Kind {
		case loop.EventToolCall:
			fmt.Fprintf(w, "· %s %s\n", e.Block.Name, clip(string(e.Block.Input), 120))
		case loop.EventToolResult:
			if e.Block.IsError {
				fmt.Fprintf(w, "  ! %s\n", clip(firstLine(e.Block.Text), 160))
			}
		case loop.EventModelAttempt:
			if a := e.Attempt; a.Retry {
				fmt.Fprintf(w, "· %s attempt %d failed (%s), retrying in %s\n", a.Provider, a.N, a.Reason, a.Wait.Round(time.Millisecond))
			}
		case loop.EventCompaction:
			fmt.Fprintf(w, "· compacted %d messages\n", e.Compacted)
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
