package fake

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/deputy-run/deputy/llm"
)

func TestLoremExactLength(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 2, 5, 6, 100, 3000, len(loremBase) - 1, len(loremBase), len(loremBase) + 7, 100_000} {
		s, err := lorem(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := utf8.RuneCountInString(s); got != n {
			t.Errorf("lorem %d has %d characters", n, got)
		}
		if strings.HasSuffix(s, " ") {
			t.Errorf("lorem %d ends in a space", n)
		}
		if again, _ := lorem(n); again != s {
			t.Errorf("lorem %d is not deterministic", n)
		}
	}
	if s, _ := lorem(11); s != "Lorem ipsum" {
		t.Errorf("lorem 11 = %q", s)
	}
	if s, _ := lorem(6); s != "Lorem." {
		t.Errorf("lorem 6 = %q, want the space replaced by a period", s)
	}
	for _, n := range []int{-1, maxLorem + 1} {
		if _, err := lorem(n); err == nil {
			t.Errorf("lorem %d: no error", n)
		}
	}
}

func TestTemplateFuncs(t *testing.T) {
	t.Parallel()
	cases := []struct{ tmpl, want string }{
		{`{{truncate 3 "héllo"}}`, "hél"},
		{`{{truncate 10 "short"}}`, "short"},
		{`[{{truncate 0 "x"}}]`, "[]"},
		{`{{json "a \"q\" <b>\n"}}`, `"a \"q\" <b>\n"`},
		{`{{json 3}}`, `3`},
		{`{{json .ToolResults}}`, `["a\nb\n","c"]`},
		{`{{lines ""}} {{lines "a"}} {{lines "a\n"}} {{lines "a\nb"}} {{lines "a\n\nb\n"}}`, "0 1 1 2 3"},
		{`{{lines (index .ToolResults 0)}}`, "2"},
		{`{{add .Turn 10}}`, "13"},
		{`{{grep "^a" "ab\ncd\nax"}}`, "ab\nax\n"},
		{`[{{grep "z" "a\nb\n"}}]`, "[]"},
		{`{{find "i-[0-9a-f]+" "subagent i-0a1b (x): asking"}}|{{find "z" "a"}}|`, "i-0a1b||"},
		{`{{lines (grep "^[^\\[]" "x.go\ny/\n[3 more paths not shown]\n")}}`, "2"},
		{`{{hasPrefix "no paths" "no paths match *"}} {{hasPrefix "no" "yes"}} {{.Result "glob" | hasPrefix "a\n"}}`, "true false true"},
		{`{{len (lorem 42)}}`, "42"},
		{`{{.Turn}}|{{.Task}}|{{.LastUser}}|{{.Model}}|{{.I}}/{{.N}}`, "3|the task|next|m-1|0/0"},
		{`{{range $i, $r := .ToolResults}}[{{$i}}:{{$r}}]{{end}}`, "[0:a\nb\n][1:c]"},
		{`{{.Result "glob"}}|{{.Result "bash"}}|{{.Result "none"}}`, "a\nb\n|c|"},
		{`{{with .Task}}{{.}}{{end}}`, "the task"},
		{`{{$.Turn}}`, "3"},
		{`{{define "x"}}[{{.}}]{{end}}{{template "x" .Task}}`, "[the task]"},
	}
	req := &llm.Request{
		Model: "m-1",
		Messages: []llm.Message{
			llm.UserText("the task"),
			{Role: llm.Assistant, Content: []llm.Block{llm.ToolUse("t1", "bash", json.RawMessage(`{}`))}},
			{Role: llm.User, Content: []llm.Block{llm.ToolResult("t1", "old", false)}},
			{Role: llm.Assistant, Content: []llm.Block{
				llm.ToolUse("t2", "glob", json.RawMessage(`{}`)), llm.ToolUse("t3", "bash", json.RawMessage(`{}`))}},
			{Role: llm.User, Content: []llm.Block{
				llm.ToolResult("t2", "a\nb\n", false), llm.ToolResult("t3", "c", false), llm.Text("next")}},
		},
	}
	for _, c := range cases {
		s, err := ParseScenario([]byte("default:\n  text: "+yamlQuote(c.tmpl)+"\n"), "t.yaml")
		if err != nil {
			t.Errorf("%s: %v", c.tmpl, err)
			continue
		}
		if got := onlyText(t, s.Respond(req, RequestInfo{N: 1})); got != c.want {
			t.Errorf("%s = %q, want %q", c.tmpl, got, c.want)
		}
	}
}

// yamlQuote writes s as a YAML double-quoted scalar.
func yamlQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestTemplateRepeat(t *testing.T) {
	t.Parallel()
	s, err := LoadScenario("testdata/scenarios/spawn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	req := atTurn("Summarize every chapter of the book", 1)
	req.Tools = tools("spawn_subagent")
	r := s.Respond(req, RequestInfo{N: 1})
	if len(r.Content) != 6 || r.StopReason != "" { // unpinned: decided when played
		t.Fatalf("%+v", r)
	}
	for i, b := range r.Content[1:] {
		var in struct{ Task string }
		if err := json.Unmarshal(b.Input, &in); err != nil {
			t.Fatal(err)
		}
		want := "part " + string(rune('1'+i)) + " of 5: Summarize every chap"
		if in.Task != want {
			t.Errorf("call %d: %q, want %q", i, in.Task, want)
		}
	}
	// Each child answers with a 3000-character report.
	child := atTurn(`part 2 of 5: Summarize every chap`, 1)
	if got := onlyText(t, s.Respond(child, RequestInfo{N: 2})); utf8.RuneCountInString(got) != 3000 {
		t.Errorf("child report has %d characters", utf8.RuneCountInString(got))
	}
}

func TestTemplateStaticIsPrerendered(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
rules:
  - text: "plain text, {not a template}"
    tool_calls:
      - name: a
        input: {x: "static", y: [1, 2]}
      - name: b
        input: {x: "turn {{.Turn}}"}
`)
	r := s.rules[0].reply
	if !r.text.isStatic() || r.calls[0].input.static == nil || r.calls[1].input.static != nil {
		t.Fatalf("static parts were not precompiled: %+v", r)
	}
	// Two replies share the static input bytes, capped so an append by a
	// caller copies.
	a := s.Respond(atTurn("x", 1), RequestInfo{N: 1})
	b := s.Respond(atTurn("x", 1), RequestInfo{N: 2})
	if &a.Content[1].Input[0] != &b.Content[1].Input[0] || cap(a.Content[1].Input) != len(a.Content[1].Input) {
		t.Error("static input not shared")
	}
	if string(b.Content[2].Input) != `{"x":"turn 1"}` {
		t.Errorf("templated input %s", b.Content[2].Input)
	}
}

func TestTemplateExecErrorIsVisible(t *testing.T) {
	t.Parallel()
	// index out of range cannot be caught at load; it must show, not panic.
	s := mustParse(t, "default:\n  text: \"{{index .ToolResults 3}}\"\n")
	got := onlyText(t, s.Respond(atTurn("x", 1), RequestInfo{N: 1}))
	if !strings.Contains(got, "template error at t.yaml:2") || !strings.Contains(got, "index") {
		t.Errorf("%q", got)
	}
	// So does a bad regexp given to grep.
	s = mustParse(t, "default:\n  text: '{{grep \"(\" .Task}}'\n")
	got = onlyText(t, s.Respond(atTurn("x", 1), RequestInfo{N: 1}))
	if !strings.Contains(got, "template error at t.yaml:2") || !strings.Contains(got, "grep: error parsing regexp") {
		t.Errorf("%q", got)
	}
	// Output is bounded.
	s = mustParse(t, "default:\n  text: \"{{range 3}}{{lorem 4000000}}{{end}}\"\n")
	got = onlyText(t, s.Respond(atTurn("x", 1), RequestInfo{N: 1}))
	if !strings.Contains(got, "output longer than") {
		t.Errorf("%.100q", got)
	}
	// A template rendering nothing yields no text block.
	s = mustParse(t, "default:\n  text: \"{{if .ToolResults}}results{{end}}\"\n  tool_calls: [{name: a}]\n")
	r := s.Respond(atTurn("x", 1), RequestInfo{N: 1})
	if len(r.Content) != 1 || r.Content[0].Type != llm.TypeToolUse || string(r.Content[0].Input) != "{}" {
		t.Errorf("%+v", r.Content)
	}
}
