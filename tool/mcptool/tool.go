package mcptool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// Prefix starts every MCP tool's name.
const Prefix = "mcp__"

// maxName is the longest tool name every provider accepts (OpenAI's
// function names: 64).
const maxName = 64

// Name is the name deputy offers server's tool under: mcp__server__tool,
// with characters providers refuse in tool names (anything but letters,
// digits, _ and -) replaced by _. A name over 64 characters keeps its first
// 55 and a hash of the whole, so two long names stay apart.
func Name(server, tool string) string {
	n := FullName(server, tool)
	if len(n) <= maxName {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return n[:maxName-9] + "_" + hex.EncodeToString(sum[:4])
}

// FullName is Name before any cut: what allowlists are matched against,
// so an entry naming a long tool in full still finds it.
func FullName(server, tool string) string {
	return Prefix + sanitize(server) + "__" + sanitize(tool)
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// Tool is one of a server's tools, as a deputy tool.
type Tool struct {
	s        *Session
	name     string // the server's own name for it
	full     string
	spec     llm.ToolSpec
	readOnly bool
}

// Tools lists the server's tools (every page) as deputy tools, in the
// server's order.
func (s *Session) Tools(ctx context.Context) ([]*Tool, error) {
	var out []*Tool
	seen := map[string]string{}
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, s.errorf("list tools: %v", err)
		}
		schema, err := inputSchema(t.InputSchema)
		if err != nil {
			return nil, s.errorf("tool %q: input schema: %v", t.Name, err)
		}
		name := Name(s.srv.Name, t.Name)
		if other, dup := seen[name]; dup {
			return nil, s.errorf("tools %q and %q both become %s", other, t.Name, name)
		}
		seen[name] = t.Name
		out = append(out, &Tool{
			s: s, name: t.Name, full: FullName(s.srv.Name, t.Name),
			spec:     llm.ToolSpec{Name: name, Description: description(t), InputSchema: schema},
			readOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint,
		})
	}
	return out, nil
}

// inputSchema is a tool's input schema as JSON, always an object schema:
// the providers refuse a tool whose input_schema has no "type": "object".
func inputSchema(v any) (json.RawMessage, error) {
	m, ok := v.(map[string]any)
	if v == nil {
		m, ok = map[string]any{}, true
	}
	if !ok {
		return nil, fmt.Errorf("not a JSON object but %T", v)
	}
	if _, has := m["type"]; !has {
		m["type"] = "object"
	}
	if t, _ := m["type"].(string); t != "object" {
		return nil, fmt.Errorf("type %v; a tool's input must be an object", m["type"])
	}
	return json.Marshal(m) // keys sorted: the same bytes every run, for the prompt cache
}

func description(t *mcp.Tool) string {
	d := strings.TrimSpace(t.Description)
	if d == "" {
		d = strings.TrimSpace(t.Title)
	}
	if d == "" && t.Annotations != nil {
		d = strings.TrimSpace(t.Annotations.Title)
	}
	return d
}

// Spec is the tool as the model sees it.
func (t *Tool) Spec() llm.ToolSpec { return t.spec }

// ReadOnly is the server's readOnlyHint. It is a hint from the server, and
// deputy trusts it only as far as running the tool's calls of one turn
// concurrently and calling it again after a crash; the definition that
// named the server vouches for it.
func (t *Tool) ReadOnly() bool { return t.readOnly }

// Server is the name of the tool's server.
func (t *Tool) Server() string { return t.s.srv.Name }

// MCPName is the server's own name for the tool.
func (t *Tool) MCPName() string { return t.name }

// FullName is mcp__server__tool before any cut (see Name).
func (t *Tool) FullName() string { return t.full }

// Run calls the tool. The result's content is rendered as text; a result
// the server marks isError, and a call that fails (the server gone, a
// protocol error), are errors the model reads, naming the server and tool.
func (t *Tool) Run(ctx context.Context, input json.RawMessage) (string, error) {
	if len(strings.TrimSpace(string(input))) == 0 {
		input = json.RawMessage("{}")
	}
	res, err := t.s.cs.CallTool(ctx, &mcp.CallToolParams{Name: t.name, Arguments: input})
	if err != nil {
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
			err = c
		}
		return "", t.s.errorf("tool %s: %v", t.name, err)
	}
	out := tool.Truncate(t.s.redact(Render(res)), tool.DefaultOutputLimit)
	if res.IsError {
		if out == "" {
			out = "the tool reported an error and said nothing more"
		}
		return "", errors.New(out)
	}
	return out, nil
}

// Render writes a tool result's content as text: text as is, other
// content as a one-line note of what it was (the model cannot see an
// image through a text result), and structured content as JSON when there
// is nothing else.
func Render(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, strings.TrimSpace(fmt.Sprintf("[resource %s %s] %s", c.URI, c.Name, c.Description)))
		case *mcp.EmbeddedResource:
			parts = append(parts, resource(c.Resource))
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

func resource(r *mcp.ResourceContents) string {
	switch {
	case r == nil:
		return "[resource]"
	case r.Text != "":
		return fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text)
	case len(r.Blob) > 0:
		return fmt.Sprintf("[resource %s %s, %d bytes, not shown]", r.URI, r.MIMEType, len(r.Blob))
	}
	return fmt.Sprintf("[resource %s]", r.URI)
}
