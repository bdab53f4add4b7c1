package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	deputylib "github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/mcpserver"
	"github.com/deputy-run/deputy/store"
)

func newMcpCmd() *cobra.Command {
	var c runtimeFlags
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve deputy's subagents to an MCP client (a coding agent, an editor) over stdio",
		Long: `Speaks the Model Context Protocol on stdin and stdout until the client closes
stdin. Its tools start subagents of the workspace's types (spawn_subagent, in the
foreground or the background), follow them (subagent_wait, subagent_status,
subagent_list), answer and steer them (subagent_answer, subagent_send,
subagent_pause, subagent_resume, subagent_cancel) and describe the types
(list_definitions). Instances are recorded in the database (--db) and run
durably: one still running when the client goes away is resumed by the next
deputy mcp, serve or worker on that database. Logs go to stderr only.

A client's configuration, for example:
    {"command": "deputy", "args": ["mcp", "--model", "anthropic:claude-sonnet-4-5"]}`,
		Example: `  deputy mcp --model fake
  deputy mcp --model anthropic:claude-sonnet-4-5 --workspace ~/src/project`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stderr := cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rt, _, err := c.open(ctx, stderr)
			if errors.Is(err, deputylib.ErrBusy) {
				return heldByServe(c.db)
			} else if err != nil {
				return err
			}
			defer rt.Close()
			opened(rt, stderr, "deputy mcp: warning", false)
			// stdout is the protocol: the SDK's logs, like everything
			// else said, go to stderr.
			logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			srv := mcpserver.New(rt, mcpserver.Options{Version: versionString(), Logger: logger})
			err = srv.Run(ctx, &mcp.StdioTransport{})
			if err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil // the client closed stdin, or a signal came
			}
			return &exitError{code: exitFailed, err: fmt.Errorf("mcp: %w", err)}
		},
	}
	c.register(cmd.Flags())
	return cmd
}

// heldByServe is deputy mcp's refusal on a SQLite database another
// process runs instances on: one process at a time runs a SQLite
// database's instances, and when that is deputy serve, it serves MCP
// itself, on /mcp, so the client is told to go there.
func heldByServe(db string) error {
	url := dbURL(db)
	if _, ok := store.SQLitePath(url); !ok {
		return busyErr(url)
	}
	return usageErr("another deputy process is running instances on %s, and a SQLite database has one such process "+
		"at a time; if it is deputy serve, connect your MCP client to serve's MCP endpoint instead: "+
		"http://ADDRESS/mcp (the address serve printed, %s by default) with the header "+
		"\"Authorization: Bearer TOKEN\" (the token is in %s)", dbName(url), defaultServeAddr, defaultTokenFile(url))
}
