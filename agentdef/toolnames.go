package agentdef

import (
	"fmt"
	"slices"
	"strings"

	"github.com/deputy-run/deputy/permission"
)

// SpawnTool is the name of the tool a parent delegates with; an omitted
// allowlist means the parent's tools minus this one.
const SpawnTool = "spawn_subagent"

// SkillTool is the tool a child loads a granted skill with.
const SkillTool = "skill"

// deputyTools are the names deputy serves, so a file may also use them.
var deputyTools = []string{
	"read_file", "write_file", "edit_file", "glob", "grep", "bash",
	"web_fetch", "web_search", SpawnTool, SkillTool, AskTool, FanOutTool,
}

// IsMCPTool reports whether name is an MCP tool reference
// (mcp__server or mcp__server__tool).
func IsMCPTool(name string) bool {
	return strings.HasPrefix(name, "mcp__") && len(name) > len("mcp__")
}

// MapToolName turns a tool name as a definition file writes it into
// deputy's. ok is false for names deputy cannot serve (team tools, other
// agents' names, Claude Code tools without an equivalent). MCP names come
// back unchanged. A Claude Code argument pattern such as Bash(git diff:*)
// maps by its tool name with pattern true: deputy does not enforce
// patterns, so the caller decides what the pattern means (see mapTools).
func MapToolName(name string) (mapped string, ok, pattern bool) {
	name = strings.TrimSpace(name)
	if IsMCPTool(name) {
		return name, true, false
	}
	if i := strings.IndexByte(name, '('); i > 0 && strings.HasSuffix(name, ")") {
		m, ok, _ := MapToolName(name[:i]) // name[:i] has no '(': no recursion beyond one level
		return m, ok, ok
	}
	if m, ok := permission.ClaudeTool(name); ok { // Claude Code's names, from the table permission rules use too
		return m, true, false
	}
	if slices.Contains(deputyTools, name) {
		return name, true, false
	}
	return "", false, false
}

// mapTools maps a declared list; unknown names are dropped and reported.
// Duplicates after mapping (Edit and MultiEdit) collapse. A non-nil input
// gives a non-nil output even when every name was dropped: a file that
// asked for specific tools never silently gets all of them.
//
// Argument patterns are not enforced, so they are read the safe way: in an
// allowlist (deny false) Bash(git diff:*) grants nothing, because granting
// all of bash would widen what the file asked for; in a denylist it denies
// the whole tool.
func mapTools(declared []string, deny bool) (mapped []string, dropped, notes []string) {
	if declared == nil {
		return nil, nil, nil
	}
	mapped = []string{}
	for _, n := range declared {
		m, ok, pattern := MapToolName(n)
		if !ok {
			dropped = append(dropped, n)
			continue
		}
		if pattern && !deny {
			notes = append(notes, fmt.Sprintf("%s is not granted: deputy does not enforce argument patterns, and all of %s would be more than asked", strings.TrimSpace(n), m))
			continue
		}
		if pattern {
			notes = append(notes, fmt.Sprintf("%s disallows all of %s: deputy does not enforce argument patterns", strings.TrimSpace(n), m))
		}
		if !slices.Contains(mapped, m) {
			mapped = append(mapped, m)
		}
	}
	return mapped, dropped, notes
}

// allows reports whether an allowlist entry admits a tool. An MCP entry
// naming only a server (mcp__github, or mcp__github__*) admits all of its
// tools, as in Claude Code.
func allows(entry, tool string) bool {
	if entry == tool {
		return true
	}
	server := strings.TrimSuffix(entry, "__*")
	return IsMCPTool(server) && !strings.Contains(strings.TrimPrefix(server, "mcp__"), "__") &&
		strings.HasPrefix(tool, server+"__")
}

// EffectiveTools is the child's tool list given the tools that exist for
// it (the parent's tools plus configured MCP tools), in available's order:
// the allowlist (or, when there is none, everything but spawning), minus
// the disallowed tools. Whether the spawn tool then stays is the depth
// rule's decision, made by the spawner.
func (d *Definition) EffectiveTools(available []string) []string {
	out := []string{}
	for _, t := range available {
		ok := false
		if d.Tools == nil {
			ok = t != SpawnTool && t != FanOutTool // all but spawning
		} else {
			for _, e := range d.Tools {
				if allows(e, t) {
					ok = true
					break
				}
			}
		}
		for _, e := range d.DisallowedTools {
			if allows(e, t) {
				ok = false
			}
		}
		if ok {
			out = append(out, t)
		}
	}
	return out
}

// Allows reports whether the definition lets its child use the tool: its
// allowlist admits it (with no allowlist, every tool but spawn_subagent
// and fan_out), and its deny list does not remove it. The spawner asks it
// of deputy's own tools (ask_parent, spawn_subagent, fan_out), which the
// parent does not hold and EffectiveTools is never given.
func (d *Definition) Allows(tool string) bool { return len(d.EffectiveTools([]string{tool})) == 1 }

// Names of the tools a parent manages its children with.
const (
	WaitTool   = "subagent_wait"
	StatusTool = "subagent_status"
	ListTool   = "subagent_list"
	SendTool   = "subagent_send"
	PauseTool  = "subagent_pause"
	ResumeTool = "subagent_resume"
	CancelTool = "subagent_cancel"
	AnswerTool = "subagent_answer"
	// ApproveTool grants or refuses a child's call that its permissions
	// hold for approval (issue 20), within the parent's own permissions.
	ApproveTool = "subagent_approve"
)

// ManageTools returns the names of the subagent_* tools, in the order
// they are offered. They come with spawn_subagent (an allowlist naming
// spawn_subagent grants them too), where a managed runtime serves them.
func ManageTools() []string {
	return []string{WaitTool, StatusTool, ListTool, SendTool, PauseTool, ResumeTool, CancelTool, AnswerTool, ApproveTool}
}

// RuntimeTools returns the names of the tools deputy's runtime serves
// itself rather than a program or the workspace: spawning, fan-out, the
// subagent_* tools, skills, asking, in the order they are offered after
// an instance's other tools. A root holds none of them; each is offered
// where its conditions hold (see agent.Task.Offer).
func RuntimeTools() []string {
	return append(append([]string{SpawnTool, FanOutTool}, ManageTools()...), SkillTool, AskTool)
}

// AskTool is the tool an instance asks who gave it its task with: its
// parent, or for a root the person.
const AskTool = "ask_parent"

// FanOutTool is the tool a parent model runs a planned batch of subagents
// with: tasks, their dependencies, and how to merge their reports.
const FanOutTool = "fan_out"
