package fake

import (
	"fmt"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

// TestResponsesJSONSchemaChecks: text.format json_schema is checked as
// Chat Completions checks response_format: strict mode's subset under
// strict: true only, and the name's pattern.
func TestResponsesJSONSchemaChecks(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	loose := `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`
	body := func(name, strict string) string {
		return `{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"` + name + `"` + strict + `,"schema":` + loose + `}}}`
	}
	for _, c := range []struct{ name, body, param, code, msg string }{
		{"strict refuses a loose schema", body("thing", `,"strict":true`), "text.format.schema", "invalid_json_schema",
			"Invalid schema for response_format 'thing': In context=(), 'additionalProperties' is required to be supplied and to be false."},
		{"a name outside the pattern", body("a b", ""), "text.format.name", "invalid_value",
			"Invalid 'text.format.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."},
		{"strict that is no boolean", body("thing", `,"strict":"yes"`), "text.format.strict", "invalid_type",
			"Invalid type for 'text.format.strict': expected a boolean."},
	} {
		r := srvPost(t, url, "/v1/responses", c.body)
		e := srvJSON(t, r.body)
		if r.status != 400 || srvDig(e, "error", "param") != c.param || srvDig(e, "error", "code") != c.code || srvDig(e, "error", "message") != c.msg {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
	for _, strict := range []string{"", `,"strict":false`, `,"strict":null`} {
		if r := srvPost(t, url, "/v1/responses", body("thing", strict)); r.status != 200 {
			t.Errorf("not strict (%q): %d %s", strict, r.status, r.body)
		}
	}
}

// TestJSONObjectAgreesAcrossOpenAIWires: json_object answers the same on
// Chat Completions and Responses: a scripted object as it is, other text
// wrapped as {"text": ...}.
func TestJSONObjectAgreesAcrossOpenAIWires(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ scripted, want string }{
		{`{"a":[1,2]}`, `{"a":[1,2]}`},
		{"Done.", `{"text":"Done."}`},
	} {
		_, url := srvStart(t, Options{Responder: replyWith(llm.Text(c.scripted))})
		chat := srvPost(t, url, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"answer in json"}],"response_format":{"type":"json_object"}}`)
		resp := srvPost(t, url, "/v1/responses", `{"model":"m","input":"answer in json","text":{"format":{"type":"json_object"}}}`)
		got := []any{
			srvDig(srvJSON(t, chat.body), "choices", 0, "message", "content"),
			srvDig(srvJSON(t, resp.body), "output", 0, "content", 0, "text"),
		}
		if fmt.Sprint(got) != fmt.Sprint([]any{c.want, c.want}) {
			t.Errorf("%s: chat, responses = %q, want %s on both", c.scripted, got, c.want)
		}
	}
}
