package fake

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// wireErrKeys returns the sorted keys of an error body and of its error
// object, to check the shape is exactly the provider's.
func wireErrKeys(t *testing.T, body []byte) (top, inner string) {
	t.Helper()
	m := srvJSON(t, body)
	keys := func(m map[string]any) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return strings.Join(ks, ",")
	}
	e, _ := m["error"].(map[string]any)
	return keys(m), keys(e)
}

func TestAnthropicValidation(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{})
	user := `{"role":"user","content":"hi"}`
	toolUse := `{"role":"assistant","content":[{"type":"text","text":"calling"},{"type":"tool_use","id":"toolu_A","name":"x","input":{}},{"type":"tool_use","id":"toolu_B","name":"y","input":{"k":1}}]}`
	req := func(msgs ...string) string {
		return `{"model":"m","max_tokens":50,"messages":[` + strings.Join(msgs, ",") + `]}`
	}
	cc := `"cache_control":{"type":"ephemeral"}`
	cases := []struct {
		name, body, want string
	}{
		{"tool_use without result", req(user, toolUse, user),
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_A, toolu_B. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{"one result missing", req(user, toolUse, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_B","content":"ok"}]}`),
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_A."},
		{"result not at the start", req(user, toolUse, `{"role":"user","content":[{"type":"text","text":"first"},{"type":"tool_result","tool_use_id":"toolu_A"},{"type":"tool_result","tool_use_id":"toolu_B"}]}`),
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_A, toolu_B."},
		{"tool_use last", req(user, toolUse), "messages.1: `tool_use` ids were found without"},
		{"result without tool_use", req(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_Z","content":"?"}]}`),
			"messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_Z. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."},
		{"result for an older tool_use", req(user, toolUse, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_A"},{"type":"tool_result","tool_use_id":"toolu_B"}]}`, `{"role":"assistant","content":"done"}`, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_A"}]}`),
			"messages.4.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_A."},
		{"five breakpoints", `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"a",` + cc + `},{"type":"text","text":"b",` + cc + `}],"tools":[{"name":"t","input_schema":{},` + cc + `}],"messages":[{"role":"user","content":[{"type":"text","text":"x",` + cc + `},{"type":"text","text":"y",` + cc + `}]}]}`,
			"A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{"automatic breakpoint counts", `{"model":"m","max_tokens":5,` + cc + `,"system":[{"type":"text","text":"a",` + cc + `},{"type":"text","text":"b",` + cc + `}],"messages":[{"role":"user","content":[{"type":"text","text":"x",` + cc + `},{"type":"text","text":"y",` + cc + `}]}]}`,
			"A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{"bad ttl", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"2h"}}]}]}`,
			"messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'"},
		{"malformed JSON", `{"model":"m","max_tokens":5,"messages":[`, "The request body is not valid JSON: unexpected end of input: line 1 column 41 (char 40)"},
		{"malformed JSON on line 2", "{\"model\":\"m\",\n \"max_tokens\": 5,,", "The request body is not valid JSON: invalid character ',' looking for beginning of object key string: line 2 column 18 (char 31)"},
		{"not JSON", `hello`, "The request body is not valid JSON: invalid character 'h'"},
		{"empty body", ``, "The request body is not valid JSON"},
		{"trailing data", helloAnthropic + `{}`, "The request body is not valid JSON"},
		{"unknown field", `{"model":"m","max_tokens":5,"messages":[],"tempreature":1}`, "tempreature: Extra inputs are not permitted"},
		{"wrong kind", `{"model":"m","max_tokens":"5","messages":[]}`, "max_tokens: Input should be a valid integer"},
		{"no model", `{"max_tokens":5,"messages":[` + user + `]}`, "model: Field required"},
		{"array body", `[]`, "Input should be a valid dictionary"},
		{"temperature", `{"model":"m","max_tokens":5,"temperature":1.5,"messages":[` + user + `]}`, "temperature: Input should be less than or equal to 1"},
		{"no max_tokens", `{"model":"m","messages":[` + user + `]}`, "max_tokens: Field required"},
		{"no messages", `{"model":"m","max_tokens":5}`, "messages: Field required"},
		{"empty messages", `{"model":"m","max_tokens":5,"messages":[]}`, "messages: List should have at least 1 item after validation, not 0"},
		{"bad role", req(`{"role":"robot","content":"x"}`), "messages.0.role: Input should be 'user', 'assistant' or 'system'"},
		{"block without type", req(`{"role":"user","content":[{"text":"x"}]}`), "messages.0.content.0.type: Field required"},
		{"tool input not an object", req(`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":[1]}]}`), "messages.0.content.0.tool_use.input: Input should be a valid dictionary"},
		{"tool without schema", `{"model":"m","max_tokens":5,"tools":[{"name":"t"}],"messages":[` + user + `]}`, "tools.0.custom.input_schema: Field required"},
		{"thinking budget", `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":4000},"messages":[` + user + `]}`, "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{"tool_choice without name", `{"model":"m","max_tokens":5,"tool_choice":{"type":"tool"},"messages":[` + user + `]}`, "tool_choice.tool.name: Field required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := srvPost(t, url, "/v1/messages", c.body)
			if r.status != 400 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			top, inner := wireErrKeys(t, r.body)
			if top != "error,request_id,type" || inner != "message,type" {
				t.Errorf("error shape: %s / %s", top, inner)
			}
			m := srvJSON(t, r.body)
			if m["type"] != "error" || srvDig(m, "error", "type") != "invalid_request_error" || m["request_id"] != r.header.Get("request-id") {
				t.Errorf("error body: %s", r.body)
			}
			if msg, _ := srvDig(m, "error", "message").(string); !strings.HasPrefix(msg, c.want) {
				t.Errorf("message:\n got %q\nwant %q...", msg, c.want)
			}
		})
	}
	t.Run("valid pairing passes", func(t *testing.T) {
		t.Parallel()
		r := srvPost(t, url, "/v1/messages", req(user, toolUse, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_B","content":[{"type":"text","text":"b"}]},{"type":"tool_result","tool_use_id":"toolu_A","is_error":true,"content":"a"},{"type":"text","text":"go on"}]}`))
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("count_tokens refuses generation fields", func(t *testing.T) {
		t.Parallel()
		r := srvPost(t, url, "/v1/messages/count_tokens", helloAnthropic)
		if r.status != 400 || !strings.Contains(string(r.body), "max_tokens: Extra inputs are not permitted") {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	// Rejected requests are logged but never numbered or answered.
	for _, l := range s.Requests() {
		if l.Status == 400 && (l.N != 0 || l.Request != nil) {
			t.Errorf("rejected request numbered %d or decoded", l.N)
		}
	}
}

func TestOpenAIValidation(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	calls := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_A","type":"function","function":{"name":"x","arguments":"{}"}},{"id":"call_B","type":"function","function":{"name":"y","arguments":"{\"k\":1}"}}]}`
	req := func(msgs ...string) string {
		return `{"model":"m","messages":[{"role":"user","content":"hi"},` + strings.Join(msgs, ",") + `]}`
	}
	cases := []struct {
		name, body, msg, param, code string
	}{
		{"tool call unanswered", req(calls, `{"role":"user","content":"?"}`),
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_A, call_B", "messages.[1].role", ""},
		{"one answered", req(calls, `{"role":"tool","tool_call_id":"call_B","content":"ok"}`),
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_A", "messages.[1].role", ""},
		{"orphan tool message", req(`{"role":"tool","tool_call_id":"call_Z","content":"?"}`),
			"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", "messages.[1].role", ""},
		{"tool message after text", req(calls, `{"role":"tool","tool_call_id":"call_A","content":"a"}`, `{"role":"tool","tool_call_id":"call_B","content":"b"}`, `{"role":"user","content":"x"}`, `{"role":"tool","tool_call_id":"call_A","content":"again"}`),
			"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", "messages.[5].role", ""},
		{"unknown tool_call_id", req(calls, `{"role":"tool","tool_call_id":"call_A","content":"a"}`, `{"role":"tool","tool_call_id":"call_Q","content":"q"}`),
			"Invalid parameter: 'tool_call_id' of 'call_Q' not found in 'tool_calls' of previous message.", "messages.[3].tool_call_id", ""},
		{"malformed JSON", `{"model":`, "We could not parse the JSON body of your request.", "", ""},
		{"unknown field", `{"model":"m","messages":[],"max_tokenz":3}`, "Unrecognized request argument supplied: max_tokenz", "", ""},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, "you must provide a model parameter", "", ""},
		{"array body", `[1]`, "Invalid type for request body: expected an object.", "", "invalid_type"},
		{"temperature", `{"model":"m","temperature":3,"messages":[{"role":"user","content":"hi"}]}`, "Invalid 'temperature'", "temperature", "invalid_value"},
		{"no messages", `{"model":"m"}`, "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"},
		{"empty messages", `{"model":"m","messages":[]}`, "Invalid 'messages': empty array.", "messages", "empty_array"},
		{"bad role", req(`{"role":"robot","content":"x"}`), "Invalid value: 'robot'.", "messages[1].role", "invalid_value"},
		{"stream_options without stream", `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", "invalid_value"},
		{"bad tool_choice", `{"model":"m","tool_choice":"sometimes","messages":[{"role":"user","content":"hi"}]}`, "Invalid value: 'sometimes'.", "tool_choice", "invalid_value"},
		{"too many stops", `{"model":"m","stop":["a","b","c","d","e"],"messages":[{"role":"user","content":"hi"}]}`, "Invalid 'stop': array too long.", "stop", "array_above_max_length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := srvPost(t, url, "/v1/chat/completions", c.body)
			if r.status != 400 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			top, inner := wireErrKeys(t, r.body)
			if top != "error" || inner != "code,message,param,type" {
				t.Errorf("error shape: %s / %s", top, inner)
			}
			m := srvJSON(t, r.body)
			if srvDig(m, "error", "type") != "invalid_request_error" {
				t.Errorf("type: %s", r.body)
			}
			if msg, _ := srvDig(m, "error", "message").(string); !strings.HasPrefix(msg, c.msg) {
				t.Errorf("message:\n got %q\nwant %q...", msg, c.msg)
			}
			if got := fmt.Sprint(srvDig(m, "error", "param")); (c.param == "" && got != "<nil>") || (c.param != "" && got != c.param) {
				t.Errorf("param = %s, want %q", got, c.param)
			}
			if got := fmt.Sprint(srvDig(m, "error", "code")); (c.code == "" && got != "<nil>") || (c.code != "" && got != c.code) {
				t.Errorf("code = %s, want %q", got, c.code)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{APIKey: "sk-test-key"})
	for _, c := range []struct {
		name   string
		kv     []string
		status int
	}{
		{"x-api-key", []string{"x-api-key", "sk-test-key"}, 200},
		{"bearer", []string{"Authorization", "Bearer sk-test-key"}, 200},
		{"bearer lower-case scheme", []string{"Authorization", "bearer sk-test-key"}, 200},
		{"missing", nil, 401},
		{"wrong x-api-key", []string{"x-api-key", "sk-test-kez"}, 401},
		{"wrong bearer", []string{"Authorization", "Bearer sk-test-key-2"}, 401},
		{"basic", []string{"Authorization", "Basic sk-test-key"}, 401},
	} {
		a := srvPost(t, url, "/v1/messages", helloAnthropic, c.kv...)
		o := srvPost(t, url, "/v1/chat/completions", helloOpenAI, c.kv...)
		if a.status != c.status || o.status != c.status {
			t.Errorf("%s: anthropic %d openai %d, want %d", c.name, a.status, o.status, c.status)
			continue
		}
		if c.status != 401 {
			continue
		}
		if top, inner := wireErrKeys(t, a.body); top != "error,request_id,type" || inner != "message,type" || srvDig(srvJSON(t, a.body), "error", "type") != "authentication_error" {
			t.Errorf("%s: anthropic 401 body %s", c.name, a.body)
		}
		if top, inner := wireErrKeys(t, o.body); top != "error" || inner != "code,message,param,type" {
			t.Errorf("%s: openai 401 body %s", c.name, o.body)
		}
		for _, b := range [][]byte{a.body, o.body} {
			if strings.Contains(string(b), "sk-test") {
				t.Errorf("%s: the error echoes a key: %s", c.name, b)
			}
		}
	}
	if m := srvJSON(t, srvPost(t, url, "/v1/messages", helloAnthropic).body); srvDig(m, "error", "message") != "x-api-key header is required" {
		t.Errorf("missing key message: %v", m)
	}
	// Authentication is checked before the body is read or numbered.
	for _, l := range s.Requests() {
		if l.Status == 401 && l.N != 0 {
			t.Errorf("401 request numbered %d", l.N)
		}
	}
}
