package agentdef

// What a definition says about its MCP servers: MCPServer, read from a
// file's mcpServers by decodeMCPServers and checked by checkMCP, and the
// ${VAR} references its values may hold. Running them is mcp.go's.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/deputy-run/deputy/tool/mcptool"
)

// MCPServer is one MCP server of a definition, started for each run of a
// child of that type. Either Ref (a server named only, configured
// elsewhere: deputy does not start it) or a stdio command or an HTTP URL.
//
// Env values, header values, and also Command, Args and URL may hold
// ${VAR} or ${VAR:-default} references, expanded from deputy's environment
// when the server starts. Env and header values must hold one: a
// definition is stored with every instance of its type, and these are where
// tokens go, so a literal value is refused (see checkMCP).
type MCPServer struct {
	Name string `json:"name"`
	// Ref: only the name was given (Claude Code's reference to a server
	// of its settings), which deputy does not start.
	Ref bool `json:"ref,omitempty"`
	// Type is mcptool.Stdio, mcptool.HTTP or mcptool.SSE.
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// StartTimeout replaces DefaultMCPStartTimeout; zero means the default.
	StartTimeout time.Duration `json:"-"`
}

type mcpServerJSON MCPServer // without the methods

// MarshalJSON writes StartTimeout as a duration string, like Budgets.
func (s MCPServer) MarshalJSON() ([]byte, error) {
	j := struct {
		mcpServerJSON
		StartTimeout string `json:"start_timeout,omitempty"`
	}{mcpServerJSON: mcpServerJSON(s)}
	if s.StartTimeout != 0 {
		j.StartTimeout = s.StartTimeout.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *MCPServer) UnmarshalJSON(data []byte) error {
	var j struct {
		mcpServerJSON
		StartTimeout string `json:"start_timeout,omitempty"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*s = MCPServer(j.mcpServerJSON)
	if j.StartTimeout != "" {
		d, err := time.ParseDuration(j.StartTimeout)
		if err != nil {
			return fmt.Errorf("mcp server %s: start_timeout: %w", s.Name, err)
		}
		s.StartTimeout = d
	}
	return nil
}

func (s MCPServer) clone() MCPServer {
	s.Args = slices.Clone(s.Args)
	if s.Env != nil {
		env := make(map[string]string, len(s.Env))
		for k, v := range s.Env {
			env[k] = v
		}
		s.Env = env
	}
	if s.Headers != nil {
		h := make(map[string]string, len(s.Headers))
		for k, v := range s.Headers {
			h[k] = v
		}
		s.Headers = h
	}
	return s
}

// mcpServerOf splits an MCP allowlist entry or tool name
// (mcp__server__tool, mcp__server, mcp__server__*) into its server.
func MCPServerOf(name string) string {
	rest := strings.TrimPrefix(name, "mcp__")
	server, _, _ := strings.Cut(rest, "__")
	return server
}

// startedServers are the servers of d that a child starts: defined (not
// a reference) and able to offer a tool the allowlist and deny list leave.
func (d *Definition) StartedServers() []MCPServer {
	var out []MCPServer
	for _, s := range d.MCPServers {
		if !s.Ref && d.MayUseServer(s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// mayUseServer reports whether d's lists leave any tool of server: no
// allowlist, or an entry naming it; and no deny entry naming all of it.
func (d *Definition) MayUseServer(server string) bool {
	all := "mcp__" + server
	for _, e := range d.DisallowedTools {
		if e == all || e == all+"__*" {
			return false
		}
	}
	if d.Tools == nil {
		return true
	}
	for _, e := range d.Tools {
		if IsMCPTool(e) && MCPServerOf(e) == server {
			return true
		}
	}
	return false
}

// mcpIssue is a problem with one server of a file's mcpServers; server
// locates it in the file ("" for the field as a whole).
type mcpIssue struct {
	server  string
	msg     string
	warning bool
}

var mcpServerKeys = []string{"type", "command", "args", "env", "url", "headers", "startTimeout"}

// decodeMCPServers reads the forms people write: a mapping of names to
// configs (the .mcp.json shape, also wrapped in its own mcpServers key);
// Claude Code's list whose entries are a name (a reference) or a one-key
// mapping of a name to its config; list entries that are a config with a
// name key; a comma-separated string of names; and any of these as JSON
// text. Servers come out in the file's order for a list, by name for a
// mapping (a YAML mapping keeps no order), so the tools a child is offered
// are the same every run.
func decodeMCPServers(v any) ([]MCPServer, []mcpIssue) {
	var issues []mcpIssue
	bad := func(server, format string, args ...any) {
		issues = append(issues, mcpIssue{server: server, msg: fmt.Sprintf(format, args...)})
	}
	var out []MCPServer
	add := func(name string, cfg any) {
		s, errs, warns := decodeMCPServer(name, cfg)
		for _, e := range errs {
			bad(name, "%s", e)
		}
		for _, w := range warns {
			issues = append(issues, mcpIssue{server: name, msg: w, warning: true})
		}
		if len(errs) == 0 {
			out = append(out, s)
		}
	}
	if s, ok := v.(string); ok {
		if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			var j any
			if err := json.Unmarshal([]byte(t), &j); err != nil {
				bad("", "neither server names nor valid JSON: %v", err)
				return nil, issues
			}
			v = j
		}
	}
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		if inner, ok := m["mcpServers"]; ok {
			v = inner // a .mcp.json pasted whole
		}
	}
	switch x := v.(type) {
	case nil:
	case string:
		for _, name := range strings.Split(x, ",") {
			if name = strings.TrimSpace(unquote(strings.TrimSpace(name))); name != "" {
				out = append(out, MCPServer{Name: name, Ref: true})
			}
		}
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(x)) {
			add(name, x[name])
		}
	case []any:
		for i, e := range x {
			switch e := e.(type) {
			case string:
				out = append(out, MCPServer{Name: strings.TrimSpace(e), Ref: true})
			case map[string]any:
				if name, ok := e["name"].(string); ok && (e["command"] != nil || e["url"] != nil) {
					cfg := make(map[string]any, len(e))
					for k, v := range e {
						if k != "name" {
							cfg[k] = v
						}
					}
					add(name, cfg)
					continue
				}
				for _, name := range slices.Sorted(maps.Keys(e)) {
					add(name, e[name])
				}
			default:
				bad("", "entry %d: want a server name or a mapping of a name to its config, got %s", i+1, kindOf(e))
			}
		}
	default:
		bad("", "want a mapping of server names to configs, or a list, got %s", kindOf(v))
	}
	return out, issues
}

// decodeMCPServer reads one server's config. Structural problems are
// errors; keys deputy does not use are warnings. Meaning (a command or a
// url, the secrets rule) is checkMCP's.
func decodeMCPServer(name string, cfg any) (s MCPServer, errs, warns []string) {
	s.Name = strings.TrimSpace(name)
	m, ok := cfg.(map[string]any)
	if !ok {
		if cfg == nil {
			return s, []string{"no config: want command (a stdio server) or url (an HTTP server)"}, nil
		}
		return s, []string{fmt.Sprintf("want a mapping with command or url, got %s", kindOf(cfg))}, nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		var err error
		switch k {
		case "type", "transport":
			var t string
			t, err = asString(v)
			s.Type = normalTransport(t)
		case "command":
			s.Command, err = asString(v)
		case "args":
			if str, isStr := v.(string); isStr {
				s.Args = strings.Fields(str) // args: -y @org/server
			} else {
				s.Args, err = asList(v)
			}
		case "url":
			s.URL, err = asString(v)
		case "env":
			s.Env, err = asStringMap(v)
		case "headers":
			s.Headers, err = asStringMap(v)
		case "startTimeout":
			s.StartTimeout, err = asDuration(v)
		default:
			warns = append(warns, fmt.Sprintf("key %q is not used by deputy (it reads %s); ignored", k, strings.Join(mcpServerKeys, ", ")))
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", k, err))
		}
	}
	if s.Type == "" {
		switch {
		case s.Command != "":
			s.Type = mcptool.Stdio
		case s.URL != "":
			s.Type = mcptool.HTTP
		}
	}
	return s, errs, warns
}

// normalTransport maps the spellings of a transport to mcptool's.
func normalTransport(t string) string {
	switch strings.ToLower(strings.TrimSpace(t)) {
	case "stdio":
		return mcptool.Stdio
	case "http", "streamable-http", "streamable_http", "streamablehttp":
		return mcptool.HTTP
	case "sse":
		return mcptool.SSE
	}
	return strings.TrimSpace(t) // checkMCP names it
}

// asStringMap reads env or headers: a mapping of names to scalars.
func asStringMap(v any) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a mapping of names to values, got %s", kindOf(v))
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) { // the same first problem every run
		s, err := asString(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		out[k] = s
	}
	return out, nil
}

// --- Checking ---

var (
	mcpName    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// checkMCP is Check's part for MCP servers.
func (d *Definition) checkMCP() []Problem {
	var ps mcpProblems
	seen := map[string]bool{}
	for _, s := range d.MCPServers {
		if !ps.checkName(s, seen) {
			continue
		}
		if s.Ref {
			ps.warn(s.Name, "names a server configured outside this file (Claude Code's settings or .mcp.json); deputy starts "+
				"only servers defined here, so its tools (mcp__%s__...) are not offered. Define it here: command and args, or url", s.Name)
			continue
		}
		ps.checkTransport(s)
		ps.checkCommandLine(s)
		ps.checkVariables(s)
		if s.StartTimeout < 0 {
			ps.bad(s.Name, "startTimeout is negative")
		}
		if !d.MayUseServer(s.Name) {
			ps.warn(s.Name, "is not started: the allowlist names none of its tools (add mcp__%s, or mcp__%s__TOOL)", s.Name, s.Name)
		}
	}
	return ps
}

// mcpProblems is what checkMCP found, each problem about one server and
// saying which.
type mcpProblems []Problem

func (ps *mcpProblems) add(server string, warning bool, format string, args ...any) {
	*ps = append(*ps, Problem{Field: "mcpServers", Key: server, Warning: warning,
		Msg: fmt.Sprintf("server %s: ", server) + fmt.Sprintf(format, args...)})
}

func (ps *mcpProblems) bad(server, format string, args ...any) {
	ps.add(server, false, format, args...)
}

func (ps *mcpProblems) warn(server, format string, args ...any) {
	ps.add(server, true, format, args...)
}

// checkName checks that s's name can be part of its tools' names and that
// no other server has it. false: the name is unusable, and nothing more
// about s is worth saying.
func (ps *mcpProblems) checkName(s MCPServer, seen map[string]bool) bool {
	switch {
	case !mcpName.MatchString(s.Name) || strings.Contains(s.Name, "__"):
		ps.bad(s.Name, "%q is not a valid server name (letters, digits, _ and -, no __, at most 32): it becomes part of tool names, mcp__NAME__tool", s.Name)
		return false
	case seen[s.Name]:
		ps.bad(s.Name, "defined twice")
		return false
	}
	seen[s.Name] = true
	return true
}

// checkTransport checks that s is a stdio server or an HTTP one, with
// what its transport needs and nothing that belongs to the other.
func (ps *mcpProblems) checkTransport(s MCPServer) {
	switch s.Type {
	case mcptool.Stdio:
		if s.Command == "" {
			ps.bad(s.Name, "type stdio needs a command")
		}
		if s.URL != "" {
			ps.bad(s.Name, "has both a command and a url; a server is one or the other")
		}
		if len(s.Headers) > 0 {
			ps.bad(s.Name, "headers are for an HTTP server; a stdio server gets env")
		}
	case mcptool.HTTP, mcptool.SSE:
		if s.URL == "" {
			ps.bad(s.Name, "type %s needs a url", s.Type)
		} else if !strings.Contains(s.URL, "${") {
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				ps.bad(s.Name, "url %q is not an http or https URL", s.URL)
			}
		}
		if s.Command != "" {
			ps.bad(s.Name, "has both a url and a command; a server is one or the other")
		}
		if len(s.Env) > 0 {
			ps.bad(s.Name, "env is for a stdio server; an HTTP server gets headers")
		}
	case "":
		ps.bad(s.Name, "neither a command (a stdio server) nor a url (an HTTP server)")
	default:
		ps.bad(s.Name, "type %q does not exist (stdio, http, sse)", s.Type)
	}
}

// checkCommandLine checks the ${VAR} references in s's command, url and
// args, and refuses a credential written there literally: a definition is
// stored with every instance.
func (ps *mcpProblems) checkCommandLine(s MCPServer) {
	for _, f := range []struct{ what, v string }{{"command", s.Command}, {"url", s.URL}} {
		if _, err := countRefs(f.v); err != nil {
			ps.bad(s.Name, "%s: %v", f.what, err)
		}
	}
	if what := literalURLSecret(s.URL); what != "" {
		ps.bad(s.Name, "url: %s is a literal value; a definition is stored with every instance, so write a ${VAR} there", what)
	}
	for i, a := range s.Args {
		if _, err := countRefs(a); err != nil {
			ps.bad(s.Name, "args: %v", err)
		}
		if flag := literalArgSecret(s.Args, i); flag != "" {
			ps.bad(s.Name, "args: the value of %s is a literal; a definition is stored with every instance, so write a ${VAR} there", flag)
		}
	}
}

// checkVariables checks s's env (a stdio server's) and headers (an HTTP
// server's): valid names, and values that are ${VAR} references, never
// literals.
func (ps *mcpProblems) checkVariables(s MCPServer) {
	for _, kv := range []struct {
		what  string
		m     map[string]string
		valid *regexp.Regexp
	}{{"env", s.Env, envName}, {"headers", s.Headers, headerName}} {
		for _, k := range sortedKeys(kv.m) {
			if !kv.valid.MatchString(k) {
				ps.bad(s.Name, "%s: %q is not a valid name", kv.what, k)
				continue
			}
			n, err := countRefs(kv.m[k])
			switch {
			case err != nil:
				ps.bad(s.Name, "%s %s: %v", kv.what, k, err)
			case n == 0 && kv.m[k] != "":
				// The definition is stored with every instance of its
				// type (and a file put in the database, whole): a token
				// written here would be stored too.
				ps.bad(s.Name, "%s %s: a literal value is refused, since definitions are stored with every instance; write "+
					"${%s} and set %s in deputy's environment (a non-secret default: ${%s:-value})", kv.what, k, envRef(k), envRef(k), envRef(k))
			}
		}
	}
}

// secretName reports whether a flag, query parameter or header name says
// its value is a credential.
func secretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"token", "key", "secret", "password", "passwd", "auth", "credential", "sig"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// literal reports whether v is a non-empty value with no ${VAR} in it.
func literal(v string) bool { return v != "" && !strings.Contains(v, "${") }

// literalURLSecret names the part of u that carries a credential as a
// literal (a password in its user info, a query parameter named like a
// token), or returns "".
func literalURLSecret(u string) string {
	x, err := url.Parse(u)
	if err != nil {
		return ""
	}
	if p, ok := x.User.Password(); ok && literal(p) {
		return "the password in its user info"
	}
	q := x.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if secretName(k) && slices.ContainsFunc(q[k], literal) {
			return "query parameter " + k
		}
	}
	return ""
}

// literalArgSecret returns the flag whose literal value args[i] is when
// that flag is named like a credential (--token VALUE, --api-key=VALUE),
// or "".
func literalArgSecret(args []string, i int) string {
	a := args[i]
	if flag, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(flag, "-") {
		if secretName(flag) && literal(v) {
			return flag
		}
		return ""
	}
	if i > 0 && strings.HasPrefix(args[i-1], "-") && !strings.Contains(args[i-1], "=") && !strings.HasPrefix(a, "-") &&
		secretName(args[i-1]) && literal(a) {
		return args[i-1]
	}
	return ""
}

// envRef is the variable a refused literal should come from: the env
// name itself, or for a header its name in upper case.
func envRef(k string) string {
	return strings.ToUpper(strings.Map(func(r rune) rune {
		if r == '-' {
			return '_'
		}
		return r
	}, k))
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// --- ${VAR} references ---

// countRefs counts the ${VAR} and ${VAR:-default} references in s and
// checks their syntax. A $ not followed by { is a plain $.
func countRefs(s string) (int, error) {
	_, n, err := ExpandRefs(s, func(string) (string, bool) { return "x", true }, nil)
	return n, err
}

// expandRefs replaces the references in s. A variable lookup does not find
// takes its default, or is an error. Each value taken from the
// environment is passed to read, when it is not nil.
func ExpandRefs(s string, lookup func(string) (string, bool), read func(name, value string)) (string, int, error) {
	var b strings.Builder
	n := 0
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), n, nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", n, errors.New("a ${ is not closed by }")
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !envName.MatchString(name) {
			return "", n, fmt.Errorf("${%s}: %q is not a variable name", ref, name)
		}
		v, ok := lookup(name)
		switch {
		case ok && v != "":
			if read != nil {
				read(name, v)
			}
		case hasDef:
			v = def
		case !ok:
			return "", n, fmt.Errorf("${%s} is not set in deputy's environment", name)
		}
		b.WriteString(v)
		n++
		s = s[i+end+1:]
	}
}
