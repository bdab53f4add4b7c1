package permission

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Mode is Claude Code's permission mode (permissionMode, defaultMode).
type Mode string

// The modes, from the one that lets through least to the one that lets
// through most.
const (
	ModePlan              Mode = "plan"
	ModeDontAsk           Mode = "dontAsk"
	ModeDefault           Mode = "default"
	ModeAcceptEdits       Mode = "acceptEdits"
	ModeBypassPermissions Mode = "bypassPermissions"
)

var modes = []Mode{ModePlan, ModeDontAsk, ModeDefault, ModeAcceptEdits, ModeBypassPermissions}

// ParseMode reads a mode as settings files write it. "" is default, and
// so is "manual", Claude Code's newer alias for it.
func ParseMode(s string) (Mode, error) {
	switch t := strings.TrimSpace(s); t {
	case "", "manual":
		return ModeDefault, nil
	default:
		for _, m := range modes {
			if string(m) == t {
				return m, nil
			}
		}
	}
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown permission mode %q: want one of %s", s, strings.Join(names, ", "))
}

// rank orders the modes by how much they let through; an unknown mode
// ranks with plan, the safe side.
func (m Mode) rank() int {
	if m == "" {
		return 2
	}
	for i, n := range modes {
		if n == m {
			return i
		}
	}
	return 0
}

// Wider reports whether m comes after o in the order plan < dontAsk <
// default < acceptEdits < bypassPermissions. Call by call the order is
// partial: plan asks about a read that dontAsk would deny, and dontAsk
// allows a bash command that plan denies. Policy.Child uses this nominal
// order (so a plan subagent may run under a dontAsk parent) and relies on
// the chain of policies for the per-call guarantee.
func (m Mode) Wider(o Mode) bool { return m.rank() > o.rank() }

// readOnly are the tools with no side effects of their own. Anything not
// listed (write_file, edit_file, bash, web_fetch, every MCP tool, tools
// added later) counts as side-effecting, the safe default. Spawning is
// read-only here because the child is held to a narrower policy itself.
var readOnly = map[string]bool{
	"read_file": true, "glob": true, "grep": true, "web_search": true,
	"spawn_subagent": true, "skill": true, "ask_parent": true, "fan_out": true,
}

// ReadOnly reports whether a deputy tool has no side effects of its own.
func ReadOnly(tool string) bool { return readOnly[tool] }

// protected are directories whose files no mode writes without asking
// (Claude Code's protected paths: repository state and editor or agent
// configuration), except the .claude directories agents routinely write.
var (
	protected       = []string{".git", ".claude", ".vscode", ".idea"}
	protectedExempt = []string{".claude/commands", ".claude/agents", ".claude/skills"}
)

// Effective is the final answer for a call under a mode and a set. Deny
// rules always deny and ask rules always ask (dontAsk turns that into a
// deny); what the mode changes is the treatment of allowed and unmatched
// calls:
//
//   - default: unmatched read-only calls are allowed when their path is
//     inside the project or the current directory, and asked otherwise;
//     unmatched side-effecting calls ask. Allow rules allow.
//   - acceptEdits: as default, and unmatched write_file and edit_file calls
//     inside the project are allowed, except under protected directories
//     (.git, .claude, .vscode, .idea), which still ask. Bash still asks.
//   - plan: read-only calls as in default; every side-effecting call is
//     denied, even one an allow rule names.
//   - dontAsk: as default, but whatever would ask is denied, so only
//     allow rules and in-project reads get through.
//   - bypassPermissions: every call is allowed except those a deny rule
//     denies, an ask rule asks about, or that write under a protected
//     directory (those ask).
func Effective(mode Mode, set Set, call Call) Decision {
	ci := readCall(&call)
	return effective(mode, &set, &ci)
}

func effective(mode Mode, set *Set, ci *callInfo) Decision {
	if mode != "" && mode.rank() == 0 {
		mode = ModePlan // an unknown mode is read as the narrowest
	}
	d := set.decide(ci)
	ro := readOnly[ci.c.Tool]
	switch {
	case d.Outcome == Deny:
		return d
	case mode == ModePlan && !ro:
		return Decision{Outcome: Deny, Rule: d.Rule, Reason: "plan mode: " + ci.c.Tool + " has side effects"}
	case d.Outcome == Ask:
		if mode == ModeDontAsk {
			return Decision{Outcome: Deny, Rule: d.Rule, Reason: "dontAsk mode: an ask rule matched and nobody is asked"}
		}
		return d
	case d.Outcome == Allow:
		return d
	}
	d = unmatched(mode, ro, ci)
	if d.Outcome == Ask && mode == ModeDontAsk {
		d = Decision{Outcome: Deny, Reason: "dontAsk mode: " + d.Reason}
	}
	return d
}

// unmatched is the mode's answer for a call no rule decided.
func unmatched(mode Mode, ro bool, ci *callInfo) Decision {
	edit := ci.c.Tool == "write_file" || ci.c.Tool == "edit_file"
	if mode == ModeBypassPermissions {
		if edit && isProtected(ci) {
			return Decision{Outcome: Ask, Reason: "writes under a protected directory always ask"}
		}
		return Decision{Outcome: Allow, Reason: "bypassPermissions mode"}
	}
	if ro {
		if ci.path != "" && !inside(ci.path, ci.c.ProjectDir) && !inside(ci.path, ci.c.Cwd) {
			return Decision{Outcome: Ask, Reason: "read outside the project and the current directory"}
		}
		return Decision{Outcome: Allow, Reason: "read-only tool"}
	}
	if mode == ModeAcceptEdits && edit && ci.path != "" && inside(ci.path, cmpOr(ci.c.ProjectDir, ci.c.Cwd)) {
		if isProtected(ci) {
			return Decision{Outcome: Ask, Reason: "writes under a protected directory always ask"}
		}
		return Decision{Outcome: Allow, Reason: "acceptEdits mode: edit inside the project"}
	}
	return Decision{Outcome: Ask, Reason: ci.c.Tool + " has side effects and no rule allows it"}
}

// inside reports whether p is dir or below it; an empty dir contains
// nothing.
func inside(p, dir string) bool {
	if dir == "" {
		return false
	}
	dir = filepath.Clean(dir)
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) || dir == "/"
}

// isProtected reports whether a write's path lies under a protected
// directory of the project or the current directory.
func isProtected(ci *callInfo) bool {
	for _, base := range []string{ci.c.ProjectDir, ci.c.Cwd} {
		if base == "" || !inside(ci.path, base) {
			continue
		}
		rel, err := filepath.Rel(filepath.Clean(base), ci.path)
		if err != nil {
			return true // cannot tell: the safe side
		}
		rel = filepath.ToSlash(rel)
		if underAny(rel, protectedExempt) {
			continue
		}
		if underAny(rel, protected) {
			return true
		}
	}
	return false
}

func underAny(rel string, dirs []string) bool {
	for _, d := range dirs {
		if rel == d || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}
