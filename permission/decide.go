package permission

import (
	"encoding/json"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Outcome is a permission answer. The constants are ordered by strictness
// after Default: Allow < Ask < Deny.
type Outcome int

const (
	// Default means no rule matched; the mode decides (see Effective).
	Default Outcome = iota
	// Allow runs the call without asking.
	Allow
	// Ask needs someone's approval first.
	Ask
	// Deny refuses the call.
	Deny
)

func (o Outcome) String() string {
	switch o {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return "default"
}

// Decision is an outcome and why.
type Decision struct {
	Outcome Outcome
	// Rule is the text of the rule that decided (for an allow of a
	// compound command, each subcommand's rule, joined by ", "); empty
	// when no rule did.
	Rule string
	// Reason says in words why, for a mode's or an ancestor's decision.
	Reason string
}

// Call is one tool call to decide.
type Call struct {
	// Tool is deputy's tool name (read_file, bash, mcp__server__tool, ...).
	Tool string
	// Input is the call's JSON arguments.
	Input json.RawMessage
	// Cwd is the directory relative paths and `./` rules start from.
	Cwd string
	// ProjectDir is the project root: `/` rules start from it, and
	// acceptEdits allows edits inside it. Empty means Cwd.
	ProjectDir string
	// Home is the home directory `~/` rules start from. When it is empty
	// `~/` rules match nothing.
	Home string
}

// Set is the rules of one policy. A Set built by NewSet, LoadSettings or
// Policy.Child is indexed by tool, so a call is tried only against the
// rules that cover its tool; a Set literal works the same, walking every
// rule.
type Set struct {
	Allow, Ask, Deny []Rule

	idx *index
}

// callInfo is what the rules look at in a call, read from its input once.
type callInfo struct {
	c         *Call
	path      string   // absolute target path of a file tool; "" when none
	host      string   // web_fetch's host, lower case
	name      string   // spawn_subagent's type, skill's name
	whole     string   // bash's whole command, normalized
	cmds      []string // bash's simple commands
	stripped  []string // cmds without leading assignments (deny and ask); nil when none has any
	cmdsWhole bool     // the command line was read to its end

	// rel caches path's segments below each anchor's base, since most
	// rules of a set are path rules with one of four bases.
	rel [anchorProject + 1]relPath
}

type relPath struct {
	done, ok bool
	segs     []string
}

// toolInput holds every argument a rule may look at.
type toolInput struct {
	Path    string `json:"path"`
	Pattern string `json:"pattern"`
	Command string `json:"command"`
	URL     string `json:"url"`
	Type    string `json:"subagent_type"`
	Name    string `json:"name"`
}

func readCall(c *Call) callInfo {
	ci := callInfo{c: c}
	in := decodeInput(c)
	switch c.Tool {
	case "read_file", "write_file", "edit_file":
		ci.path = absPath(c.Cwd, in.Path)
	case "grep":
		ci.path = absPath(c.Cwd, cmpOr(in.Path, "."))
	case "glob":
		ci.path = absPath(c.Cwd, globBase(in.Pattern))
	case "bash":
		ci.whole = normalize(in.Command)
		ci.cmds, ci.cmdsWhole = splitCommand(in.Command)
		for i, cmd := range ci.cmds {
			if st := stripAssignments(cmd); len(st) != len(cmd) {
				if ci.stripped == nil {
					ci.stripped = slices.Clone(ci.cmds) // most lines have no assignment: no slice for them
				}
				ci.stripped[i] = st
			}
		}
	case "web_fetch":
		if u, err := url.Parse(strings.TrimSpace(in.URL)); err == nil {
			ci.host = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		}
	case "spawn_subagent":
		ci.name = in.Type
	case "skill":
		ci.name = in.Name
	}
	return ci
}

// decodeInput reads only the fields the tool's rules look at: decoding
// into a one-field struct is markedly cheaper than into toolInput whole.
// Input that does not decode leaves the fields empty: rules with a
// specifier then do not match, and the tool itself refuses the call.
func decodeInput(c *Call) toolInput {
	var in toolInput
	switch c.Tool {
	case "read_file", "write_file", "edit_file", "grep":
		var v struct {
			Path string `json:"path"`
		}
		_ = json.Unmarshal(c.Input, &v)
		in.Path = v.Path
	case "glob":
		var v struct {
			Pattern string `json:"pattern"`
		}
		_ = json.Unmarshal(c.Input, &v)
		in.Pattern = v.Pattern
	case "bash":
		var v struct {
			Command string `json:"command"`
		}
		_ = json.Unmarshal(c.Input, &v)
		in.Command = v.Command
	case "web_fetch", "spawn_subagent", "skill":
		_ = json.Unmarshal(c.Input, &in)
	}
	return in
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func absPath(cwd, p string) string {
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		if cwd == "" {
			return ""
		}
		p = filepath.Join(cwd, p)
	}
	return filepath.Clean(p)
}

// globBase is the directory a glob pattern searches: its segments before
// the first one with a wildcard.
func globBase(pattern string) string {
	if pattern == "" {
		return "."
	}
	segs := strings.Split(pattern, "/")
	n := 0
	for n < len(segs) && !strings.ContainsAny(segs[n], "*?[{") {
		n++
	}
	base := strings.Join(segs[:n], "/")
	if base == "" {
		if strings.HasPrefix(pattern, "/") {
			return "/"
		}
		return "."
	}
	return base
}

// Decide applies the set's rules to a call: the first deny rule that
// matches decides, else the first ask rule, else an allow rule, else
// Default.
//
// A bash command line is split into its simple commands (see
// splitCommand). A deny or ask rule matches when it matches any one of
// them, so `Bash(rm:*)` catches `make && rm -rf x`. Allowing needs every
// simple command to be matched by some allow rule, so `Bash(make:*)` does
// not allow `make && rm -rf x`; an exact rule naming the whole line
// (`Bash(a && b)`), or `Bash` alone, allows it too.
func (s *Set) Decide(call Call) Decision {
	ci := readCall(&call)
	return s.decide(&ci)
}

func (s *Set) decide(ci *callInfo) Decision {
	deny, ask, allow, bi := s.views(ci.c.Tool)
	if bi != nil && len(ci.cmds) > 0 {
		return s.decideBash(bi, ci)
	}
	for k := range deny.len() {
		if r := deny.rule(k); r.matchAny(ci) {
			return Decision{Outcome: Deny, Rule: r.Text}
		}
	}
	for k := range ask.len() {
		if r := ask.rule(k); r.matchAny(ci) {
			return Decision{Outcome: Ask, Rule: r.Text}
		}
	}
	if r, ok := allowed(allow, ci); ok {
		return Decision{Outcome: Allow, Rule: r}
	}
	return Decision{Outcome: Default}
}

// allowed finds the allow rules that cover the whole call.
func allowed(allow view, ci *callInfo) (string, bool) {
	for k := range allow.len() {
		r := allow.rule(k)
		if r.any && r.covers(ci.c.Tool) || r.spec.kind != kindBash && r.match(ci) {
			return r.Text, true
		}
		if ci.c.Tool == "bash" && r.spec.kind == kindBash && !r.any && r.bash.parts == nil && !r.bash.prefix &&
			ci.whole != "" && r.bash.text == ci.whole {
			return r.Text, true
		}
	}
	if ci.c.Tool != "bash" || !ci.cmdsWhole || len(ci.cmds) == 0 {
		return "", false
	}
	// Each simple command needs a rule.
	var first string
	var texts []string
	for _, cmd := range ci.cmds {
		found := ""
		for k := range allow.len() {
			r := allow.rule(k)
			if r.spec.kind == kindBash && !r.any && r.bash.match(cmd) {
				found = r.Text
				break
			}
		}
		if found == "" {
			return "", false
		}
		first, texts = addText(first, texts, found)
	}
	return joinTexts(first, texts), true
}

// decideBash is decide for a bash call of a Set with an index by first
// word (see bashIndex); it decides as the walk over every rule does.
func (s *Set) decideBash(bi *bashIndex, ci *callInfo) Decision {
	if r := bi.deny.firstAny(s.Deny, ci); r != nil {
		return Decision{Outcome: Deny, Rule: r.Text}
	}
	if r := bi.ask.firstAny(s.Ask, ci); r != nil {
		return Decision{Outcome: Ask, Rule: r.Text}
	}
	if r, ok := bi.allow.allowedBash(s.Allow, ci); ok {
		return Decision{Outcome: Allow, Rule: r}
	}
	return Decision{Outcome: Default}
}

// covers reports whether the rule's tool name covers a deputy tool.
func (r *Rule) covers(tool string) bool {
	if r.spec.kind == kindMCP {
		server, t, ok := strings.Cut(strings.TrimPrefix(tool, "mcp__"), "__")
		return ok && strings.HasPrefix(tool, "mcp__") && server == r.value && (r.mcpTo == "" || t == r.mcpTo)
	}
	for _, t := range r.spec.tools {
		if t == tool {
			return true
		}
	}
	return false
}

// matchAny is the deny/ask reading: a bash rule matching any one simple
// command (with or without leading assignments) matches.
func (r *Rule) matchAny(ci *callInfo) bool {
	if r.spec.kind != kindBash || r.any {
		return r.match(ci)
	}
	if ci.c.Tool != "bash" {
		return false
	}
	// Only a rule written with shell operators is tried on the whole line
	// (or on a line that split into nothing): any other rule that matches
	// a line matches one of its commands, which the loop below tries.
	if (r.bash.compound || len(ci.cmds) == 0) && r.bash.match(ci.whole) {
		return true
	}
	for i, cmd := range ci.cmds {
		if r.bash.match(cmd) || ci.stripped != nil && len(ci.stripped[i]) != len(cmd) && r.bash.match(ci.stripped[i]) {
			return true
		}
	}
	return false
}

// match is a non-bash rule's test (or a bash rule's with no specifier).
func (r *Rule) match(ci *callInfo) bool {
	if !r.covers(ci.c.Tool) {
		return false
	}
	if r.any || r.spec.kind == kindMCP {
		return true
	}
	switch r.spec.kind {
	case kindPath:
		return ci.path != "" && r.path.matchCall(ci)
	case kindDomain:
		if d, ok := strings.CutPrefix(r.value, "*."); ok {
			return strings.HasSuffix(ci.host, "."+d)
		}
		return ci.host != "" && ci.host == r.value
	case kindName:
		return ci.name == r.value
	}
	return false
}

// matchCall is match with the segments below the base cached in ci.
func (p *pathPattern) matchCall(ci *callInfo) bool {
	if p.up > 0 {
		return p.match(ci.path, ci.c)
	}
	rp := &ci.rel[p.anchor]
	if !rp.done {
		rp.segs, rp.ok = p.relSegs(ci.path, ci.c)
		rp.done = true
	}
	return rp.ok && p.matchSegsOrParent(rp.segs)
}

// match reports whether an absolute, clean path matches: the pattern
// matches it or one of its parent directories below the pattern's base
// (a matched directory covers everything in it, as in a .gitignore).
func (p *pathPattern) match(target string, c *Call) bool {
	segs, ok := p.relSegs(target, c)
	return ok && p.matchSegsOrParent(segs)
}

func (p *pathPattern) matchSegsOrParent(segs []string) bool {
	if len(p.segs) > 0 && len(segs) > 0 && p.segs[0] != "**" &&
		!strings.ContainsAny(p.segs[0], `*?[\`) && p.segs[0] != segs[0] {
		return false // the first segment is literal and differs: no prefix can match
	}
	for k := 0; k <= len(segs); k++ {
		if matchSegs(p.segs, segs[:k]) {
			return true
		}
	}
	return false
}

// relSegs splits target below the pattern's base; ok is false when target
// is not at or below it.
func (p *pathPattern) relSegs(target string, c *Call) (segs []string, ok bool) {
	var base string
	switch p.anchor {
	case anchorRoot:
		base = "/"
	case anchorHome:
		base = c.Home
	case anchorProject:
		base = cmpOr(c.ProjectDir, c.Cwd)
	default:
		base = c.Cwd
	}
	if base == "" {
		return nil, false
	}
	base = filepath.Clean(base)
	for range p.up {
		base = filepath.Dir(base)
	}
	rel, ok := strings.CutPrefix(target, base)
	if !ok || rel != "" && rel[0] != '/' && base != "/" {
		return nil, false
	}
	if rel = strings.Trim(rel, "/"); rel != "" {
		segs = strings.Split(rel, "/")
	}
	return segs, true
}

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			pat = pat[1:]
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(segs); i++ {
				if matchSegs(pat, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if !strings.ContainsAny(pat[0], `*?[\`) {
			if pat[0] != segs[0] { // a literal segment: no need for path.Match
				return false
			}
		} else if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}
