package fake

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deputy-run/deputy/llm"
)

// The Messages API's messages: user, assistant and (mid-conversation)
// system messages, each decoded strictly under its own path, so an unknown
// field is refused where it sits (messages.1.foo), as the API refuses it.
// Sources: the SDKs' BetaMessageParam / BetaSystemMessageParam types
// (anthropic-sdk-go v2.15.0, @anthropic-ai/sdk 1.10.0) and the
// "Mid-conversation system messages" guide (docs/fake-wire.md).

// anthWireMessage is a user or assistant message.
type anthWireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthWireSystemMessage is a role "system" message inside messages: text
// (and, with the mid-conversation-tool-changes beta, tool_addition and
// tool_removal blocks), a per-turn output_config (effort only: format is
// top-level only) and clear_at.
type anthWireSystemMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	OutputConfig json.RawMessage `json:"output_config"`
	ClearAt      *string         `json:"clear_at"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// anthSystemMessageOutputConfig is a system message's output_config.
type anthSystemMessageOutputConfig struct {
	Effort *string `json:"effort"`
}

// anthDecodeAt decodes raw strictly into v, wording a problem under path
// as the Messages API does.
func anthDecodeAt(raw json.RawMessage, path string, v any) *wireError {
	if p := decodeStrict(raw, v); p != nil {
		return anthDecodeError(p.at(path))
	}
	return nil
}

// anthRole reads message i's role without judging its other fields.
func anthRole(i int, raw json.RawMessage) (string, *wireError) {
	var peek struct {
		Role json.RawMessage `json:"role"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &peek) != nil {
		return "", invalid("messages.%d: Input should be a valid dictionary", i)
	}
	if isNull(peek.Role) {
		return "", invalid("messages.%d.role: Field required", i)
	}
	var role string
	if json.Unmarshal(peek.Role, &role) != nil {
		return "", invalid("messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
	}
	switch role {
	case "user", "assistant", "system":
		return role, nil
	}
	return "", invalid("messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
}

// anthConversation is the messages decoded: what the Responder sees, and
// what the cross-message checks need of the wire order.
type anthConversation struct {
	roles []string // each wire message's role
	// lastBlock is the type of each wire message's last block.
	lastBlock []string
	// wireIndex maps req.Messages to their wire index (system messages
	// are not in req.Messages).
	wireIndex []int
	system    []anthSystemText
}

// anthSystemText is a mid-conversation system message's text.
type anthSystemText struct {
	index           int
	text            string
	clearAtNextUser bool
	// added and removedByName are its tool changes (tool_addition,
	// tool_removal of a tool_reference).
	added         []llm.ToolSpec
	removedByName []string
}

// anthMessages decodes every message into req and pb, then checks where
// system messages sit and applies what they say.
func anthMessages(msgs []json.RawMessage, req *llm.Request, pb *prefixBuilder, bp *anthBreakpoints) (*anthConversation, *wireError) {
	c := &anthConversation{}
	req.Messages = make([]llm.Message, 0, len(msgs))
	for i, raw := range msgs {
		role, werr := anthRole(i, raw)
		if werr != nil {
			return nil, werr
		}
		last := ""
		if role == "system" {
			st, werr := anthSystemMessage(i, raw, pb, bp)
			if werr != nil {
				return nil, werr
			}
			c.system = append(c.system, st)
		} else {
			var m anthWireMessage
			if werr := anthDecodeAt(raw, fmt.Sprintf("messages.%d", i), &m); werr != nil {
				return nil, werr
			}
			msg, werr := anthMessage(i, m, pb, bp)
			if werr != nil {
				return nil, werr
			}
			if n := len(msg.Content); n > 0 {
				last = msg.Content[n-1].Type
			}
			req.Messages = append(req.Messages, msg)
			c.wireIndex = append(c.wireIndex, i)
		}
		c.roles = append(c.roles, role)
		c.lastBlock = append(c.lastBlock, last)
	}
	if werr := c.placement(); werr != nil {
		return nil, werr
	}
	// After every block decoded, as the API judges signatures only on a
	// request that is well formed.
	if werr := c.thinkingCheck(req.Messages); werr != nil {
		return nil, werr
	}
	c.apply(req)
	return c, nil
}

// placement checks the guide's rules for a system message in messages: not
// first; right after a user message or an assistant message that ends in a
// server tool use; last or followed by an assistant message; never next to
// another system message. The API words these errors its own way; the
// fake's wording is its own (docs/fake-wire.md).
func (c *anthConversation) placement() *wireError {
	for i, role := range c.roles {
		if role != "system" {
			continue
		}
		switch {
		case i == 0:
			return invalid("messages.0: a system message cannot be the first message; put instructions that apply from the start in the top-level `system` field")
		case c.roles[i-1] == "system":
			return invalid("messages.%d: consecutive system messages are not allowed", i)
		case c.roles[i-1] == "assistant" && !serverToolUse(c.lastBlock[i-1]):
			return invalid("messages.%d: a system message must immediately follow a user message or an assistant message that ends in a server tool use", i)
		case i+1 < len(c.roles) && c.roles[i+1] == "user":
			// A system message next is refused as consecutive, at its own
			// index.
			return invalid("messages.%d: a system message must be the last message or be followed by an assistant message", i)
		}
	}
	return nil
}

// serverToolUse reports whether a block type is a tool use the API runs
// itself.
func serverToolUse(t string) bool { return t == "server_tool_use" || t == "mcp_tool_use" }

// apply lays the system messages onto req: their texts join req.System
// after the top-level system prompt (the OpenAI wire does the same with
// its system and developer messages), except one cleared at the next user
// message once a user message follows it, which the model no longer sees;
// their tool changes edit req.Tools in order.
func (c *anthConversation) apply(req *llm.Request) {
	var texts []string
	if req.System != "" {
		texts = append(texts, req.System)
	}
	for _, st := range c.system {
		if st.text != "" && !(st.clearAtNextUser && c.userAfter(st.index)) {
			texts = append(texts, st.text)
		}
		req.Tools = append(req.Tools, st.added...)
		for _, name := range st.removedByName {
			req.Tools = removeTool(req.Tools, name)
		}
	}
	req.System = strings.Join(texts, "\n")
}

func (c *anthConversation) userAfter(i int) bool {
	for _, r := range c.roles[i+1:] {
		if r == "user" {
			return true
		}
	}
	return false
}

func removeTool(tools []llm.ToolSpec, name string) []llm.ToolSpec {
	out := tools[:0:0]
	for _, t := range tools {
		if t.Name != name {
			out = append(out, t)
		}
	}
	return out
}

// anthSystemMessage decodes the system message at i. Its texts are prefix
// elements priced as system texts (count.go).
func anthSystemMessage(i int, raw json.RawMessage, pb *prefixBuilder, bp *anthBreakpoints) (anthSystemText, *wireError) {
	path := fmt.Sprintf("messages.%d", i)
	st := anthSystemText{index: i}
	var m anthWireSystemMessage
	if werr := anthDecodeAt(raw, path, &m); werr != nil {
		return st, werr
	}
	if m.ClearAt != nil {
		switch *m.ClearAt {
		case "next_user_message":
			st.clearAtNextUser = true
		case "never":
		default:
			return st, invalid("%s.clear_at: Input should be 'next_user_message' or 'never'", path)
		}
	}
	hasConfig := false
	if !isNull(m.OutputConfig) {
		var oc anthSystemMessageOutputConfig
		if werr := anthDecodeAt(m.OutputConfig, path+".output_config", &oc); werr != nil {
			return st, werr
		}
		if werr := anthEffortCheck(oc.Effort, path+".output_config.effort"); werr != nil {
			return st, werr
		}
		hasConfig = oc.Effort != nil
	}
	if isNull(m.Content) {
		if !hasConfig {
			// The SDK: "a message with neither content nor output_config
			// fields is rejected".
			return st, invalid("%s.content: Field required", path)
		}
		return st, nil
	}
	ttl, werr := bp.mark(m.CacheControl, path)
	if werr != nil {
		return st, werr
	}
	if werr := anthSystemContent(path, m.Content, pb, bp, &st); werr != nil {
		return st, werr
	}
	if ttl > 0 {
		pb.markLast(ttl)
	}
	return st, nil
}

// anthSystemBlock is one block of a system message: text, or a tool change.
type anthSystemBlock struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text"`
	Tool         json.RawMessage `json:"tool"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// anthSystemContent decodes a system message's content (a string or a list
// of text, tool_addition and tool_removal blocks) into st and pb.
func anthSystemContent(path string, raw json.RawMessage, pb *prefixBuilder, bp *anthBreakpoints, st *anthSystemText) *wireError {
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return invalid("%s.content: Input should be a valid string", path)
		}
		st.text = s
		anthSystemElem(pb, "system", s, 0)
		return nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return invalid("%s.content: Input should be a valid list", path)
	}
	var texts []string
	for j, braw := range raws {
		bpath := fmt.Sprintf("%s.content.%d", path, j)
		var b anthSystemBlock
		if err := json.Unmarshal(braw, &b); err != nil || braw[0] != '{' {
			return invalid("%s: Input should be a valid dictionary", bpath)
		}
		if werr := anthSystemBlockCheck(bpath, braw, &b); werr != nil {
			return werr
		}
		ttl, werr := bp.mark(b.CacheControl, bpath)
		if werr != nil {
			return werr
		}
		switch b.Type {
		case llm.TypeText:
			texts = append(texts, *b.Text)
			anthSystemElem(pb, "system", *b.Text, ttl)
		case "tool_addition":
			spec, werr := anthToolSpec(b.Tool, bpath+".tool_addition.tool")
			if werr != nil {
				return werr
			}
			st.added = append(st.added, spec)
			anthSystemElem(pb, "tool_addition", string(b.Tool), ttl)
		case "tool_removal":
			var ref struct {
				Type string `json:"type"`
				Name string `json:"name"`
			}
			if json.Unmarshal(b.Tool, &ref) == nil && ref.Type == "tool_reference" && ref.Name != "" {
				st.removedByName = append(st.removedByName, ref.Name)
			}
			anthSystemElem(pb, "tool_removal", string(b.Tool), ttl)
		}
	}
	st.text = strings.Join(texts, "\n")
	return nil
}

// anthSystemBlockCheck validates one system-message block strictly under
// its tag, as the API's tagged union does.
func anthSystemBlockCheck(bpath string, raw json.RawMessage, b *anthSystemBlock) *wireError {
	switch b.Type {
	case "":
		return invalid("%s.type: Field required", bpath)
	case llm.TypeText:
		var t struct {
			Type         string          `json:"type"`
			Text         *string         `json:"text"`
			CacheControl json.RawMessage `json:"cache_control"`
		}
		if werr := anthDecodeAt(raw, bpath+".text", &t); werr != nil {
			return werr
		}
		if t.Text == nil {
			return invalid("%s.text.text: Field required", bpath)
		}
	case "tool_addition", "tool_removal":
		var t struct {
			Type         string          `json:"type"`
			Tool         json.RawMessage `json:"tool"`
			CacheControl json.RawMessage `json:"cache_control"`
		}
		if werr := anthDecodeAt(raw, bpath+"."+b.Type, &t); werr != nil {
			return werr
		}
		if isNull(t.Tool) {
			return invalid("%s.%s.tool: Field required", bpath, b.Type)
		}
	default:
		return invalid("%s: Input tag '%s' found using 'type' does not match any of the expected tags: 'text', 'tool_addition', 'tool_removal'", bpath, b.Type)
	}
	return nil
}

// anthSystemElem adds one system-message block to the prefix, priced as a
// system text.
func anthSystemElem(pb *prefixBuilder, kind, text string, ttl time.Duration) {
	pb.begin()
	pb.str(kind)
	pb.str(text)
	pb.end(systemTokens(text), ttl)
}

// anthBlockTypes are the block types a user or assistant message may hold
// (anthropic-sdk-go v2.15.0 BetaContentBlockParamUnion), sorted as the API
// lists them when it refuses a tag (a refusal quoted in dirac-run/dirac
// issue 57: "tools.0: Input tag 'function' found using 'type' does not
// match any of the expected tags: 'bash_20250124', ...").
var anthBlockTypes = []string{
	"advisor_tool_result", "bash_code_execution_tool_result", "code_execution_tool_result",
	"compaction", "container_upload", "document", "fallback", "image", "mcp_tool_listing",
	"mcp_tool_result", "mcp_tool_use", "redacted_thinking", "search_result", "server_tool_use",
	"text", "text_editor_code_execution_tool_result", "thinking", "tool_addition",
	"tool_removal", "tool_result", "tool_search_tool_result", "tool_use",
	"web_fetch_tool_result", "web_search_tool_result",
}

// anthBlockFields are the fields of the blocks the fake reads itself
// (BetaTextBlockParam, BetaToolUseBlockParam, BetaToolResultBlockParam);
// the others travel opaque, as the model's business.
var anthBlockFields = map[string][]string{
	llm.TypeText:       {"type", "text", "cache_control", "citations"},
	llm.TypeToolUse:    {"type", "id", "name", "input", "cache_control", "caller", "toolset_name"},
	llm.TypeToolResult: {"type", "tool_use_id", "content", "is_error", "cache_control", "toolset_name"},
}

// anthBlockCheck refuses a block of a type the API does not know, or a
// text, tool_use, tool_result, thinking or redacted_thinking block with a
// field it does not take or without one it requires
// (messages.0.content.1.text.foo, the tag in the path as the API's tagged
// union puts it).
func anthBlockCheck(raw json.RawMessage, path, typ string) *wireError {
	if !slices.Contains(anthBlockTypes, typ) {
		return invalid("%s: Input tag '%s' found using 'type' does not match any of the expected tags: '%s'", path, typ, strings.Join(anthBlockTypes, "', '"))
	}
	if fields, ok := anthBlockFields[typ]; ok {
		return onlyFields(raw, path+"."+typ, fields)
	}
	if typ == "thinking" || typ == "redacted_thinking" {
		return anthThinkingBlockFields(raw, path, typ)
	}
	return nil
}
