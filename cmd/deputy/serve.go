package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	deputylib "github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/mcpserver"
	"github.com/deputy-run/deputy/serve"
	"github.com/deputy-run/deputy/serve/web"
	"github.com/deputy-run/deputy/store"
)

// defaultServeAddr is loopback: the API runs agents with the user's
// tools, so it is reachable from other machines only when asked for.
const defaultServeAddr = "127.0.0.1:7420"

// serveOptions are deputy serve's flags.
type serveOptions struct {
	runtime   runtimeFlags
	addr      string
	tokenFile string
	maxConns  int
	drain     time.Duration
}

func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:7420]",
		Short: "Run instances and serve the HTTP API, live events, the web dashboard and MCP",
		Long: `Runs instances like "deputy worker" (resuming those a stopped process left) and
serves, on one port: the JSON API under /api/ (docs/api.md), server-sent events,
the web dashboard at /, and the MCP server at /mcp.

Every request needs the server's token. The first start writes one to the
data directory (beside a SQLite database: .deputy/token; for Postgres:
$DEPUTY_HOME/token or ~/.deputy/token), mode 0600, and prints it once. Programs
send it as "Authorization: Bearer TOKEN"; the dashboard asks for it once and
keeps an HttpOnly session cookie. A request without the token is refused on its
headers, its body unread; connections are capped (--max-conns), the oldest
unauthenticated or idle one closed for a new one (docs/api.md, "Limits"). It
listens on loopback unless --addr names another address. SIGINT or SIGTERM stops
it after a drain, as for "deputy worker": running steps finish within
--drain-timeout, a second signal cuts them off; unfinished instances resume at
the next start.`,
		Example: `  deputy serve --model fake
  deputy serve --model anthropic:claude-sonnet-4-5 --addr 127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.serve(cmd.Context(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", defaultServeAddr, "address to listen on (loopback unless you name another)")
	f.StringVar(&o.tokenFile, "token-file", "", "the token's file (default: in the data directory)")
	f.IntVar(&o.maxConns, "max-conns", 0, fmt.Sprintf("most connections open at once; at the cap the oldest unauthenticated or idle one is closed for a new one (default %d: from the descriptor limit)", serve.DefaultMaxConns()))
	f.DurationVar(&o.drain, "drain-timeout", durable.DefaultDrain, drainFlagHelp)
	o.runtime.register(f)
	return cmd
}

// serve opens the runtime, listens, and serves until a signal; then the
// server stops before the runtime drains, so no request reaches a
// runtime that is closing.
func (o serveOptions) serve(ctx context.Context, stderr io.Writer) error {
	drain := cmp.Or(o.drain, durable.DefaultDrain)
	ctx, hurry, release := stopSignals(ctx, stderr, drain, false)
	defer release()
	rt, url, err := o.runtime.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer closeRuntime(rt, hurry, drain, false, stderr, "deputy serve")
	opened(rt, stderr, "deputy serve: warning", false)
	tokenFile := o.tokenFile
	if tokenFile == "" {
		tokenFile = defaultTokenFile(url)
	}
	token, created, err := serve.LoadToken(tokenFile)
	if err != nil {
		return usageErr("%v", err)
	}
	srv, err := serve.New(serve.Options{Runtime: rt, Token: token, Log: slog.New(slog.NewTextHandler(stderr, nil)),
		MCP: mcpserver.Handler(rt, mcpserver.Options{Version: versionString()}), Web: web.Handler(),
		Limits: serve.Limits{MaxConns: o.maxConns}})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		srv.Close()
		return usageErr("listen on %s: %v", o.addr, err)
	}
	announce(stderr, ln.Addr().String(), tokenFile, token, created)
	return serveUntil(ctx, srv, ln, stderr)
}

// serveUntil serves srv's handler on ln until ctx ends (a signal), then
// shuts the HTTP server down: the error is the server's own failure,
// not that it was closed.
func serveUntil(ctx context.Context, srv *serve.Server, ln net.Listener, stderr io.Writer) error {
	// Harden sets the timeouts (headers 10 s, bodies 30 s, idle
	// 2 min; none on responses, which streams would hit), the
	// header cap and the connection cap (serve.Limits).
	hs := &http.Server{Handler: srv.Handler()}
	hln := srv.Harden(hs, ln)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(hln) }()
	select {
	case err := <-done:
		srv.Close()
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "deputy serve: stopping")
	// Streams end first (Shutdown waits for open ones), then the
	// requests in flight get ten seconds.
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// announce says where the server is and, the one time it is made, what
// the token is; a later start only says where the token is kept.
func announce(w io.Writer, addr, tokenFile, token string, created bool) {
	fmt.Fprintf(w, "deputy serve: listening on http://%s (dashboard /, API /api/, MCP /mcp)\n", addr)
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			fmt.Fprintf(w, "deputy serve: warning: %s is not a loopback address: other machines can reach this server (the token still guards it; use TLS in front of it)\n", host)
		}
	}
	if created {
		fmt.Fprintf(w, "deputy serve: a new token was written to %s (mode 0600); it is shown this once:\n\n    %s\n\n", tokenFile, token)
	} else {
		fmt.Fprintf(w, "deputy serve: the token is in %s\n", tokenFile)
	}
}

// defaultTokenFile is the token's place in the data directory: beside a
// SQLite database, or in deputy's home for Postgres.
func defaultTokenFile(url string) string {
	if path, ok := store.SQLitePath(url); ok {
		return filepath.Join(filepath.Dir(path), "token")
	}
	return filepath.Join(cliHome(), "token")
}

// runtimeFlags are the flags of the commands that serve a Runtime (serve,
// mcp): where the database is, the model, the workspace.
type runtimeFlags struct {
	db, model, scenario, workspace string
	executorID                     string
}

func (c *runtimeFlags) register(f interface {
	StringVar(p *string, name, value, usage string)
}) {
	f.StringVar(&c.db, "db", "", dbFlagHelp)
	f.StringVar(&c.model, "model", "", modelFlagHelp)
	f.StringVar(&c.scenario, "scenario", "", "scenario file for --model fake (default: the built-in demo)")
	f.StringVar(&c.workspace, "workspace", ".", "directory the agents work in, with their definitions, skills and deputy.yaml")
	f.StringVar(&c.executorID, "executor-id", "", executorFlagHelp)
}

// open opens the runtime the flags describe (cliOptions), and returns the
// database URL.
func (c *runtimeFlags) open(ctx context.Context, stderr io.Writer) (*deputylib.Runtime, string, error) {
	model, err := rootSpec(c.model)
	if err != nil {
		return nil, "", err
	}
	o, err := cliOptions(cliInputs{db: c.db, model: model, scenario: c.scenario, workspace: c.workspace,
		executorID: c.executorID, stderr: stderr})
	if err != nil {
		return nil, "", err
	}
	rt, err := deputylib.Open(ctx, o)
	if err != nil {
		return nil, "", openErr(err, o.DB)
	}
	return rt, o.DB, nil
}
