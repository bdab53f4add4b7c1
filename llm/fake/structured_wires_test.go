package fake

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

// Structured outputs on the three wires: the same scripted answers under
// the same schema and token limit come out shaped the same way, by the
// one shaper they share (answerBySchema).

// schemaWire is one wire's way to ask for a JSON schema answer and to
// read the answer back.
type schemaWire struct {
	name, path string
	// body asks for an answer valid against schema; maxTokens 0 leaves the
	// wire's limit large.
	body func(schema string, maxTokens int) string
	// read returns the answer's text (a refusal's words where the wire
	// has a place for them), whether the limit cut it, whether it called a
	// tool, and the kinds of its output in order.
	read func(m map[string]any) (text string, cut, called bool, kinds []string)
}

var schemaWires = []schemaWire{
	{
		name: "messages", path: "/v1/messages",
		body: func(schema string, maxTokens int) string {
			return `{"model":"m","max_tokens":` + itoaOr(maxTokens, 4096) + `,"output_config":{"format":{"type":"json_schema","schema":` + schema + `}},"messages":[{"role":"user","content":"x"}]}`
		},
		read: func(m map[string]any) (string, bool, bool, []string) {
			var text strings.Builder
			var kinds []string
			called := false
			for _, b := range asList(m["content"]) {
				kind, _ := srvDig(b, "type").(string)
				kinds = append(kinds, kind)
				s, _ := srvDig(b, "text").(string)
				text.WriteString(s)
				called = called || kind == "tool_use"
			}
			return text.String(), m["stop_reason"] == "max_tokens", called, kinds
		},
	},
	{
		name: "chat", path: "/v1/chat/completions",
		body: func(schema string, maxTokens int) string {
			return `{"model":"m","max_completion_tokens":` + itoaOr(maxTokens, 4096) + `,"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"thing","strict":true,"schema":` + schema + `}}}`
		},
		read: func(m map[string]any) (string, bool, bool, []string) {
			msg := srvDig(m, "choices", 0, "message")
			text, _ := srvDig(msg, "content").(string)
			if r, ok := srvDig(msg, "refusal").(string); ok {
				text = r
			}
			called := len(asList(srvDig(msg, "tool_calls"))) > 0
			return text, srvDig(m, "choices", 0, "finish_reason") == "length", called, nil
		},
	},
	{
		name: "responses", path: "/v1/responses",
		body: func(schema string, maxTokens int) string {
			return `{"model":"m","max_output_tokens":` + itoaOr(maxTokens, 4096) + `,"input":"x","text":{"format":{"type":"json_schema","name":"thing","strict":true,"schema":` + schema + `}}}`
		},
		read: func(m map[string]any) (string, bool, bool, []string) {
			var text strings.Builder
			var kinds []string
			called := false
			for _, it := range asList(m["output"]) {
				kind, _ := srvDig(it, "type").(string)
				kinds = append(kinds, kind)
				called = called || kind == "function_call"
				for _, p := range asList(srvDig(it, "content")) {
					s, _ := srvDig(p, "text").(string)
					text.WriteString(s)
				}
			}
			cut := m["status"] == "incomplete" && srvDig(m, "incomplete_details", "reason") == "max_output_tokens"
			return text.String(), cut, called, kinds
		},
	},
}

func itoaOr(n, def int) string {
	if n == 0 {
		n = def
	}
	b, _ := json.Marshal(n)
	return string(b)
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// TestStructuredOutputsAgreeAcrossWires runs each case over all three
// wires.
func TestStructuredOutputsAgreeAcrossWires(t *testing.T) {
	t.Parallel()
	scripted := `{"name":"kept","count":3,"when":"2026-01-02","tags":["a"],"note":null}`
	cases := []struct {
		name      string
		reply     Reply
		maxTokens int
		wires     []string // nil: all three
		check     func(t *testing.T, text string, cut, called bool, kinds []string)
	}{
		{name: "prose becomes JSON holding it", reply: Reply{Content: []llm.Block{llm.Text("Done.")}},
			check: func(t *testing.T, text string, cut, called bool, _ []string) {
				wantValidThing(t, text)
				if cut || called || !strings.Contains(text, `"Done."`) {
					t.Errorf("cut %v, called %v, text %s", cut, called, text)
				}
			}},
		{name: "valid JSON is kept as it is", reply: Reply{Content: []llm.Block{llm.Text(scripted)}},
			check: func(t *testing.T, text string, _, _ bool, _ []string) {
				if text != scripted {
					t.Errorf("text %s, want %s", text, scripted)
				}
			}},
		{name: "max tokens cuts the JSON", maxTokens: 16, reply: Reply{Content: []llm.Block{llm.Text(strings.Repeat("word ", 200))}},
			check: func(t *testing.T, text string, cut, _ bool, _ []string) {
				if !cut || text == "" || json.Valid([]byte(text)) || !strings.HasPrefix(text, `{"name":"`) {
					t.Errorf("cut %v, text %q: want a cut, invalid JSON prefix", cut, text)
				}
			}},
		{name: "thinking only answers JSON after it", reply: Reply{Content: []llm.Block{llm.Opaque("thinking", thinkingBlock("mull"))}},
			wires: []string{"messages", "responses"},
			check: func(t *testing.T, text string, _, _ bool, kinds []string) {
				wantValidThing(t, text)
				want := map[string]string{"thinking": "text", "reasoning": "message"}
				if len(kinds) != 2 || want[kinds[0]] == "" || kinds[1] != want[kinds[0]] {
					t.Errorf("output kinds %v: want the thinking, then the answer", kinds)
				}
			}},
		{name: "a tool call only stays one", reply: Reply{Content: []llm.Block{llm.ToolUse("", "get_weather", json.RawMessage(`{}`))}},
			check: func(t *testing.T, text string, _, called bool, _ []string) {
				if !called || text != "" {
					t.Errorf("called %v, text %q", called, text)
				}
			}},
		{name: "a refusal is not held to the schema", reply: Reply{Content: []llm.Block{llm.Text("I can't help with that.")}, StopReason: llm.StopRefusal},
			wires: []string{"messages", "chat"},
			check: func(t *testing.T, text string, _, _ bool, _ []string) {
				if text != "I can't help with that." {
					t.Errorf("text %q", text)
				}
			}},
	}
	for _, c := range cases {
		_, url := srvStart(t, Options{Responder: respondFunc(func(*llm.Request, RequestInfo) Reply { return c.reply })})
		for _, w := range schemaWires {
			if c.wires != nil && !strings.Contains(strings.Join(c.wires, " "), w.name) {
				continue
			}
			t.Run(c.name+"/"+w.name, func(t *testing.T) {
				t.Parallel()
				r := srvPost(t, url, w.path, w.body(thingSchema, c.maxTokens))
				if r.status != 200 {
					t.Fatalf("%d %s", r.status, r.body)
				}
				text, cut, called, kinds := w.read(srvJSON(t, r.body))
				c.check(t, text, cut, called, kinds)
			})
		}
	}
}

// wantValidThing fails unless text is JSON valid against thingSchema.
func wantValidThing(t *testing.T, text string) {
	t.Helper()
	v, err := newSchemaValidator([]byte(thingSchema))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid([]byte(text)) || !v.valid(v.root, []byte(text)) {
		t.Errorf("answer %q is not valid against the schema", text)
	}
}
