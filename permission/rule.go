package permission

import (
	"fmt"
	"path"
	"strings"
)

// kind is what a rule's specifier is matched against.
type kind int

const (
	kindPlain  kind = iota // no specifier allowed (WebSearch)
	kindPath               // a file path argument, gitignore-style pattern
	kindBash               // the bash command
	kindDomain             // web_fetch's URL host, as domain:HOST
	kindName               // spawn_subagent's subagent_type, skill's name
	kindMCP                // mcp__server[__tool]
	kindNone               // a Claude Code tool deputy has no counterpart for
)

// toolSpec says which deputy tools a rule's tool name covers.
type toolSpec struct {
	tools []string
	kind  kind
}

// claudeTools maps Claude Code's tool names to deputy's tools: the one
// table of that mapping, which agentdef reads too (ClaudeTool) to map a
// definition's tools list. For a rule, a name covers every tool in its
// list: Read covers glob and grep as well (Claude Code applies Read rules
// to every tool that reads files), and Edit covers every tool that edits.
// In a tools list, a name stands for the first tool of its list. LS is
// glob: glob lists a directory with `dir/*` (directories marked with a
// trailing /), which is what LS was for. MultiEdit is several edit_file
// calls; NotebookRead reads the .ipynb JSON with read_file. Task is
// Claude Code's old name for spawning and Agent its new one.
var claudeTools = map[string]toolSpec{
	"Read":         {[]string{"read_file", "glob", "grep"}, kindPath},
	"NotebookRead": {[]string{"read_file"}, kindPath},
	"Edit":         {[]string{"edit_file", "write_file"}, kindPath},
	"MultiEdit":    {[]string{"edit_file", "write_file"}, kindPath},
	"Write":        {[]string{"write_file"}, kindPath},
	"Glob":         {[]string{"glob"}, kindPath},
	"LS":           {[]string{"glob"}, kindPath},
	"Grep":         {[]string{"grep"}, kindPath},
	"Bash":         {[]string{"bash"}, kindBash},
	"WebFetch":     {[]string{"web_fetch"}, kindDomain},
	"WebSearch":    {[]string{"web_search"}, kindPlain},
	"Task":         {[]string{"spawn_subagent"}, kindName},
	"Agent":        {[]string{"spawn_subagent"}, kindName},
	"Skill":        {[]string{"skill"}, kindName},

	// Real Claude Code tools deputy does not serve: settings files copied
	// from Claude Code name them, so they parse (and match nothing) rather
	// than fail a load because of a deny rule that cannot apply.
	"NotebookEdit":         {nil, kindNone},
	"TodoWrite":            {nil, kindNone},
	"TodoRead":             {nil, kindNone},
	"BashOutput":           {nil, kindNone},
	"KillShell":            {nil, kindNone},
	"KillBash":             {nil, kindNone},
	"ExitPlanMode":         {nil, kindNone},
	"SlashCommand":         {nil, kindNone},
	"ListMcpResourcesTool": {nil, kindNone},
	"ReadMcpResourceTool":  {nil, kindNone},
}

// deputyRuleTools are deputy's own tool names, which a rule may use as
// well; each covers itself.
var deputyRuleTools = map[string]toolSpec{
	"read_file":      {[]string{"read_file"}, kindPath},
	"write_file":     {[]string{"write_file"}, kindPath},
	"edit_file":      {[]string{"edit_file"}, kindPath},
	"glob":           {[]string{"glob"}, kindPath},
	"grep":           {[]string{"grep"}, kindPath},
	"bash":           {[]string{"bash"}, kindBash},
	"web_fetch":      {[]string{"web_fetch"}, kindDomain},
	"web_search":     {[]string{"web_search"}, kindPlain},
	"spawn_subagent": {[]string{"spawn_subagent"}, kindName},
	"skill":          {[]string{"skill"}, kindName},
	"ask_parent":     {[]string{"ask_parent"}, kindPlain},
	"fan_out":        {[]string{"fan_out"}, kindPlain},
}

// ruleTool is the spec of a tool name a rule may use.
func ruleTool(name string) (toolSpec, bool) {
	if ts, ok := claudeTools[name]; ok {
		return ts, true
	}
	ts, ok := deputyRuleTools[name]
	return ts, ok
}

// ClaudeTool is the deputy tool a Claude Code tool name stands for in a
// definition's tools list (Read is read_file, LS is glob, Agent is
// spawn_subagent). ok is false for a name that is not Claude Code's or
// that deputy has no counterpart for (TodoWrite).
func ClaudeTool(name string) (tool string, ok bool) {
	ts, ok := claudeTools[name]
	if !ok || len(ts.tools) == 0 {
		return "", false
	}
	return ts.tools[0], true
}

// Rule is one parsed permission rule.
type Rule struct {
	// Text is the rule as written.
	Text string
	// Source is where the rule was read ("file:line"), empty for rules
	// parsed in code.
	Source string

	spec  toolSpec
	any   bool // no specifier, or `*`: every call of the tools matches
	bash  bashPattern
	path  pathPattern
	value string // domain or name, or the MCP server
	mcpTo string // the MCP tool; empty for the whole server
}

// String gives the rule's text, with its source when it has one.
func (r Rule) String() string {
	if r.Source == "" {
		return r.Text
	}
	return r.Source + ": " + r.Text
}

// ParseRule parses one rule:
//
//   - `Tool` or `Tool(*)`: every call of the tool.
//   - `Bash(cmd)`: exactly cmd; `Bash(prefix:*)`: cmd is prefix or starts
//     with prefix and a space; `Bash(git push *)`: `*` matches any text,
//     spaces included, and a lone trailing ` *` may also match nothing
//     (so `git push` matches). See Set.Decide for compound commands.
//   - `Read(p)`, `Edit(p)`, `Write(p)`, `Glob(p)`, `Grep(p)`: p is a
//     gitignore-style pattern (`*`, `?`, `[...]`, `**`) anchored by its
//     start: `//p` from the filesystem root, `~/p` from the home directory,
//     `/p` from the project root (the directory holding .claude/), `./p`
//     or `p` from the current directory. A bare name with no slash (`.env`,
//     `*.key`) matches at any depth below the current directory, as in a
//     .gitignore. A pattern matching a directory matches everything in it.
//   - `WebFetch(domain:example.com)`: the URL's host; `domain:*.example.com`
//     matches its subdomains.
//   - `Agent(type)` / `Task(type)`: spawn_subagent's subagent_type;
//     `Skill(name)`: the skill's name.
//   - `mcp__server`, `mcp__server__*`: every tool of the server;
//     `mcp__server__tool`: that tool.
func ParseRule(text string) (Rule, error) {
	t := strings.TrimSpace(text)
	r := Rule{Text: t}
	if t == "" {
		return r, fmt.Errorf("permission rule %q: empty", text)
	}
	name, spec, hasSpec := t, "", false
	if i := strings.IndexByte(t, '('); i >= 0 {
		if !strings.HasSuffix(t, ")") {
			return r, fmt.Errorf("permission rule %q: missing closing ')'", text)
		}
		name, spec, hasSpec = t[:i], strings.TrimSpace(t[i+1:len(t)-1]), true
		if spec == "" {
			return r, fmt.Errorf("permission rule %q: empty specifier; write %s for every call", text, name)
		}
	} else if strings.ContainsAny(t, ") \t") {
		return r, fmt.Errorf("permission rule %q: not Tool or Tool(specifier)", text)
	}
	if strings.HasPrefix(name, "mcp__") {
		if hasSpec {
			return r, fmt.Errorf("permission rule %q: MCP rules take no specifier; use mcp__server__tool", text)
		}
		return r, r.parseMCP(text, name[len("mcp__"):])
	}
	ts, ok := ruleTool(name)
	if !ok {
		return r, fmt.Errorf("permission rule %q: unknown tool %q", text, name)
	}
	r.spec = ts
	if !hasSpec || spec == "*" {
		r.any = true
		return r, nil
	}
	if err := r.parseSpec(spec); err != nil {
		return r, fmt.Errorf("permission rule %q: %w", text, err)
	}
	return r, nil
}

func (r *Rule) parseMCP(text, rest string) error {
	r.spec = toolSpec{kind: kindMCP}
	server, tool, hasTool := strings.Cut(rest, "__")
	if server == "" || strings.Contains(server, "*") || strings.Contains(tool, "*") && tool != "*" {
		return fmt.Errorf("permission rule %q: want mcp__server, mcp__server__tool or mcp__server__*", text)
	}
	if hasTool && tool == "" {
		return fmt.Errorf("permission rule %q: missing tool name after mcp__%s__", text, server)
	}
	r.value = server
	if tool != "*" {
		r.mcpTo = tool
	}
	return nil
}

func (r *Rule) parseSpec(spec string) error {
	var err error
	switch r.spec.kind {
	case kindPath:
		r.path, err = parsePath(spec)
	case kindBash:
		r.bash, err = parseBash(spec)
	case kindDomain:
		d, ok := strings.CutPrefix(spec, "domain:")
		d = strings.ToLower(strings.TrimSpace(d))
		if !ok || d == "" || strings.ContainsAny(d, "/ ") || strings.Contains(d[1:], "*") ||
			strings.HasPrefix(d, "*") && !strings.HasPrefix(d, "*.") {
			return fmt.Errorf("want domain:HOST (or domain:*.HOST), got %q", spec)
		}
		r.value = d
	case kindName:
		if strings.ContainsAny(spec, "*?[") {
			return fmt.Errorf("a name, not a pattern, is expected, got %q", spec)
		}
		r.value = spec
	case kindNone:
		// Matches nothing anyway; the specifier is kept as text only.
	default:
		return fmt.Errorf("this tool takes no specifier")
	}
	return err
}

// anchor is what a path pattern is relative to.
type anchor int

const (
	anchorCwd anchor = iota
	anchorRoot
	anchorHome
	anchorProject
)

// pathPattern is a gitignore-style pattern split into segments; "**" is a
// segment of its own.
type pathPattern struct {
	anchor anchor
	up     int // leading ".." segments, applied to the base directory
	segs   []string
}

func parsePath(spec string) (pathPattern, error) {
	p := pathPattern{}
	rest, anchored := spec, true
	switch {
	case strings.HasPrefix(spec, "//"):
		p.anchor, rest = anchorRoot, spec[2:]
	case spec == "~" || strings.HasPrefix(spec, "~/"):
		p.anchor, rest = anchorHome, strings.TrimPrefix(spec[1:], "/")
	case strings.HasPrefix(spec, "/"):
		p.anchor, rest = anchorProject, spec[1:]
	case strings.HasPrefix(spec, "./"):
		rest = spec[2:]
	default:
		// gitignore: a pattern with no slash but a trailing one floats.
		anchored = strings.Contains(strings.TrimSuffix(spec, "/"), "/")
	}
	for _, s := range strings.Split(rest, "/") {
		switch {
		case s == "" || s == ".":
		case s == "..":
			if len(p.segs) == 0 {
				p.up++
				continue
			}
			last := p.segs[len(p.segs)-1]
			if last == "**" || strings.ContainsAny(last, "*?[") {
				return p, fmt.Errorf("'..' after a wildcard segment in %q", spec)
			}
			p.segs = p.segs[:len(p.segs)-1]
		default:
			if _, err := path.Match(s, ""); err != nil {
				return p, fmt.Errorf("bad pattern segment %q in %q: %v", s, spec, err)
			}
			if strings.Contains(s, "**") && s != "**" {
				// gitignore treats such ** as *; say so rather than guess.
				return p, fmt.Errorf("'**' must be a whole path segment in %q", spec)
			}
			p.segs = append(p.segs, s)
		}
	}
	if !anchored {
		p.segs = append([]string{"**"}, p.segs...)
	}
	return p, nil
}
