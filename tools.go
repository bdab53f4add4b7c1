package deputy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/fence"
	"github.com/deputy-run/deputy/sandbox"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
	"github.com/deputy-run/deputy/tool/shell"
)

// Site is where a root works, as it was recorded when the root started,
// so that every later run of it (after an answer, a resume, a crash, in
// another process) builds the same tools: Options.RunTools is given it.
type Site struct {
	// Workspace is the root's directory (its runtime's Options.Workspace).
	Workspace string
	// SearchURL is the SearXNG-compatible JSON search API web_search asks
	// (its runtime's Options.SearchURL); empty: no web_search.
	SearchURL string
	// PassEnv names the variables bash's programs get beyond its
	// allowlist (deputy.yaml's bash.env, as the run's Config had it).
	PassEnv []string
}

// siteOf is where a run's spec says its root works.
func siteOf(s durable.Spec) Site {
	site := Site{Workspace: s.Workspace, SearchURL: s.SearchURL}
	if s.Config != nil {
		site.PassEnv = s.Config.Bash.Env
	}
	return site
}

// BuiltinTools returns deputy's built-in tools working in s.Workspace, in
// a stable order: read_file, write_file, edit_file, glob, grep (confined to
// the workspace, deputy's database and token hidden), bash (in the
// workspace, with an allowlisted environment plus s.PassEnv), web_fetch,
// and web_search when s.SearchURL is set.
//
// A root holds only the tools it is given: put these in Options.Tools for
// one workspace, or use BuiltinTools itself as Options.RunTools so every
// root gets those of its own recorded workspace (what the CLI does).
func BuiltinTools(s Site) ([]Tool, error) {
	if fi, err := os.Stat(s.Workspace); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("built-in tools: workspace %s is not a directory", s.Workspace)
	}
	tools, err := builtin.Tools(builtin.Config{Workspace: s.Workspace, SearchURL: s.SearchURL, BashPassEnv: s.PassEnv})
	if err != nil {
		return nil, fmt.Errorf("built-in tools: %w", err)
	}
	return tools, nil
}

// toolsOf is the durable engine's Options.Tools: what a root of this
// runtime holds in every run, RunTools' for its recorded site first, then
// Tools.
func toolsOf(o *Options) func(durable.Spec) (*tool.Set, error) {
	return func(s durable.Spec) (*tool.Set, error) {
		held := o.Tools
		if o.RunTools != nil {
			more, err := o.RunTools(siteOf(s))
			if err != nil {
				return nil, fmt.Errorf("tools of workspace %s: %w", s.Workspace, err)
			}
			held = slices.Concat(more, held)
		}
		set, err := tool.NewSet(held...)
		if err != nil {
			return nil, fmt.Errorf("tools: %w", err)
		}
		return set, nil
	}
}

// fenceOf is the durable engine's Options.Fence: fenced children of a root
// work in a worktree of its workspace and/or a sandbox, where the built-in
// tools are rebuilt; the fence replaces, by name, only the built-ins the
// child's parent holds (agent's fence, tool.Set.Replace), so it adds none.
// A program's own tools are not fenced: they keep running in the program.
func fenceOf(s durable.Spec) agent.Fencer {
	var iso agentdef.IsolationConfig
	if s.Config != nil {
		iso = s.Config.Isolation
	}
	// A granted variable must pass both filters a fenced command's
	// environment goes through: bash's allowlist and the sandbox's.
	site := siteOf(s)
	return &fence.Fencer{Workspace: s.Workspace, Config: iso, Env: site.PassEnv,
		Tools: func(dir string, sb shell.Sandbox) (*tool.Set, error) {
			// The file tools run in deputy's process, outside the
			// sandbox: they must hide what it hides from programs.
			tools, err := builtin.Tools(builtin.Config{Workspace: dir, SearchURL: site.SearchURL, Sandbox: sb,
				ReadOnly: fence.Protected, Hidden: fence.Hidden, BashPassEnv: site.PassEnv})
			if err != nil {
				return nil, fmt.Errorf("tools: %w", err)
			}
			return tool.NewSet(tools...)
		}}
}

// recoverFences removes what fences of a process that died left behind:
// the sandboxes' snapshots and /tmp directories, and the worktrees, in
// workspace's repository, of this database's instances that have ended
// (branches holding finished work stay, for deputy merge). It returns the
// ids whose worktrees it removed.
func recoverFences(ctx context.Context, st *store.Store, workspace string) ([]string, error) {
	swept := sandbox.Sweep("")
	gone, err := fence.Prune(ctx, workspace, func(id string) bool {
		// Only this database's instances that ended: a worktree of an
		// instance it does not know may be another deputy's, at work.
		in, err := st.GetInstance(ctx, id)
		return err != nil || !in.State.Terminal()
	})
	return gone, errors.Join(swept, err)
}
