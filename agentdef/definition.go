// Package agentdef holds deputy's subagent definitions, skills and the
// catalog that finds them; the agent runtime (package agent) builds on it.
package agentdef

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/deputy-run/deputy/permission"
)

// Mode is how a child's context starts.
type Mode string

const (
	// ModeIsolated starts the child with only its system prompt and the task.
	ModeIsolated Mode = "isolated"
	// ModeFork starts the child on the parent's transcript, byte for byte.
	ModeFork Mode = "fork"
)

// Isolation is how far a child's processes are fenced off (built in the
// isolation issue; parsed and validated now so files written today keep
// meaning the same thing).
type Isolation string

const (
	IsolationNone      Isolation = "none"
	IsolationSandbox   Isolation = "sandbox"
	IsolationContainer Isolation = "container"
)

// Tier aliases a definition may name instead of a provider:model.
const (
	TierHaiku   = "haiku"
	TierSonnet  = "sonnet"
	TierOpus    = "opus"
	TierInherit = "inherit"
)

// Defaults applied by Validate to zero fields.
const (
	DefaultMaxTurns  = 30
	DefaultReportCap = 3000
)

// Budgets bound one child. Zero means no limit of that kind.
type Budgets struct {
	TotalTokens         int           `json:"total_tokens,omitempty"`
	WallTime            time.Duration `json:"wall_time,omitempty"`
	ToolCalls           int           `json:"tool_calls,omitempty"`
	OutputTokensPerCall int           `json:"output_tokens_per_call,omitempty"`
}

// budgetsJSON is Budgets on the wire, wall time as a Go duration string
// ("2m0s") rather than nanoseconds.
type budgetsJSON struct {
	TotalTokens         int    `json:"total_tokens,omitempty"`
	WallTime            string `json:"wall_time,omitempty"`
	ToolCalls           int    `json:"tool_calls,omitempty"`
	OutputTokensPerCall int    `json:"output_tokens_per_call,omitempty"`
}

// MarshalJSON writes the wall time as a duration string.
func (b Budgets) MarshalJSON() ([]byte, error) {
	j := budgetsJSON{TotalTokens: b.TotalTokens, ToolCalls: b.ToolCalls, OutputTokensPerCall: b.OutputTokensPerCall}
	if b.WallTime != 0 {
		j.WallTime = b.WallTime.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *Budgets) UnmarshalJSON(data []byte) error {
	var j budgetsJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*b = Budgets{TotalTokens: j.TotalTokens, ToolCalls: j.ToolCalls, OutputTokensPerCall: j.OutputTokensPerCall}
	if j.WallTime != "" {
		d, err := time.ParseDuration(j.WallTime)
		if err != nil {
			return fmt.Errorf("budgets wall_time: %w", err)
		}
		b.WallTime = d
	}
	return nil
}

// Definition is a subagent type: what a child is told, what it may use, and
// how it is bounded. The zero values of optional fields mean "the default"
// (see Validate), so a definition built in Go needs only a name, a
// description and usually a system prompt.
type Definition struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	SystemPrompt string `json:"system_prompt"`

	// Tools is the allowlist in deputy's tool names, and it means what it
	// says (Claude Code's reading of an agent file: tools absent inherits
	// all, listed is exactly those). nil, the field absent, is every tool
	// the parent holds and every tool of the definition's MCP servers, and
	// ask_parent, but no spawning (spawn_subagent, fan_out). A list is
	// exactly its tools; an empty one is none at all. deputy's own tools
	// are granted by name like any other: spawn_subagent (and with it the
	// subagent_* tools that manage the children, under a managed runtime),
	// fan_out (only when listed itself: naming spawn_subagent does not
	// grant it), ask_parent. Each is then offered only where it can work
	// as well: spawning while the depth allows, ask_parent where the
	// runtime can answer (agent.Runner.AskParent offers it to every child
	// whatever its list says). The skill tool comes with granted Skills,
	// not with this list. DisallowedTools removes any tool, deputy's too.
	// mcp__server__tool names one tool of an MCP server, mcp__server or
	// mcp__server__* all of them; entries naming a server the definition
	// does not define are kept and offer nothing (see UnresolvedTools).
	Tools []string `json:"tools"`
	// DeclaredTools is the tools list as the file wrote it, before mapping
	// Claude Code names to deputy's (nil when the file had none).
	DeclaredTools   []string `json:"declared_tools"`
	DisallowedTools []string `json:"disallowed_tools,omitempty"`
	// Skills are the skill names granted to the child; none unless listed.
	Skills []string `json:"skills,omitempty"`
	// MCPServers are started for each run of a child of this type, and
	// their tools offered to it (see MCPServer, and agent/mcp.go).
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`

	// Model is a tier alias (haiku, sonnet, opus, inherit) or
	// provider:model. Empty means inherit.
	Model string `json:"model"`
	// ToolChoice is auto (the default), any, none, or the name of one tool
	// the child must call.
	ToolChoice string `json:"tool_choice,omitempty"`
	MaxTurns   int    `json:"max_turns"`

	Mode Mode `json:"mode"`
	// ModePinned refuses a spawn that asks for the other mode: a verifier
	// must not inherit the author's reasoning.
	ModePinned bool `json:"mode_pinned"`

	Isolation  Isolation `json:"isolation"`
	Worktree   bool      `json:"worktree"`
	Network    []string  `json:"network,omitempty"` // hosts granted; "*" for any
	ReadPaths  []string  `json:"read_paths,omitempty"`
	WritePaths []string  `json:"write_paths,omitempty"`

	Budgets    Budgets `json:"budgets"`
	ReportCap  int     `json:"report_cap"` // characters
	Background bool    `json:"background"`

	// PermissionMode is Claude Code's permissionMode (default, acceptEdits,
	// plan, dontAsk, bypassPermissions; "manual" reads as default). Empty
	// means the definition did not set one: the child runs in its
	// parent's mode. Check refuses any other value and writes "manual" as
	// default, so a loaded definition holds one of permission's constants.
	PermissionMode permission.Mode `json:"permission_mode,omitempty"`
	// Hooks is the hooks front matter as decoded, not interpreted here:
	// package hook owns what a hook means, and a definition keeps the value
	// so that a change to hook parsing needs no change to stored
	// definitions.
	Hooks *RawHooks `json:"hooks,omitempty"`

	// Extra holds front-matter fields deputy keeps but does not use
	// (color, effort, memory, ...), so nothing a file says is lost.
	Extra map[string]any `json:"extra,omitempty"`

	// Source says where the definition came from.
	Source Source `json:"source"`
}

// RawHooks is a definition's hooks value as its file wrote it, decoded
// from YAML (mappings as map[string]any, lists as []any), and where it was,
// so the hook package can parse it and report problems at file:line.
type RawHooks struct {
	Value any    `json:"value"`
	File  string `json:"file,omitempty"`
	Line  int    `json:"line,omitempty"` // the line of the hooks key
}

// Level is a catalog source; a higher level wins over a lower one.
type Level int

const (
	// LevelFile is a definition read outside a catalog (ParsePaths).
	LevelFile Level = iota
	LevelBuiltin
	LevelUser
	// LevelDatabase is a definition put in the database (deputy agents
	// put): shared by every worker, above a person's own files, below the
	// project's files, which travel with the code.
	LevelDatabase
	LevelProject
	LevelVolatile
)

func (l Level) String() string {
	switch l {
	case LevelFile:
		return "file"
	case LevelBuiltin:
		return "builtin"
	case LevelDatabase:
		return "database"
	case LevelUser:
		return "user"
	case LevelProject:
		return "project"
	case LevelVolatile:
		return "volatile"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// MarshalText makes levels read as words in JSON.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (l *Level) UnmarshalText(b []byte) error {
	for _, c := range []Level{LevelFile, LevelBuiltin, LevelUser, LevelDatabase, LevelProject, LevelVolatile} {
		if c.String() == string(b) {
			*l = c
			return nil
		}
	}
	return fmt.Errorf("unknown level %q", b)
}

// Source is where a definition was loaded from.
type Source struct {
	Level Level  `json:"level"`
	File  string `json:"file,omitempty"` // empty for built-ins and volatile definitions
	Line  int    `json:"line,omitempty"` // line of the name in File
}

// Problem is one finding of Check, attached to a front-matter field so a
// file loader can give it a line.
type Problem struct {
	Field   string // front-matter key, e.g. "mode", "model"
	Key     string // within Field, the entry it concerns (an MCP server's name), if any
	Msg     string
	Warning bool // soft: the definition still loads
}

func (p Problem) String() string { return p.Field + ": " + p.Msg }

// validName is what a subagent type may be called: the parent model writes
// it back in subagent_type, so keep it to a plain identifier.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// ToolChoice values besides a tool name.
var toolChoices = []string{"", "auto", "any", "none"}

// Check applies defaults to zero fields and reports what is wrong. It is
// the one validation every source goes through (files, built-ins, and
// volatile definitions at spawn time).
func (d *Definition) Check() []Problem {
	var ps []Problem
	bad := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	warn := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Msg: fmt.Sprintf(format, args...), Warning: true})
	}
	d.Name = strings.TrimSpace(d.Name)
	d.Description = strings.TrimSpace(d.Description)
	switch {
	case d.Name == "":
		bad("name", "missing: every definition needs a name")
	case !validName.MatchString(d.Name):
		bad("name", "%q is not a valid name (letters, digits, and _ . : - ; at most 128)", d.Name)
	}
	if d.Description == "" {
		bad("description", "missing: the parent model routes by the description")
	}
	if d.Mode == "" {
		d.Mode = ModeIsolated
	}
	if d.Mode != ModeIsolated && d.Mode != ModeFork {
		bad("mode", "%q does not exist (isolated or fork)", d.Mode)
	}
	if d.Isolation == "" {
		d.Isolation = IsolationNone
	}
	switch d.Isolation {
	case IsolationNone, IsolationSandbox, IsolationContainer:
	default:
		bad("isolation", "%q does not exist (none, sandbox, container, or worktree)", d.Isolation)
	}
	if d.Isolation == IsolationNone && !d.Worktree && d.canWrite() && d.Source.Level != LevelBuiltin {
		// deputy's own writers run unfenced on purpose (a fence is not
		// available everywhere); a type someone wrote is told.
		warn("isolation", "this type can change the workspace (%s) and has no isolation: a mistake reaches the "+
			"parent's files at once; consider worktree: true or isolation: sandbox", strings.Join(d.writers(), ", "))
	}
	if d.PermissionMode != "" {
		if m, err := permission.ParseMode(string(d.PermissionMode)); err != nil {
			bad("permissionMode", "%v", err)
		} else {
			d.PermissionMode = m
		}
	}
	if d.MaxTurns == 0 {
		d.MaxTurns = DefaultMaxTurns
	} else if d.MaxTurns < 0 {
		bad("maxTurns", "%d is negative", d.MaxTurns)
	}
	if d.ReportCap == 0 {
		d.ReportCap = DefaultReportCap
	} else if d.ReportCap < 0 {
		bad("reportCap", "%d is negative", d.ReportCap)
	}
	b := d.Budgets
	if b.TotalTokens < 0 || b.WallTime < 0 || b.ToolCalls < 0 || b.OutputTokensPerCall < 0 {
		bad("budget", "limits cannot be negative")
	}
	if _, _, ok := ParseModel(d.Model); !ok {
		// A model deputy cannot place runs on the parent's model rather
		// than failing the file: Claude Code also falls back.
		warn("model", "%q is neither a tier (haiku, sonnet, opus, inherit) nor provider:model; the parent's model is used", d.Model)
	}
	if d.Mode == ModeFork && d.Model != "" && d.Model != TierInherit {
		bad("model", "a fork child runs on the parent's model; %q cannot be set with mode fork", d.Model)
	}
	if !slices.Contains(toolChoices, d.ToolChoice) {
		if d.Tools != nil && !slices.ContainsFunc(d.Tools, func(e string) bool { return allows(e, d.ToolChoice) }) {
			bad("toolChoice", "%q is not auto, any, none, or a tool in the allowlist", d.ToolChoice)
		}
	}
	for _, list := range []struct {
		field string
		v     []string
	}{{"tools", d.Tools}, {"disallowedTools", d.DisallowedTools}, {"skills", d.Skills},
		{"network", d.Network}, {"readPaths", d.ReadPaths}, {"writePaths", d.WritePaths}} {
		if slices.Contains(list.v, "") {
			bad(list.field, "contains an empty entry")
		}
	}
	return append(ps, d.checkMCP()...)
}

// Validate is Check that returns only the errors, joined; warnings are
// dropped. Use Check to see them.
func (d *Definition) Validate() error {
	var msgs []string
	for _, p := range d.Check() {
		if !p.Warning {
			msgs = append(msgs, p.String())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	name := d.Name
	if name == "" {
		name = "(unnamed)"
	}
	return fmt.Errorf("definition %s: %s", name, strings.Join(msgs, "; "))
}

// ParseModel splits a definition's model into a tier alias or a
// provider:model pair. Empty is inherit. ok is false when the value is
// neither.
func ParseModel(s string) (tier, providerModel string, ok bool) {
	switch s {
	case "":
		return TierInherit, "", true
	case TierHaiku, TierSonnet, TierOpus, TierInherit:
		return s, "", true
	}
	p, m, found := strings.Cut(s, ":")
	if found && p != "" && m != "" && !strings.ContainsAny(p, " \t") {
		return "", s, true
	}
	return "", "", false
}

// UnresolvedTools are the allowlist entries naming MCP tools of servers
// the definition does not start (not defined in MCPServers, or only named
// there): they are kept, and offer nothing, like any tool that does not
// exist for the child.
func (d *Definition) UnresolvedTools() []string {
	var out []string
	for _, t := range d.Tools {
		if IsMCPTool(t) && !slices.ContainsFunc(d.MCPServers, func(s MCPServer) bool {
			return !s.Ref && s.Name == MCPServerOf(t)
		}) {
			out = append(out, t)
		}
	}
	return out
}

// Clone copies the definition's lists and its Extra map (not values
// nested inside Extra), so a caller can adjust a definition from the
// catalog (a volatile variant) without touching the shared one.
func (d *Definition) Clone() *Definition {
	c := *d
	c.Tools = slices.Clone(d.Tools)
	c.DeclaredTools = slices.Clone(d.DeclaredTools)
	c.DisallowedTools = slices.Clone(d.DisallowedTools)
	c.Skills = slices.Clone(d.Skills)
	c.Network = slices.Clone(d.Network)
	c.ReadPaths = slices.Clone(d.ReadPaths)
	c.WritePaths = slices.Clone(d.WritePaths)
	if d.MCPServers != nil {
		c.MCPServers = make([]MCPServer, len(d.MCPServers))
		for i, s := range d.MCPServers {
			c.MCPServers[i] = s.clone()
		}
	}
	if d.Hooks != nil {
		h := *d.Hooks
		c.Hooks = &h
	}
	if d.Extra != nil {
		c.Extra = make(map[string]any, len(d.Extra))
		for k, v := range d.Extra {
			c.Extra[k] = v
		}
	}
	return &c
}

// changers are the built-in tools that change the workspace or run
// programs.
var changers = []string{"write_file", "edit_file", "bash"}

// writers lists the tools of d's allowlist that can change the workspace;
// with no allowlist, every one of them (it inherits its parent's).
func (d *Definition) writers() []string {
	var out []string
	for _, t := range changers {
		if (d.Tools == nil || slices.Contains(d.Tools, t)) && !slices.Contains(d.DisallowedTools, t) {
			out = append(out, t)
		}
	}
	return out
}

func (d *Definition) canWrite() bool { return len(d.writers()) > 0 }
