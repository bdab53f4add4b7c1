package agentdef

// How a definition's MCP server becomes the config its client starts
// (package tool/mcptool) with: what mcpconfig.go checked, with deputy's
// environment filled in.

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/deputy-run/deputy/tool/mcptool"
)

// mcpBaseEnv are the variables of deputy's environment a stdio server
// gets without asking, as a sandboxed program does (sandbox's allowlist,
// plus the XDG directories npx and uvx keep their caches in). Anything
// else, API keys first, it gets only through its definition's env.
var mcpBaseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG", "LANGUAGE",
	"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"}

// Resolve makes a server's config final, as a child that runs it starts
// it: references expanded through lookup (deputy's environment; only the
// variables allowed names, deputy.yaml's mcp.env, and mcpBaseEnv's), a
// stdio server's process environment built. Every value read from an
// allowed variable is kept as a secret, scrubbed from what the server
// says back. Its errors name the field, never a value.
func (s MCPServer) Resolve(lookup func(string) (string, bool), allowed []string) (mcptool.Server, error) {
	out := mcptool.Server{Name: s.Name, Transport: s.Type}
	var secrets []string
	field := func(what, v string) (string, error) {
		refused := ""
		look := func(name string) (string, bool) {
			if !slices.Contains(allowed, name) && !slices.Contains(mcpBaseEnv, name) {
				refused = name
				return "", false
			}
			return lookup(name)
		}
		x, _, err := ExpandRefs(v, look, func(name, value string) {
			if !slices.Contains(mcpBaseEnv, name) {
				secrets = append(secrets, value)
			}
		})
		if refused != "" {
			return "", fmt.Errorf("mcp server %q: %s: ${%s} may not be read: deputy.yaml's mcp.env does not list %s", s.Name, what, refused, refused)
		}
		if err != nil {
			return "", fmt.Errorf("mcp server %q: %s: %w", s.Name, what, err)
		}
		return x, nil
	}
	var err error
	if out.Command, err = field("command", s.Command); err != nil {
		return out, err
	}
	for _, a := range s.Args {
		x, err := field("args", a)
		if err != nil {
			return out, err
		}
		out.Args = append(out.Args, x)
	}
	if out.URL, err = field("url", s.URL); err != nil {
		return out, err
	}
	if s.Type == mcptool.Stdio {
		env := map[string]string{}
		for _, k := range mcpBaseEnv {
			if v, ok := lookup(k); ok {
				env[k] = v
			}
		}
		for _, kv := range os.Environ() {
			if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LC_") {
				env[k] = v
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			if env[k], err = field("env "+k, s.Env[k]); err != nil {
				return out, err
			}
		}
		for _, k := range slices.Sorted(maps.Keys(env)) {
			out.Env = append(out.Env, k+"="+env[k])
		}
	}
	if len(s.Headers) > 0 {
		out.Headers = map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
			if out.Headers[k], err = field("headers "+k, s.Headers[k]); err != nil {
				return out, err
			}
		}
	}
	out.Secrets = secrets
	return out, nil
}
