package fake

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

// Raw-JSON requests the Responses API refuses, answered as it answers
// them: status, error type, message, param and code.

func TestResponsesRejects(t *testing.T) {
	t.Parallel()
	const call = `{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"}`
	for _, c := range []struct {
		name, body, msg, param, code string
	}{
		{"unknown top-level field", `{"model":"m","input":"hi","foo":1}`,
			"Unknown parameter: 'foo'.", "foo", "unknown_parameter"},
		{"reasoning item status", `{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[],"status":"completed"}]}`,
			"Unknown parameter: 'input[0].status'.", "input[0].status", "unknown_parameter"},
		{"unknown part field", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a","bogus":1}]}]}`,
			"Unknown parameter: 'input[0].content[0].bogus'.", "input[0].content[0].bogus", "unknown_parameter"},
		{"a field of another part type", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a","annotations":[]}]}]}`,
			"Unknown parameter: 'input[0].content[0].annotations'.", "input[0].content[0].annotations", "unknown_parameter"},
		{"chat-shaped tool", `{"model":"m","input":"hi","tools":[{"type":"function","function":{"name":"f"}}]}`,
			"Unknown parameter: 'tools[0].function'.", "tools[0].function", "unknown_parameter"},
		{"tool without a name", `{"model":"m","input":"hi","tools":[{"type":"function","parameters":{}}]}`,
			"Missing required parameter: 'tools[0].name'.", "tools[0].name", "missing_required_parameter"},
		{"unknown previous response", `{"model":"m","input":"hi","previous_response_id":"resp_nope"}`,
			"Previous response with id 'resp_nope' not found.", "previous_response_id", "previous_response_not_found"},
		{"no model", `{"input":"hi"}`,
			"Missing required parameter: 'model'.", "model", "missing_required_parameter"},
		{"max_output_tokens below 16", `{"model":"m","input":"hi","max_output_tokens":5}`,
			"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 5 instead.", "max_output_tokens", "integer_below_min_value"},
		{"output without its call", `{"model":"m","input":[{"type":"function_call_output","call_id":"call_9","output":"x"}]}`,
			"No tool call found for function call output with call_id call_9.", "input", ""},
		{"call without its output", `{"model":"m","input":[` + call + `]}`,
			"No tool output found for function call call_1.", "input", ""},
		{"call missing arguments", `{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f"}]}`,
			"Missing required parameter: 'input[0].arguments'.", "input[0].arguments", "missing_required_parameter"},
		{"unknown include", `{"model":"m","input":"hi","include":["reasoning.everything"]}`,
			"", "include[0]", "invalid_value"},
		{"json_schema without a name", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`,
			"Missing required parameter: 'text.format.name'.", "text.format.name", "missing_required_parameter"},
		{"user sends output_text", `{"model":"m","input":[{"role":"user","content":[{"type":"output_text","text":"a"}]}]}`,
			"", "input[0].content[0].type", "invalid_value"},
		{"unknown role", `{"model":"m","input":[{"role":"tool","content":"a"}]}`,
			"", "input[0].role", "invalid_value"},
		{"unknown item type", `{"model":"m","input":[{"type":"telepathy"}]}`,
			"", "input[0].type", "invalid_value"},
		{"bad reasoning effort", `{"model":"m","input":"hi","reasoning":{"effort":"maximal"}}`,
			"", "reasoning.effort", "invalid_value"},
		{"stream_options without stream", `{"model":"m","input":"hi","stream_options":{"include_obfuscation":false}}`,
			"The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", "invalid_value"},
		{"wrong type", `{"model":"m","input":"hi","max_output_tokens":"lots"}`,
			"Invalid type for 'max_output_tokens': expected an integer.", "max_output_tokens", "invalid_type"},
		{"reasoning neither stored nor encrypted", `{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[]}]}`,
			"Item with id 'rs_1' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", "input", ""},
		{"no input", `{"model":"m"}`,
			"Missing required parameter: 'input'.", "input", "missing_required_parameter"},
		{"json_object without saying json", `{"model":"m","input":"hi","text":{"format":{"type":"json_object"}}}`,
			"Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.", "input", ""},
		{"forged encrypted content", `{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAAABforged"}]}`,
			"The encrypted content for item rs_1 could not be verified.", "", "invalid_encrypted_content"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, url := srvStart(t, Options{})
			r := srvPost(t, url, "/v1/responses", c.body)
			if r.status != 400 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			e := srvJSON(t, r.body)
			if c.msg != "" && srvDig(e, "error", "message") != c.msg {
				t.Errorf("message %q, want %q", srvDig(e, "error", "message"), c.msg)
			}
			if srvDig(e, "error", "type") != "invalid_request_error" || srvDig(e, "error", "message") == "" {
				t.Errorf("error %s", r.body)
			}
			if p, _ := srvDig(e, "error", "param").(string); p != c.param {
				t.Errorf("param %q, want %q", p, c.param)
			}
			if code, _ := srvDig(e, "error", "code").(string); code != c.code {
				t.Errorf("code %q, want %q", code, c.code)
			}
			if logged := srv.Requests(); len(logged) != 1 || logged[0].N != 0 {
				t.Errorf("a refused request was numbered: %+v", logged)
			}
		})
	}
}

// TestResponsesJSONObject: json_object mode answers a JSON object.
func TestResponsesJSONObject(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("not json at all"))})
	r := srvPost(t, url, "/v1/responses", `{"model":"m","input":"answer in JSON","text":{"format":{"type":"json_object"}}}`)
	text, _ := srvDig(srvJSON(t, r.body), "output", 0, "content", 0, "text").(string)
	var obj map[string]any
	if r.status != 200 || json.Unmarshal([]byte(text), &obj) != nil {
		t.Errorf("%d: %s", r.status, r.body)
	}
}

// TestResponsesConversationIsUnknown: the fake holds no conversations, so
// naming one is answered as an unknown one is, never ignored.
func TestResponsesConversationIsUnknown(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	for _, conv := range []string{`"conv_1"`, `{"id":"conv_1"}`} {
		r := srvPost(t, url, "/v1/responses", `{"model":"m","input":"hi","conversation":`+conv+`}`)
		e := srvJSON(t, r.body)
		if r.status != 404 || srvDig(e, "error", "message") != "Conversation with id 'conv_1' not found." || srvDig(e, "error", "param") != "conversation" {
			t.Errorf("%s: %d %s", conv, r.status, r.body)
		}
	}
}

func TestResponsesByIDUnknownAndMethods(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPut} {
		req, err := http.NewRequest(method, url+"/v1/responses/resp_nope", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		want := http.StatusNotFound
		if method == http.MethodPut {
			want = http.StatusMethodNotAllowed
		}
		if res.StatusCode != want {
			t.Fatalf("%s: status %d: %s", method, res.StatusCode, body)
		}
		e := srvJSON(t, body)
		if want == 404 && (srvDig(e, "error", "message") != "Response with id 'resp_nope' not found." || srvDig(e, "error", "type") != "invalid_request_error") {
			t.Errorf("%s: %s", method, body)
		}
	}
}

// TestResponsesMaxOutputTokensIsIncomplete: an answer cut by
// max_output_tokens is status incomplete with its reason, and a stream
// ends with response.incomplete.
func TestResponsesMaxOutputTokensIsIncomplete(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text(strings.Repeat("many words here ", 50)))})
	r := srvPost(t, url, "/v1/responses", `{"model":"m","input":"hi","max_output_tokens":16}`)
	v := srvJSON(t, r.body)
	if srvDig(v, "status") != "incomplete" || srvDig(v, "incomplete_details", "reason") != "max_output_tokens" ||
		srvDig(v, "output", 0, "status") != "incomplete" || srvDig(v, "usage", "output_tokens") != float64(16) {
		t.Errorf("%s", r.body)
	}
	r = srvPost(t, url, "/v1/responses", `{"model":"m","input":"hi","max_output_tokens":16,"stream":true}`)
	if !strings.Contains(string(r.body), "event: response.incomplete\n") || strings.Contains(string(r.body), "response.completed") {
		t.Errorf("stream: %s", r.body)
	}
}

// TestResponsesAcceptsCodexShape: a request in the shape Codex CLI 0.171
// sends (its client_metadata, a custom tool with a grammar, hosted
// tool_search and web_search, input items carrying ids, a function call
// with its status) is answered, and the Responder sees the function tools,
// the developer text as system and the call paired with its output.
func TestResponsesAcceptsCodexShape(t *testing.T) {
	t.Parallel()
	body := `{"model":"gpt-5.5-codex","stream":true,"store":false,"parallel_tool_calls":false,"prompt_cache_key":"0193","tool_choice":"auto",
"client_metadata":{"session_id":"s1","turn_id":"t1"},"include":["reasoning.encrypted_content"],"reasoning":{"effort":"medium"},"text":{"verbosity":"low"},
"tools":[{"type":"function","name":"exec_command","description":"run","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}},
{"type":"custom","name":"apply_patch","description":"patch","format":{"type":"grammar","syntax":"lark","definition":"start: \"x\""}},
{"type":"tool_search","execution":"client","description":"find","parameters":{"type":"object"}},{"type":"web_search","external_web_access":false}],
"input":[{"type":"message","id":"msg_1","role":"developer","content":[{"type":"input_text","text":"You are Codex."}]},
{"type":"message","id":"msg_2","role":"user","content":[{"type":"input_text","text":"cat notes.txt"}]},
{"type":"function_call","id":"fc_1","status":"completed","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"cat notes.txt\"}"},
{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"hello"}]}`
	srv, url := srvStart(t, Options{})
	r := srvPost(t, url, "/v1/responses", body)
	if r.status != 200 || !strings.Contains(string(r.body), "event: response.completed\n") {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	req := srv.Requests()[0].Request
	if req.System != "You are Codex." || len(req.Tools) != 2 || req.Tools[1].Name != "apply_patch" || !req.ToolChoice.DisableParallel ||
		len(req.Messages) != 3 || req.Messages[2].Content[0].ToolUseID != "call_1" {
		t.Errorf("decoded: %+v", req)
	}
}

// TestResponsesAdditionalToolsAndNamespaces: tools in an additional_tools
// input item and in a namespace are offered like the request's own, and a
// call to a namespaced tool names its namespace, as Codex CLI's code mode
// reads it.
func TestResponsesAdditionalToolsAndNamespaces(t *testing.T) {
	t.Parallel()
	srv, url := srvStart(t, Options{Responder: replyWith(llm.ToolCall("", "exec", []byte("console.log(1)")))})
	body := `{"model":"m","tools":[{"type":"function","name":"top","parameters":{"type":"object"}}],"input":[
{"type":"additional_tools","id":"at_1","role":"developer","tools":[{"type":"namespace","name":"functions","description":"","tools":[
{"type":"custom","name":"exec","description":"Run JavaScript"},{"type":"function","name":"wait","parameters":{"type":"object"}}]}]},
{"role":"user","content":"go"}]}`
	r := srvPost(t, url, "/v1/responses", body)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	v := srvJSON(t, r.body)
	if srvDig(v, "output", 0, "type") != "custom_tool_call" || srvDig(v, "output", 0, "namespace") != "functions" || srvDig(v, "output", 0, "input") != "console.log(1)" {
		t.Errorf("output %s", r.body)
	}
	req := srv.Requests()[0].Request
	if len(req.Tools) != 3 || req.Tools[1].Name != "exec" || req.Tools[2].Name != "wait" || len(req.Messages) != 1 {
		t.Errorf("decoded %+v", req)
	}
	bad := srvPost(t, url, "/v1/responses", `{"model":"m","input":[{"type":"additional_tools","tools":[{"type":"namespace","name":"n","tools":[{"type":"namespace","name":"m","tools":[]}]}]}]}`)
	if e := srvJSON(t, bad.body); bad.status != 400 || srvDig(e, "error", "param") != "input[0].tools[0].tools[0].type" {
		t.Errorf("a namespace in a namespace: %d %s", bad.status, bad.body)
	}
}

func TestResponsesInputItemsRefusesBadQueries(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	id, _ := srvDig(srvJSON(t, srvPost(t, url, "/v1/responses", respPlainBody).body), "id").(string)
	for q, param := range map[string]string{"limit=0": "limit", "limit=101": "limit", "limit=x": "limit", "order=up": "order"} {
		res, err := http.Get(url + "/v1/responses/" + id + "/input_items?" + q)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if e := srvJSON(t, body); res.StatusCode != 400 || srvDig(e, "error", "param") != param {
			t.Errorf("%s: %d %s", q, res.StatusCode, body)
		}
	}
	res, err := http.Get(url + "/v1/responses/" + id + "/input_items?after=msg_nope")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if v := srvJSON(t, body); res.StatusCode != 200 || len(srvDig(v, "data").([]any)) != 0 || srvDig(v, "has_more") != false {
		t.Errorf("after an unknown id: %s", body)
	}
}
