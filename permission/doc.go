// Package permission decides whether a tool call may run, from permission
// rules written in Claude Code's syntax, a permission mode, and the chain of
// policies a subagent inherits from its ancestors.
//
// # Rules
//
// A rule is `Tool` or `Tool(specifier)`, written with Claude Code's tool
// names (Read, Edit, Write, Bash, WebFetch, ...) or deputy's own (read_file,
// bash, ...), or an MCP reference (`mcp__server`, `mcp__server__tool`,
// `mcp__server__*`). One Claude Code name may cover several deputy tools:
// Read covers read_file, glob and grep (their path arguments), Edit covers
// write_file and edit_file. See ParseRule for every specifier form.
//
// # Decisions
//
// A Set holds allow, ask and deny rules. Set.Decide looks at deny rules
// first, then ask, then allow; the first list with a match decides, so a
// broad deny cannot be undercut by a narrower allow. No match gives Default,
// which the mode turns into a final answer (Effective).
//
// # Modes
//
// A Mode (Claude Code's permissionMode) is the baseline for calls no rule
// decides. Effective documents what each one does. They are ordered
// plan < dontAsk < default < acceptEdits < bypassPermissions, the order in
// which a subagent may narrow its parent's mode (see Mode.Wider).
//
// # Trees
//
// A Policy is a mode and a set. Policy.Child gives a subagent's policy: it
// keeps the whole chain of ancestor policies and decides a call by asking
// each of them and keeping the strictest answer (Deny over Ask over Allow).
// A child is therefore never more permissive than its parent, by
// construction rather than by computing an intersection of rule lists,
// which glob and prefix patterns make impractical. Child also refuses a
// mode wider than the parent's, so a definition that asks for more than it
// can get fails loudly instead of being silently narrowed.
//
// # Settings
//
// LoadSettings reads Claude Code's settings files
// (`{"permissions": {"allow": [...], "ask": [...], "deny": [...],
// "defaultMode": "..."}}`). Rules from every file are merged; defaultMode
// comes from the highest-precedence file that sets it. A bad allow or ask
// rule is reported and skipped; a bad deny rule fails the load, since
// dropping it would let through what its author meant to block.
package permission
