package agent

// MCP servers of a definition at work: a child's servers start when it
// starts (startMCP: at the spawn, and again at the start of each later
// run), their tools join its tool set under mcp__server__tool, and they
// stop when its run ends, however it ends (stopMCP). What a definition
// says, and how it becomes a server's final config (MCPServer.Resolve),
// is package agentdef's; the client itself is package tool/mcptool.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/mcptool"
)

// DefaultMCPStartTimeout bounds the start of one MCP server (its process
// or connection, the handshake, its tool list) unless its definition says
// otherwise (startTimeout).
const DefaultMCPStartTimeout = 30 * time.Second

// mcpRun is what one run of a child holds of its servers.
type mcpRun struct {
	sessions []*mcptool.Session
}

// mcpRuns holds each running child's servers, by node, from startMCP to
// stopMCP: kept beside the node rather than in it, since most children
// have none.
var mcpRuns sync.Map // *node → *mcpRun

// startMCP starts the MCP servers of n's definition, lists their tools and
// offers the ones its allowlist and deny list leave, under
// mcp__server__tool. It is called when a spawn prepares the child (so a
// server that cannot start refuses the spawn, nothing listed) and at the
// start of each later run (work: a child resumed after it asked or was
// paused starts them again); it does nothing when n's servers run already
// or it has none. On error no server is left running.
func (tr *tree) startMCP(ctx context.Context, n *node) error {
	if n.def == nil {
		return nil
	}
	if _, ok := mcpRuns.Load(n); ok {
		return nil
	}
	servers := n.def.StartedServers()
	if len(servers) == 0 {
		return nil
	}
	sessions := make([]*mcptool.Session, len(servers))
	tools := make([][]*mcptool.Tool, len(servers))
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sessions[i], tools[i], errs[i] = tr.connectMCP(ctx, s)
		}()
	}
	wg.Wait()
	run := &mcpRun{}
	for _, s := range sessions {
		if s != nil {
			run.sessions = append(run.sessions, s)
		}
	}
	if err := errors.Join(errs...); err != nil {
		run.stop()
		return fmt.Errorf("%s cannot start its MCP servers: %w", n.def.Name, err)
	}
	if err := offerMCP(n, slices.Concat(tools...), servers); err != nil {
		run.stop()
		return fmt.Errorf("%s: %w", n.def.Name, err)
	}
	mcpRuns.Store(n, run)
	return nil
}

// connectMCP starts one server and lists its tools within its start
// timeout, on the tree's clock.
func (tr *tree) connectMCP(ctx context.Context, s agentdef.MCPServer) (*mcptool.Session, []*mcptool.Tool, error) {
	var allowed []string
	if c := tr.r.Config; c != nil {
		allowed = c.MCP.Env
	}
	srv, err := s.Resolve(os.LookupEnv, allowed)
	if err != nil {
		return nil, nil, err
	}
	d := s.StartTimeout
	if d <= 0 {
		d = DefaultMCPStartTimeout
	}
	ctx, cancel := clock.WithTimeout(ctx, tr.clock, d, fmt.Errorf("start timeout of %s", d))
	defer cancel()
	sess, err := mcptool.Connect(ctx, srv)
	if err != nil {
		return nil, nil, err
	}
	ts, err := sess.Tools(ctx)
	if err != nil {
		sess.Close()
		return nil, nil, err
	}
	return sess, ts, nil
}

// offerMCP adds the servers' allowed tools to n's tool set. An isolated
// child's set has no MCP tools before (its parent's are its parent's).
// A fork child's set is its parent's, which may hold the parent's MCP
// tools: those of a server this child runs too are served by the child's
// own session under the same names and specs, so the forked prefix holds;
// those its server no longer lists are refused. Other parents' MCP tools
// were refused already (forkChild).
func offerMCP(n *node, tools []*mcptool.Tool, servers []agentdef.MCPServer) error {
	var full []string
	byFull := map[string]tool.Tool{}
	for _, t := range tools {
		full = append(full, t.FullName())
		byFull[t.FullName()] = t
	}
	var allowed []tool.Tool
	for _, f := range n.def.EffectiveTools(full) {
		allowed = append(allowed, byFull[f])
	}
	own, err := tool.NewSet(allowed...)
	if err != nil {
		return fmt.Errorf("MCP tools: %w", err)
	}
	ours := func(name string) bool {
		return agentdef.IsMCPTool(name) && slices.ContainsFunc(servers, func(s agentdef.MCPServer) bool { return s.Name == agentdef.MCPServerOf(name) })
	}
	cur := n.cfg.Tools.Refuse(func(name string) bool {
		_, listed := own.Lookup(name)
		outside := len(n.def.EffectiveTools([]string{name})) == 0 // refused already, by the allowlist
		return !ours(name) || listed || outside
	}, "its MCP server no longer offers it")
	cur = cur.Replace(own)
	var add []string
	for _, name := range own.Names() {
		if _, ok := cur.Lookup(name); !ok {
			add = append(add, name)
		}
	}
	if cur, err = cur.Join(own.Filter(add, nil)); err != nil {
		return fmt.Errorf("MCP tools: %w", err)
	}
	n.cfg.Tools = cur
	return nil
}

// stopMCP stops n's servers, if it has any running: when its run ends,
// however it ends, and when a prepared child never runs.
func (tr *tree) stopMCP(n *node) {
	if r, ok := mcpRuns.LoadAndDelete(n); ok {
		r.(*mcpRun).stop()
	}
}

// stop closes the sessions at once: each may wait for its server to exit.
func (r *mcpRun) stop() {
	var wg sync.WaitGroup
	for _, s := range r.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Close() // nothing to tell: the child's run is over
		}()
	}
	wg.Wait()
}
