package fake

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

// claudeCodeHeaders are the headers Claude Code 2.1.328 sends with every
// Messages request (testdata/claude_code/README.md).
var claudeCodeHeaders = []string{
	"anthropic-version", "2023-06-01",
	"anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24",
	"x-api-key", "test-key", "x-app", "cli",
}

// TestAnthropicClaudeCodeRequests sends the bodies Claude Code sends (a
// role "system" message in messages, per-request and per-message
// output_config, adaptive thinking, context_management): the old fake
// answered the first with 400 "output_config: Extra inputs are not
// permitted".
func TestAnthropicClaudeCodeRequests(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"first_turn.json", "tool_round_trip.json"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(filepath.Join("testdata", "claude_code", name))
			if err != nil {
				t.Fatal(err)
			}
			s, url := srvStart(t, Options{})
			r := srvPost(t, url, "/v1/messages?beta=true", string(body), claudeCodeHeaders...)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			sse := string(r.body)
			for _, ev := range []string{"event: message_start", `"context_management":{"applied_edits":[]}`, "event: message_stop"} {
				if !strings.Contains(sse, ev) {
					t.Errorf("stream lacks %s:\n%s", ev, sse)
				}
			}
			got := s.Requests()[0].Request
			if !strings.Contains(got.System, "You are an agent built for tests.") || !strings.Contains(got.System, "# Environment") {
				t.Errorf("the system message's text did not reach the Responder's System: %q", got.System)
			}
			// The system message is not a conversation turn.
			for _, m := range got.Messages {
				if m.Role != llm.User && m.Role != llm.Assistant {
					t.Errorf("message with role %q reached the Responder", m.Role)
				}
			}
		})
	}
}

// TestAnthropicWireRefusals checks that what the API refuses is still
// refused, with the path of the offending value, and what it takes passes.
func TestAnthropicWireRefusals(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	const user = `{"role":"user","content":"hi"}`
	req := func(extra string, msgs ...string) string {
		return `{"model":"m","max_tokens":5` + extra + `,"messages":[` + strings.Join(msgs, ",") + `]}`
	}
	sys := func(fields string) string { return `{"role":"system","content":"be brief"` + fields + `}` }
	cases := []struct{ name, body, want string }{
		// The old fake dropped the messages.1. prefix of a field it did not know.
		{"unknown message field", req("", user, `{"role":"assistant","content":"x","foo":1}`), "messages.1.foo: Extra inputs are not permitted"},
		{"unknown system message field", req("", user, sys(`,"output_config":{"effort":"low","format":{}}`)), "messages.1.output_config.format: Extra inputs are not permitted"},
		{"bad per-turn effort", req("", user, sys(`,"output_config":{"effort":"huge"}`)), "messages.1.output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"},
		{"bad clear_at", req("", user, sys(`,"clear_at":"later"`)), "messages.1.clear_at: Input should be 'next_user_message' or 'never'"},
		{"system message first", req("", sys(""), user), "messages.0: a system message cannot be the first message"},
		{"two system messages", req("", user, sys(""), sys("")), "messages.2: consecutive system messages are not allowed"},
		{"system message after an assistant text", req("", user, `{"role":"assistant","content":"x"}`, sys("")), "messages.2: a system message must immediately follow a user message"},
		{"system message before a user message", req("", user, sys(""), user), "messages.1: a system message must be the last message or be followed by an assistant message"},
		{"image in a system message", req("", user, `{"role":"system","content":[{"type":"image","source":{}}]}`), "messages.1.content.0: Input tag 'image' found using 'type' does not match any of the expected tags: 'text', 'tool_addition', 'tool_removal'"},
		{"system message with nothing", req("", user, `{"role":"system"}`), "messages.1.content: Field required"},
		{"unknown block type", req("", `{"role":"user","content":[{"type":"picture"}]}`), "messages.0.content.0: Input tag 'picture' found using 'type' does not match any of the expected tags: 'advisor_tool_result', "},
		{"unknown text block field", req("", `{"role":"user","content":[{"type":"text","text":"x","colour":"red"}]}`), "messages.0.content.0.text.colour: Extra inputs are not permitted"},
		{"bad effort", req(`,"output_config":{"effort":"huge"}`, user), "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"},
		{"unknown output_config field", req(`,"output_config":{"verbosity":1}`, user), "output_config.verbosity: Extra inputs are not permitted"},
		{"format not json_schema", req(`,"output_config":{"format":{"type":"xml","schema":{}}}`, user), "output_config.format.type: Input should be 'json_schema'"},
		{"format without schema", req(`,"output_config":{"format":{"type":"json_schema"}}`, user), "output_config.format.schema: Field required"},
		{"two formats", req(`,"output_config":{"format":{"type":"json_schema","schema":{"type":"string"}}},"output_format":{"type":"json_schema","schema":{"type":"string"}}`, user), "output_format: cannot be combined with output_config.format"},
		{"task budget without total", req(`,"output_config":{"task_budget":{"type":"tokens"}}`, user), "output_config.task_budget.total: Field required"},
		{"adaptive thinking with a budget", req(`,"thinking":{"type":"adaptive","budget_tokens":2048}`, user), "thinking.adaptive.budget_tokens: Extra inputs are not permitted"},
		{"bad thinking display", req(`,"thinking":{"type":"adaptive","display":"full"}`, user), "thinking.adaptive.display: Input should be 'summarized' or 'omitted'"},
		{"unknown thinking type", req(`,"thinking":{"type":"deep"}`, user), "thinking: Input tag 'deep' found using 'type' does not match any of the expected tags: 'adaptive', 'between_tools', 'disabled', 'enabled'"},
		{"unknown context edit", req(`,"context_management":{"edits":[{"type":"forget_everything"}]}`, user), "context_management.edits.0: Input tag 'forget_everything' found using 'type' does not match any of the expected tags: 'clear_tool_uses_20250919', 'clear_thinking_20251015', 'compact_20260112'"},
		{"context management with compaction", req(`,"context_management":{"edits":[]},"compaction":{"type":"summarize"}`, user), "compaction: cannot be combined with context_management"},
		{"bad thread type", req(`,"thread":{"type":"fork"}`, user), "thread: Input tag 'fork' found using 'type' does not match any of the expected tags: 'create', 'continue'"},
		{"continue without an id", req(`,"thread":{"type":"continue"}`, user), "thread.continue.previous_message_id: Field required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := srvPost(t, url, "/v1/messages", c.body, "anthropic-version", "2023-06-01")
			m := srvJSON(t, r.body)
			if r.status != http.StatusBadRequest || m["type"] != "error" || srvDig(m, "error", "type") != "invalid_request_error" {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if msg, _ := srvDig(m, "error", "message").(string); !strings.HasPrefix(msg, c.want) {
				t.Errorf("message:\n got %q\nwant %q...", msg, c.want)
			}
		})
	}
}

// TestAnthropicWireAccepts checks requests the API takes that the old fake
// refused or could not express.
func TestAnthropicWireAccepts(t *testing.T) {
	t.Parallel()
	const user = `{"role":"user","content":"hi"}`
	cases := []struct{ name, body string }{
		{"system message after a server tool use", `{"model":"m","max_tokens":5,"messages":[` + user + `,{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}]},{"role":"system","content":"cite sources"}]}`},
		{"effort-only system message", `{"model":"m","max_tokens":5,"messages":[` + user + `,{"role":"system","output_config":{"effort":"low"}}]}`},
		{"between_tools thinking", `{"model":"m","max_tokens":5,"thinking":{"type":"between_tools"},"messages":[` + user + `]}`},
		{"enabled thinking with display", `{"model":"m","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":1024,"display":"omitted","block_binding":{"prefix_mismatch_behavior":"drop_block"}},"messages":[` + user + `]}`},
		{"task budget", `{"model":"m","max_tokens":5,"output_config":{"task_budget":{"type":"tokens","total":1000,"remaining":400}},"messages":[` + user + `]}`},
		{"text block with citations null", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x","citations":null}]}]}`},
	}
	_, url := srvStart(t, Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if r := srvPost(t, url, "/v1/messages", c.body); r.status != http.StatusOK {
				t.Errorf("status %d: %s", r.status, r.body)
			}
		})
	}
}

// TestAnthropicSystemMessageTools applies tool_addition and tool_removal
// blocks to the tools the Responder sees, and a system message cleared at
// the next user message leaves the model's instructions once one follows.
func TestAnthropicSystemMessageTools(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{})
	body := `{"model":"m","max_tokens":5,"tools":[{"name":"old","input_schema":{"type":"object"}}],"messages":[` +
		`{"role":"user","content":"hi"},` +
		`{"role":"system","content":[{"type":"tool_addition","tool":{"name":"db_query","input_schema":{"type":"object"}}},{"type":"tool_removal","tool":{"type":"tool_reference","name":"old"}}]},` +
		`{"role":"assistant","content":"ok"},{"role":"user","content":"next"},` +
		`{"role":"system","content":"only for this turn","clear_at":"next_user_message"},{"role":"assistant","content":"sure"},{"role":"user","content":"later"}]}`
	if r := srvPost(t, url, "/v1/messages", body); r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	got := s.Requests()[0].Request
	if len(got.Tools) != 1 || got.Tools[0].Name != "db_query" {
		t.Errorf("tools: %+v, want only db_query", got.Tools)
	}
	if strings.Contains(got.System, "only for this turn") {
		t.Errorf("a cleared system message is still in System: %q", got.System)
	}
	if len(got.Messages) != 5 {
		t.Errorf("messages: %d, want the 5 user and assistant turns", len(got.Messages))
	}
}
