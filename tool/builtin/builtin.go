// Package builtin assembles deputy's built-in tools from one Config.
package builtin

import (
	"fmt"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/fstool"
	"github.com/deputy-run/deputy/tool/shell"
	"github.com/deputy-run/deputy/tool/web"
)

// Config configures the built-in tools. Only Workspace is required; zero
// fields take each tool's defaults.
type Config struct {
	// Workspace is the directory the file tools are confined to and where
	// bash runs. It must exist.
	Workspace string
	// Clock times bash, web_fetch and web_search timeouts (clock.Real).
	Clock clock.Clock

	// SearchURL is the base URL of a SearXNG instance for web_search.
	// Without it (and without Searcher) web_search is not offered.
	SearchURL string
	// Searcher overrides SearchURL with any backend.
	Searcher web.Searcher

	// Files bounds the file tools.
	Files fstool.Limits

	BashTimeout    time.Duration // default per command (120 s)
	BashMaxTimeout time.Duration // cap on timeout_s (600 s)
	BashMaxOutput  int           // bytes of output kept (30,000)
	// BashEnv is the environment commands' variables are chosen from
	// (os.Environ() when nil). Commands never get all of it: only the
	// allowlisted names (shell.AllowEnv) and those in BashPassEnv, never
	// deputy's own, and a sandboxed command then only what the sandbox
	// passes too (sandbox.Policy.Env).
	BashEnv []string
	// BashPassEnv names more variables of BashEnv commands get, as the
	// operator granted them (deputy.yaml's bash.env; shell.Config.PassEnv).
	BashPassEnv []string
	// Sandbox, when set, confines every command bash runs (a fenced
	// child's sandbox.Box).
	Sandbox shell.Sandbox
	// ReadOnly are workspace-relative paths the file tools may read but
	// not write (fstool.Workspace.ReadOnly).
	ReadOnly []string
	// Hidden are workspace-relative paths that do not exist for the file
	// tools (fstool.Workspace.Hide), beyond Secrets, which are always
	// hidden: a fenced child's whole .deputy/ (fence.Hidden).
	Hidden []string

	// FetchPolicy decides which addresses web_fetch may reach
	// (web.DefaultPolicy: everything but link-local/metadata).
	FetchPolicy  web.AddrPolicy
	FetchTimeout time.Duration // (30 s)
	FetchMaxRead int64         // body bytes read (2 MiB)
}

// Secrets are the workspace's files that every agent's file tools, fenced
// or not, treat as absent: deputy's default database (with SQLite's
// journal files), which holds every run's transcripts, tool output
// included, and the server's token beside it (cmd/deputy's default). A
// model reads files it is pointed at, and a prompt-injected one would
// read these and pass them on (a grep for "Bearer" suffices); no task
// needs them through a file tool. The rest of .deputy/ (agents/, skills/)
// stays readable and writable to unfenced agents, which may be asked to
// write a definition. This is no fence for an unfenced agent's bash, which
// runs as deputy and can read them: it keeps them out of the file tools'
// reach and their walks. A database placed elsewhere in the workspace
// (--db, $DEPUTY_DB) is not covered.
var Secrets = []string{
	".deputy/deputy.db", ".deputy/deputy.db-wal", ".deputy/deputy.db-shm", ".deputy/deputy.db-journal",
	".deputy/token",
}

// Tools returns the built-in tools in a stable order: read_file,
// write_file, edit_file, glob, grep, bash, web_fetch, and web_search when a
// backend is configured.
func Tools(cfg Config) ([]tool.Tool, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	ws, err := fstool.NewWorkspace(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	tools := fstool.Tools(ws.ReadOnly(cfg.ReadOnly...).Hide(Secrets...).Hide(cfg.Hidden...), cfg.Files)
	bash, err := shell.New(shell.Config{
		Dir:            ws.Dir(),
		Clock:          cfg.Clock,
		DefaultTimeout: cfg.BashTimeout,
		MaxTimeout:     cfg.BashMaxTimeout,
		MaxOutput:      cfg.BashMaxOutput,
		Env:            cfg.BashEnv,
		PassEnv:        cfg.BashPassEnv,
		Sandbox:        cfg.Sandbox,
	})
	if err != nil {
		return nil, err
	}
	tools = append(tools, bash, web.NewFetch(web.FetchConfig{
		Clock:     cfg.Clock,
		Timeout:   cfg.FetchTimeout,
		MaxBytes:  cfg.FetchMaxRead,
		AllowAddr: cfg.FetchPolicy,
	}))
	searcher := cfg.Searcher
	if searcher == nil && cfg.SearchURL != "" {
		s, err := web.NewSearXNG(cfg.SearchURL, nil)
		if err != nil {
			return nil, fmt.Errorf("web_search: %w", err)
		}
		searcher = s
	}
	if t := web.NewSearch(web.SearchConfig{Searcher: searcher, Clock: cfg.Clock}); t != nil {
		tools = append(tools, t)
	}
	return tools, nil
}

// Set is Tools wrapped in a tool.Set.
func Set(cfg Config) (*tool.Set, error) {
	tools, err := Tools(cfg)
	if err != nil {
		return nil, err
	}
	return tool.NewSet(tools...)
}
