package agentdef_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"pgregory.net/rapid"
)

func parse(t *testing.T, front string) agentdef.Parsed {
	t.Helper()
	return agentdef.ParseDefinition("x.md", []byte("---\nname: x\ndescription: d\n"+front+"---\nbody\n"))
}

func issues(list []agentdef.Issue) string {
	var b strings.Builder
	for _, i := range list {
		b.WriteString(i.Error() + "\n")
	}
	return b.String()
}

// The forms people write all load: the .mcp.json mapping (also pasted
// whole), Claude Code's list of names and one-key mappings, list entries
// with a name key, names in a string, and JSON text.
func TestMCPServersForms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, front string
		want        []agentdef.MCPServer
		warn        []string // each must appear in a warning
	}{
		{"mapping", `mcpServers:
  web:
    type: streamable-http
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer ${WEB_TOKEN}"}
  github:
    command: npx
    args: -y @modelcontextprotocol/server-github
    env:
      GITHUB_TOKEN: ${GITHUB_TOKEN}
      DEBUG: ${GH_DEBUG:-0}
    startTimeout: 90s
`, []agentdef.MCPServer{
			{Name: "github", Type: "stdio", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-github"},
				Env: map[string]string{"GITHUB_TOKEN": "${GITHUB_TOKEN}", "DEBUG": "${GH_DEBUG:-0}"}, StartTimeout: 90 * time.Second},
			{Name: "web", Type: "http", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer ${WEB_TOKEN}"}},
		}, nil},
		{"claude list", `mcpServers:
  - playwright:
      type: stdio
      command: npx
      args: ["-y", "@playwright/mcp@latest"]
  - slack
`, []agentdef.MCPServer{
			{Name: "playwright", Type: "stdio", Command: "npx", Args: []string{"-y", "@playwright/mcp@latest"}},
			{Name: "slack", Ref: true},
		}, []string{"x.md:9: mcpServers: server slack: names a server configured outside this file"}},
		{"name keys", `mcpServers:
  - name: docs
    url: http://127.0.0.1:9000/sse
    type: sse
    alwaysAllow: [search]
`, []agentdef.MCPServer{{Name: "docs", Type: "sse", URL: "http://127.0.0.1:9000/sse"}},
			[]string{`x.md:5: mcpServers: server docs: key "alwaysAllow" is not used by deputy`}},
		{"the README's", `mcpServers:
  github:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-github"]
    env: {GITHUB_PERSONAL_ACCESS_TOKEN: "${GITHUB_TOKEN}"}
tools: Read, Grep, mcp__github__get_issue, mcp__github__search_issues
`, []agentdef.MCPServer{{Name: "github", Type: "stdio", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-github"},
			Env: map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}}}, nil},
		{"names in a string", "mcpServers: github, slack\n",
			[]agentdef.MCPServer{{Name: "github", Ref: true}, {Name: "slack", Ref: true}}, nil},
		{"json pasted whole", `mcpServers: '{"mcpServers": {"fs": {"command": "mcp-fs", "args": ["/srv"]}}}'` + "\n",
			[]agentdef.MCPServer{{Name: "fs", Type: "stdio", Command: "mcp-fs", Args: []string{"/srv"}}}, nil},
		{"flow mapping", `mcpServers: {"fs": {"command": "mcp-fs"}}` + "\n",
			[]agentdef.MCPServer{{Name: "fs", Type: "stdio", Command: "mcp-fs"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := parse(t, c.front)
			if len(p.Errors) > 0 {
				t.Fatalf("errors:\n%s", issues(p.Errors))
			}
			got, _ := json.Marshal(p.Def.MCPServers)
			want, _ := json.Marshal(c.want)
			if string(got) != string(want) {
				t.Errorf("servers\n got %s\nwant %s", got, want)
			}
			ws := issues(p.Warnings)
			for _, w := range c.warn {
				if !strings.Contains(ws, w) {
					t.Errorf("warnings lack %q:\n%s", w, ws)
				}
			}
			if _, ok := p.Def.Extra["mcpServers"]; ok {
				t.Error("mcpServers is read, not kept in Extra")
			}
		})
	}
}

// A malformed mcpServers is an error at the line of the server it
// concerns, saying what is wrong; a literal env or header value (where
// tokens go) is refused without being repeated.
func TestMCPServersErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, front, want string }{
		{"literal env value", "mcpServers:\n  gh:\n    command: npx\n    env:\n      GITHUB_TOKEN: ghp_s3cr3tvalue\n",
			"x.md:5: mcpServers: server gh: env GITHUB_TOKEN: a literal value is refused, since definitions are stored with every instance; write ${GITHUB_TOKEN}"},
		{"literal header", "mcpServers:\n  - web:\n      url: https://x.example/mcp\n      headers: {X-Api-Key: k3y-v4lue}\n",
			"x.md:5: mcpServers: server web: headers X-Api-Key: a literal value is refused"},
		{"password in url", "mcpServers:\n  a: {url: 'https://me:k3y-v4lue@x.example/mcp'}\n",
			"x.md:5: mcpServers: server a: url: the password in its user info is a literal value"},
		{"token in query", "mcpServers:\n  a: {url: 'https://x.example/mcp?v=2&api_key=k3y-v4lue'}\n",
			"x.md:5: mcpServers: server a: url: query parameter api_key is a literal value"},
		{"token flag", "mcpServers:\n  a: {command: x, args: [--verbose, --token, k3y-v4lue]}\n",
			"x.md:5: mcpServers: server a: args: the value of --token is a literal"},
		{"token flag with =", "mcpServers:\n  a: {command: x, args: ['--api-key=k3y-v4lue']}\n",
			"x.md:5: mcpServers: server a: args: the value of --api-key is a literal"},
		{"nothing to start", "mcpServers:\n  a: {}\n  b:\n    args: [x]\n",
			"x.md:6: mcpServers: server b: neither a command (a stdio server) nor a url (an HTTP server)"},
		{"no config", "mcpServers:\n  a:\n", "x.md:5: mcpServers: server a: no config"},
		{"both", "mcpServers:\n  a: {command: x, url: 'http://h/'}\n", "x.md:5: mcpServers: server a: has both a command and a url"},
		{"bad type", "mcpServers:\n  a: {type: websocket, url: 'ws://h/'}\n", `x.md:5: mcpServers: server a: type "websocket" does not exist`},
		{"bad name", "mcpServers:\n  my__server: {command: x}\n", `x.md:5: mcpServers: server my__server: "my__server" is not a valid server name`},
		{"twice", "mcpServers:\n  - a: {command: x}\n  - a: {command: y}\n", "mcpServers: server a: defined twice"},
		{"bad url", "mcpServers:\n  a: {url: 'ftp://h/x'}\n", `x.md:5: mcpServers: server a: url "ftp://h/x" is not an http or https URL`},
		{"unclosed reference", "mcpServers:\n  a:\n    command: x\n    env: {T: '${TOKEN'}\n", "server a: env T: a ${ is not closed by }"},
		{"env as a list", "mcpServers:\n  a:\n    command: x\n    env: [A]\n", "x.md:5: mcpServers: server a: env: want a mapping of names to values, got a list"},
		{"args as a mapping", "mcpServers:\n  a:\n    command: x\n    args: {a: b}\n", "server a: args: want a list or a comma-separated string, got a mapping"},
		{"headers on stdio", "mcpServers:\n  a:\n    command: x\n    headers: {A: '${B}'}\n", "server a: headers are for an HTTP server"},
		{"a number", "mcpServers: 3\n", "x.md:4: mcpServers: want a mapping of server names to configs, or a list"},
		{"bad json", "mcpServers: '{\"a\": '\n", "x.md:4: mcpServers: neither server names nor valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := parse(t, c.front)
			es := issues(p.Errors)
			if p.Def != nil || !strings.Contains(es, c.want) {
				t.Errorf("want an error containing %q; got:\n%s", c.want, es)
			}
			all := es + issues(p.Warnings)
			for _, secret := range []string{"ghp_s3cr3tvalue", "k3y-v4lue"} {
				if strings.Contains(all, secret) {
					t.Errorf("the value %s is repeated in:\n%s", secret, all)
				}
			}
		})
	}
}

// A server the allowlist reaches no tool of is not started, with a
// warning; allowlist entries of servers the definition does not start stay
// unresolved (offering nothing), as for any tool that does not exist.
func TestMCPServersAndTheAllowlist(t *testing.T) {
	t.Parallel()
	p := parse(t, "tools: Read, mcp__gh__get_issue, mcp__calc\nmcpServers:\n  calc: {command: calc-mcp}\n  unused: {command: other-mcp}\n  - gh\n")
	if len(p.Errors) == 0 {
		t.Fatal("a mapping with a list entry is not YAML; expected an error")
	}
	p = parse(t, "tools: Read, mcp__gh__get_issue, mcp__calc\nmcpServers:\n  - calc: {command: calc-mcp}\n  - unused: {command: other-mcp}\n  - gh\n")
	if len(p.Errors) > 0 {
		t.Fatal(issues(p.Errors))
	}
	if ws := issues(p.Warnings); !strings.Contains(ws, "x.md:7: mcpServers: server unused: is not started: the allowlist names none of its tools") {
		t.Errorf("warnings:\n%s", ws)
	}
	if got := p.Def.UnresolvedTools(); !slices.Equal(got, []string{"mcp__gh__get_issue"}) {
		t.Errorf("unresolved %v", got)
	}
	// mcp__calc__* reads as mcp__calc: every tool of the server.
	d := agentdef.Definition{Tools: []string{"mcp__calc__*", "read_file"}, DisallowedTools: []string{"mcp__calc__rm"}}
	got := d.EffectiveTools([]string{"read_file", "mcp__calc__add", "mcp__calc__rm", "mcp__calcx__add", "mcp__gh__x"})
	if !slices.Equal(got, []string{"read_file", "mcp__calc__add"}) {
		t.Errorf("effective %v", got)
	}
}

// A definition built in Go is held to the same rules, and its servers
// survive the JSON snapshot an instance is stored with.
func TestMCPServersInGo(t *testing.T) {
	t.Parallel()
	d := &agentdef.Definition{Name: "g", Description: "d", MCPServers: []agentdef.MCPServer{
		{Name: "web", Type: "http", URL: "https://x.example/mcp", Headers: map[string]string{"Authorization": "Bearer abc123"}}}}
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "headers Authorization: a literal value is refused") ||
		strings.Contains(err.Error(), "abc123") {
		t.Errorf("validate: %v", err)
	}
	d.MCPServers[0].Headers["Authorization"] = "Bearer ${WEB_TOKEN}"
	d.MCPServers[0].StartTimeout = 45 * time.Second
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back agentdef.Definition
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.MCPServers[0].StartTimeout != 45*time.Second || back.MCPServers[0].Headers["Authorization"] != "Bearer ${WEB_TOKEN}" ||
		!strings.Contains(string(b), `"start_timeout":"45s"`) {
		t.Errorf("round trip: %s → %+v", b, back.MCPServers)
	}
	c := d.Clone()
	c.MCPServers[0].Headers["Authorization"] = "changed"
	if d.MCPServers[0].Headers["Authorization"] != "Bearer ${WEB_TOKEN}" {
		t.Error("Clone shares the servers' maps")
	}
}

// Whatever shape mcpServers has, a file gives a definition that passes
// Check (and survives its JSON snapshot) or errors, every issue with
// file:line, never a panic.
func TestMCPServersAnyShape(t *testing.T) {
	t.Parallel()
	word := rapid.SampledFrom([]string{"a", "gh", "type", "command", "args", "env", "url", "headers", "startTimeout",
		"name", "mcpServers", "stdio", "http", "sse", "x__y", "", "${A}", "${A:-1}", "${", "http://127.0.0.1/mcp", "1m", "-y"})
	var value *rapid.Generator[any]
	value = rapid.Deferred(func() *rapid.Generator[any] {
		return rapid.OneOf(
			rapid.Map(word, func(s string) any { return s }),
			rapid.Just[any](nil), rapid.Just[any](true), rapid.Just[any](3.5),
			rapid.Map(rapid.SliceOfN(value, 0, 3), func(v []any) any { return v }),
			rapid.Map(rapid.MapOfN(word, value, 0, 3), func(m map[string]any) any { return m }),
		)
	})
	rapid.Check(t, func(t *rapid.T) {
		v, _ := json.Marshal(value.Draw(t, "mcpServers"))
		p := agentdef.ParseDefinition("f.md", []byte("---\nname: a\ndescription: b\nmcpServers: "+string(v)+"\n---\nx"))
		for _, i := range append(p.Errors, p.Warnings...) {
			if i.Line < 1 {
				t.Fatalf("issue without a line: %v", i)
			}
		}
		if p.Def == nil {
			if len(p.Errors) == 0 {
				t.Fatal("no definition and no error")
			}
			return
		}
		if err := p.Def.Validate(); err != nil {
			t.Fatalf("loaded, yet: %v", err)
		}
		b, err := json.Marshal(p.Def)
		if err != nil {
			t.Fatal(err)
		}
		var back agentdef.Definition
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		x, _ := json.Marshal(back.MCPServers)
		y, _ := json.Marshal(p.Def.MCPServers)
		if string(x) != string(y) {
			t.Fatalf("snapshot changed the servers: %s → %s", y, x)
		}
	})
}
