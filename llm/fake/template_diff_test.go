package fake

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"text/template"
	"text/template/parse"

	"github.com/deputy-run/deputy/llm"
)

// The evaluator (template_eval.go) is checked against text/template, which
// the fake used before and whose semantics it keeps: the same template over
// the same data must render the same text, or fail in both. Tests may link
// text/template; the binary must not.

// callFunc calls one of the fake's template functions through its table.
func callFunc(name string, args ...any) (any, error) { return templateFuncs[name].call(nil, args) }

func as[T any](v any, err error) (T, error) {
	t, _ := v.(T)
	return t, err
}

// stdFuncs are the fake's functions for text/template, with the Go
// signatures they are documented with: text/template converts and checks
// arguments by those types, the evaluator by its argKinds, so a mismatch
// between the two shows as a difference.
var stdFuncs = template.FuncMap{
	"lorem":     func(n int) (string, error) { return as[string](callFunc("lorem", n)) },
	"truncate":  func(n int, s string) (string, error) { return as[string](callFunc("truncate", n, s)) },
	"json":      func(v any) (string, error) { return as[string](callFunc("json", v)) },
	"lines":     func(s string) (int, error) { return as[int](callFunc("lines", s)) },
	"grep":      func(re, s string) (string, error) { return as[string](callFunc("grep", re, s)) },
	"find":      func(re, s string) (string, error) { return as[string](callFunc("find", re, s)) },
	"hasPrefix": func(p, s string) (bool, error) { return as[bool](callFunc("hasPrefix", p, s)) },
	"add":       func(a, b int) (int, error) { return as[int](callFunc("add", a, b)) },
}

// diffOutcome is what one comparison saw, for the random tests' statistics.
type diffOutcome int

const (
	refusedByBoth diffOutcome = iota
	refusedByCheck
	failedInBoth
	renderedSame
)

// diffRender loads src both ways, renders it over d both ways and fails t
// on any difference: in what parses, in whether rendering fails, in the
// text rendered.
func diffRender(t testing.TB, src string, d *TemplateData) diffOutcome {
	t.Helper()
	ours, ourErr := newTmpl(src, "text", "t.yaml:1")
	std, stdErr := template.New("text").Funcs(stdFuncs).Option("missingkey=error").Parse(src)
	switch {
	case stdErr != nil && ourErr == nil:
		t.Fatalf("%q: text/template refuses it (%v), the fake does not", src, stdErr)
	case stdErr != nil:
		if want := templateErr(stdErr).Error(); ourErr.Error() != want {
			t.Fatalf("%q: parse error %q, text/template's %q", src, ourErr, want)
		}
		return refusedByBoth
	case ourErr != nil:
		// The load check refuses what text/template would accept only for
		// these two reasons.
		if !strings.Contains(ourErr.Error(), "unknown field .") && !strings.Contains(ourErr.Error(), "is not supported in scenario templates") {
			t.Fatalf("%q: refused (%v), text/template accepts it", src, ourErr)
		}
		return refusedByCheck
	}
	return diffExec(t, src, ours, std, d)
}

// diffExec renders ours and std over d and fails t if they differ.
func diffExec(t testing.TB, src string, ours *tmpl, std *template.Template, d *TemplateData) diffOutcome {
	t.Helper()
	var ob, sb limitedBuilder
	sErr := std.Execute(&sb, d)
	var oErr error
	if ours.isStatic() {
		ob.WriteString(ours.static)
	} else {
		oErr = ours.execute(&ob, ours.name, d)
	}
	switch {
	case (oErr == nil) != (sErr == nil):
		t.Fatalf("%q over %+v:\n  fake:          %q, error %v\n  text/template: %q, error %v", src, *d, ob.String(), oErr, sb.String(), sErr)
	case oErr != nil:
		return failedInBoth
	case ob.String() != sb.String():
		t.Fatalf("%q over %+v:\n  fake:          %q\n  text/template: %q", src, *d, ob.String(), sb.String())
	}
	return renderedSame
}

// diffData is TemplateData with a conversation behind .Result: glob
// answered "a\nb\n", bash "c".
func diffData() *TemplateData {
	req := &llm.Request{Model: "m-1", Messages: []llm.Message{
		llm.UserText("the task"),
		{Role: llm.Assistant, Content: []llm.Block{
			llm.ToolUse("t1", "glob", json.RawMessage(`{}`)), llm.ToolUse("t2", "bash", json.RawMessage(`{}`))}},
		{Role: llm.User, Content: []llm.Block{llm.ToolResult("t1", "a\nb\n", false), llm.ToolResult("t2", "c", false)}},
	}}
	return &TemplateData{Turn: 2, Task: "the task", LastUser: "next", ToolResults: []string{"a\nb\n", "c"}, I: 1, N: 3, Model: "m-1", req: req}
}

// TestTemplateMatchesTextTemplate compares edge cases of the language,
// written out, and the templates of the scenarios shipped and tested.
func TestTemplateMatchesTextTemplate(t *testing.T) {
	t.Parallel()
	cases := []string{
		// output of every kind of value
		`{{.}}|{{$}}|{{.ToolResults}}|{{1.5}}|{{1e2}}|{{2i}}|{{'a'}}|{{0x1F}}|{{true}}|{{index .Task 1}}|{{"%"}}`,
		`{{printf "%v %d %s %q %T" . 3 "x" .Task $}}|{{printf "%d"}}|{{printf "%v" nil}}`,
		`{{0x1E}}|{{0xe}}|{{'e'}}|{{'E'}}|{{1E1}}|{{0x1p-2}}|{{1_000}}|{{0o17}}|{{0b101}}|{{-0}}|{{+3}}|{{printf "%T %T %T" 0x1E 'e' 1E1}}`,
		`{{print 1}}`, `{{html "<"}}`, `{{slice .Task 1}}`, `{{call .Turn}}`, // refused here
		// fields and methods
		`{{.Result "glob"}}|{{"bash" | .Result}}|{{$.Result "none"}}|{{(.Result "bash")}}`,
		`{{.Result}}`, `{{.Result "a" "b"}}`, `{{.Result 3}}`, `{{.Result .Turn}}`, `{{.Turn 3}}`, `{{1 | .Turn}}`,
		`{{.Task.X}}`, `{{(.Result "glob").X}}`, `{{with $}}{{.req}}{{end}}`, `{{with $}}{{.Nope}}{{end}}`,
		`{{define "x"}}{{.Turn}}{{end}}{{template "x"}}`, `{{define "x"}}[{{.}}|{{$}}]{{end}}{{template "x"}}{{template "x" 3}}`,
		`{{.Tsak}}`, `{{$.Tsak}}`, `{{lorem.X}}`, `{{(lorem 3).X}}`,
		// functions and arguments
		`{{lorem 3.0}}|{{lorem 1e1}}|{{lorem 0x3}}|{{lorem 'a' | len}}`, `{{lorem 1.5}}`, `{{lorem "3"}}`, `{{lorem nil}}`,
		`{{lorem -1}}`, `{{lorem}}`, `{{lorem 1 2}}`, `{{3 | lorem}}`, `{{"3" | lorem}}`, `{{lorem .Turn}}`, `{{lorem .Task}}`,
		`{{truncate 2 .Task}}|{{.Task | truncate 3}}|{{truncate .I "abc"}}`, `{{json .}}`, `{{json nil}}|{{json .I}}|{{json 1.5}}|{{json true}}`,
		`{{lines}}`, `{{add 1 2 | add 3}}`, `{{add 1}}`, `{{9223372036854775807 | add 1}}`, `{{99999999999999999999}}`,
		`{{grep "(" "x"}}`, `{{find "[" "x"}}`, `{{hasPrefix "t" .Task}}|{{hasPrefix "x"}}`, `{{nil}}`, `{{"a" "b"}}`, `{{(1) 2}}`,
		`{{. 1}}`, `{{$ 1}}`, `{{1 | 2}}`, `{{1 | (2)}}`, `{{1 | "x"}}`, `{{true | not}}`, `{{nil | not}}`,
		// builtins
		`{{len .Task}}|{{len .ToolResults}}|{{len "héllo"}}`, `{{len .}}`, `{{len 3}}`, `{{len nil}}`, `{{define "x"}}{{len .}}{{end}}{{template "x"}}`,
		`{{index .ToolResults 1}}|{{index .ToolResults 0 1}}|{{index .ToolResults}}|{{index .Task (index .Task 1)}}`,
		`{{index .ToolResults 2}}`, `{{index .ToolResults -1}}`, `{{index .ToolResults 1.0}}`, `{{index .ToolResults nil}}`,
		`{{index .ToolResults "0"}}`, `{{index . 0}}`, `{{index nil 0}}`, `{{index 3 0}}`, `{{index .Task 8}}`, `{{index .Task 7}}`,
		`{{and 1 0 2}}|{{and 1 2}}|{{or 0 "" 3}}|{{or 0 ""}}|{{and nil 1}}|{{or nil}}|{{0 | or 1}}|{{1 | and 0}}|{{1 | and 2}}`,
		`{{and}}`, `{{or 1 (index .ToolResults 9)}}`, `{{and 0 (index .ToolResults 9)}}`, `{{and 1 (index .ToolResults 9)}}`,
		`{{not 0}}|{{not .}}|{{not .ToolResults}}|{{not ""}}|{{not 1.5}}|{{not 0i}}`, `{{not}}`, `{{not 1 2}}`,
		// comparisons
		`{{eq 1 1}}|{{eq 1 2 1}}|{{eq "a" "a"}}|{{eq 1.5 1.5}}|{{eq true false}}|{{eq 1i 1i}}|{{eq (index .Task 0) 116}}|{{eq 116 (index .Task 0)}}`,
		`{{eq 1.5 2.5}}|{{eq 1i 2i}}|{{eq "a" "b"}}|{{eq true true}}|{{eq 'a' 97}}|{{eq 1 2 3}}`,
		`{{eq 1}}`, `{{eq 1 "a"}}`, `{{eq 1 1.0}}`, `{{eq 1 1.5}}`, `{{eq . .}}|{{eq $ .}}`, `{{eq .ToolResults .ToolResults}}`,
		`{{eq . .ToolResults}}`, `{{eq . 1}}`, `{{eq nil nil}}|{{eq nil 1}}|{{eq 1 nil}}`, `{{eq nil .}}`, `{{eq .ToolResults nil}}`,
		`{{define "x"}}{{eq . nil}}|{{eq . 1}}|{{eq . .}}{{end}}{{template "x"}}`, `{{eq -1 (index .Task 0)}}`,
		`{{ne 1 2}}|{{ne "a" "a"}}|{{ne 1}}`, `{{ne 1 "a"}}`,
		`{{lt 1 2}}|{{lt 2 1}}|{{lt "a" "b"}}|{{lt 1.5 2.5}}|{{lt (index .Task 0) 200}}|{{lt -1 (index .Task 0)}}|{{lt (index .Task 0) -1}}`,
		`{{lt true false}}`, `{{lt 1i 2i}}`, `{{lt 1 "a"}}`, `{{lt . 1}}`, `{{lt nil 1}}`, `{{lt 1 1.5}}`,
		`{{le 1 1}}|{{le 2 1}}|{{gt 2 1}}|{{gt 1 1}}|{{ge 1 1}}|{{ge 0 1}}`, `{{gt . 1}}`, `{{ge "a" 1}}`, `{{le 1}}`,
		// control structures and variables
		`{{if .ToolResults}}y{{else}}n{{end}}|{{if 0}}y{{else if ""}}e{{else if 1.5}}f{{end}}|{{with .Task}}{{.}}{{else with 3}}{{.}}{{end}}`,
		`{{with 0}}y{{else with ""}}e{{else}}{{.Turn}}{{end}}|{{with $x := .Task}}{{$x}}{{.}}{{end}}|{{if $y := 1}}{{$y}}{{end}}`,
		`{{range .ToolResults}}[{{.}}]{{end}}|{{range $i, $r := .ToolResults}}{{$i}}={{$r}};{{end}}|{{range $r := .ToolResults}}{{$r}}{{end}}`,
		`{{range 3}}{{.}}{{end}}|{{range $i := 3}}{{$i}}{{end}}|{{range 0}}x{{else}}none{{end}}|{{range -2}}x{{else}}neg{{end}}`,
		`{{range (index .Task 0)}}{{end}}|{{range $i := (index .Task 1)}}{{if eq $i 3}}{{$i}}{{break}}{{end}}{{end}}`,
		`{{range $i, $e := 3}}{{end}}`, `{{range .Task}}{{end}}`, `{{range .}}{{end}}`, `{{range 1.5}}{{end}}`, `{{range true}}{{end}}`,
		`{{range nil}}x{{else}}nil{{end}}`, `{{define "x"}}{{range .}}x{{else}}none{{end}}{{end}}{{template "x"}}`,
		`{{$v := 0}}{{range $v = .ToolResults}}{{end}}{{$v}}|{{$w := 0}}{{range $w = 2}}{{end}}{{$w}}`,
		`{{$i := 7}}{{$e := 8}}{{range $i, $e = .ToolResults}}{{end}}{{$i}}{{$e}}|{{$z := 5}}{{range $z = .Missing}}{{end}}`,
		`{{$a := 0}}{{range $i, $a = 2}}{{end}}`, `{{$v := 1}}{{range $v = nil}}{{end}}{{$v}}`,
		`{{range $i := 5}}{{if eq $i 1}}{{continue}}{{end}}{{if eq $i 3}}{{break}}{{end}}{{$i}}{{end}}`,
		`{{range 2}}{{range 3}}{{if eq . 1}}{{break}}{{end}}{{.}}{{end}};{{end}}`,
		`{{range 2}}a{{range 0}}{{else}}{{break}}{{end}}b{{end}}`, `{{range 2}}a{{range 0}}{{else}}{{continue}}{{end}}b{{end}}`,
		`{{$x := 1}}{{$x = 2}}{{$x}}{{if true}}{{$x = 3}}{{$y := 4}}{{end}}{{$x}}`, `{{$x = 1}}`, `{{$x := 1}}{{$x 2}}`,
		`{{if true}}{{$x := 1}}{{else}}{{$x}}{{end}}`, `{{if false}}{{$x := 1}}{{else}}{{$x}}{{end}}`,
		`{{$x := .Task}}{{$x.Y}}`, `{{$x := $}}{{$x.Turn}}{{$x.Result "glob"}}`, `{{$}}{{$.ToolResults}}`,
		`{{range .ToolResults}}{{$.Turn}}{{end}}`, `{{template "nope"}}`, `{{template "x" $v := 3}}{{$v}}{{define "x"}}{{.}}{{end}}`,
		`{{define "c"}}{{if lt . 5}}{{.}}{{template "c" (add . 1)}}{{end}}{{end}}{{template "c" 0}}`,
		`{{define "r"}}{{template "r"}}{{end}}{{template "r"}}`,
		`{{block "b" .Task}}[{{.}}]{{end}}|{{template "b" 1}}`,
		`{{define "text"}}replaced{{end}}`, `{{define "text"}}replaced{{end}} `,
		// text, trimming and comments
		"a {{- 1 -}} b {{/* comment */}} c {{- /* trimmed */ -}} d\n", `{{"{{"}}`, "{{`raw\\n`}}", `{{"a\tb\u00e9"}}`,
		// the output limit
		`{{range 3}}{{lorem 2000000}}{{end}}`, `{{lorem 4194304}}{{lorem 4194304}}`, `{{range 2}}{{printf "%v" (lorem 3000000)}}{{end}}`,
		// parse errors, as the parser says
		`{{`, `{{if}}`, `{{end}}`, `{{range}}{{end}}`, `{{break}}`, `{{.Task | }}`, `{{$undeclared}}`, `{{shout 1}}`, `{{else}}`,
	}
	for _, d := range []*TemplateData{diffData(), {}} {
		for _, src := range cases {
			diffRender(t, src, d)
		}
	}
}

// TestShippedTemplatesMatchTextTemplate renders every template of the
// built-in and test scenarios with both, over a few requests.
func TestShippedTemplatesMatchTextTemplate(t *testing.T) {
	t.Parallel()
	var all []*tmpl
	for _, s := range []*Scenario{DemoScenario(), mustLoad(t, "testdata/scenarios/full.yaml"), mustLoad(t, "testdata/scenarios/spawn.yaml")} {
		replies := []*reply{s.def}
		for _, r := range s.rules {
			replies = append(replies, &r.reply)
		}
		for _, r := range replies {
			if r == nil {
				continue
			}
			all = append(all, r.text, r.thinking)
			for _, c := range r.calls {
				all = append(all, c.raw)
				for _, p := range c.input.parts {
					all = append(all, p.t)
				}
			}
		}
	}
	datas := []*TemplateData{diffData(), {}, {Turn: 3, ToolResults: []string{"no paths match *"}}, {ToolResults: []string{"x.go\n[3 more paths not shown]\n"}}}
	n := 0
	for _, tt := range all {
		if tt == nil || tt.isStatic() {
			continue
		}
		n++
		std := template.New(tt.name).Funcs(stdFuncs).Option("missingkey=error")
		for name, tree := range tt.trees {
			if _, err := std.AddParseTree(name, tree); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range datas {
			diffExec(t, tt.trees[tt.name].Root.String(), tt, std.Lookup(tt.name), d)
		}
	}
	if n < 10 {
		t.Fatalf("only %d templates in the shipped scenarios", n)
	}
}

func mustLoad(t *testing.T, path string) *Scenario {
	s, err := LoadScenario(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTemplateRandomMatchesTextTemplate renders random templates of the
// supported language (tmplGen) over random data with both evaluators.
func TestTemplateRandomMatchesTextTemplate(t *testing.T) {
	t.Parallel()
	n := 3000
	if testing.Short() {
		n = 300
	}
	rng := rand.New(rand.NewPCG(18, 2026))
	var seen [renderedSame + 1]int
	for range n {
		prog := make([]byte, 8+rng.IntN(256)) // short templates and long ones
		for i := range prog {
			prog[i] = byte(rng.Uint32())
		}
		src, d := genTemplate(prog)
		seen[diffRender(t, src, d)]++
	}
	// The generator is of use only if most of what it writes parses and
	// much of it renders.
	report := t.Logf
	if seen[refusedByBoth]+seen[refusedByCheck] > n/5 || seen[renderedSame] < n/4 {
		report = t.Errorf
	}
	report("of %d random templates: %d refused, %d refused by the check, %d failed in both, %d rendered the same",
		n, seen[refusedByBoth], seen[refusedByCheck], seen[failedInBoth], seen[renderedSame])
}

// FuzzTemplateMatchesTextTemplate renders templates generated from the fuzz
// input (tmplGen) with both evaluators.
func FuzzTemplateMatchesTextTemplate(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("a template of the supported language, written from these bytes"))
	f.Add([]byte{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5})
	f.Fuzz(func(t *testing.T, prog []byte) {
		src, d := genTemplate(prog)
		diffRender(t, src, d)
	})
}

// FuzzTemplateSourceMatchesTextTemplate compares the two on template text
// the fuzzer writes itself, which reaches corners of the syntax the
// generator does not. Templates that could run for long (large numbers,
// deep ranges, template calls, which may recurse) are skipped.
func FuzzTemplateSourceMatchesTextTemplate(f *testing.F) {
	for _, s := range []string{
		`{{range $i, $r := .ToolResults}}[{{$i}}:{{$r}}]{{end}}`,
		`{{if or (hasPrefix "no " .Task) (eq (len .ToolResults) 0)}}none{{else}}{{index .ToolResults 0}}{{end}}`,
		`{{with $x := .Result "glob"}}{{lines (grep "^a" $x)}}{{else}}-{{end}}`,
		`{{printf "%q" (truncate 3 .Task)}} {{json .ToolResults}} {{add .I .N}} {{find "[a-z]+" .LastUser}}`,
		`{{$n := 0}}{{range 3}}{{$n = add $n .}}{{end}}{{$n}} {{lt .Turn 3}} {{ne .Model "m"}} {{not .I}}`,
	} {
		f.Add(s)
	}
	d := diffData()
	f.Fuzz(func(t *testing.T, src string) {
		if tr, err := parse.Parse("text", src, "", "", parseFuncs); err == nil && !quick(tr["text"].Root, 0) {
			return
		}
		diffRender(t, src, d)
	})
}

// quick reports whether the tree renders quickly whatever it computes:
// small numbers, ranges nested two deep at most, no template calls.
func quick(n parse.Node, ranges int) bool {
	switch n := n.(type) {
	case *parse.NumberNode:
		return (!n.IsInt || n.Int64 >= -100 && n.Int64 <= 100) && (!n.IsFloat || n.Float64 >= -100 && n.Float64 <= 100)
	case *parse.TemplateNode:
		return false
	case *parse.RangeNode:
		return ranges < 2 && quick(n.Pipe, ranges) && quick(n.List, ranges+1) && quick(n.ElseList, ranges)
	case *parse.IfNode:
		return quick(n.Pipe, ranges) && quick(n.List, ranges) && quick(n.ElseList, ranges)
	case *parse.WithNode:
		return quick(n.Pipe, ranges) && quick(n.List, ranges) && quick(n.ElseList, ranges)
	case *parse.ListNode:
		if n == nil {
			return true
		}
		for _, m := range n.Nodes {
			if !quick(m, ranges) {
				return false
			}
		}
	case *parse.ActionNode:
		return quick(n.Pipe, ranges)
	case *parse.PipeNode:
		if n == nil {
			return true
		}
		for _, m := range n.Cmds {
			if !quick(m, ranges) {
				return false
			}
		}
	case *parse.CommandNode:
		for _, m := range n.Args {
			if !quick(m, ranges) {
				return false
			}
		}
	case *parse.ChainNode:
		return quick(n.Node, ranges)
	}
	return true
}

// tmplGen writes a random template of the language scenarios use, its
// choices read from a byte string (0 once it runs out, and choice 0 always
// ends soonest, so every input gives a finite template). Variables are
// declared before use, break and continue are inside range, ranges are
// nested two deep at most and only in the main template, and {{define}}d
// templates call only those defined before them: templates that render
// quickly, whatever they compute.
type tmplGen struct {
	prog   []byte
	b      strings.Builder
	scopes [][]string // the variables declared, innermost scope last
	ranges int        // ranges open around what is being written
	inDef  bool
	defs   int // templates defined: t0, t1, ...
	depth  int // of nested pipelines
	vars   int // variables declared so far, for fresh names
}

func (g *tmplGen) pick(n int) int {
	if len(g.prog) == 0 {
		return 0
	}
	c := g.prog[0]
	g.prog = g.prog[1:]
	return int(c) % n
}

func (g *tmplGen) one(choices ...string) string { return choices[g.pick(len(choices))] }

func (g *tmplGen) w(s ...string) {
	for _, x := range s {
		g.b.WriteString(x)
	}
}

var (
	genTasks   = []string{"", "the task", "a\nb\n", "héllo wörld", "%d %s", "no paths match *", "i-0a1b"}
	genResults = [][]string{nil, {}, {"a\nb\n"}, {"x", "", "c\n"}, {"é"}}
	genFuncs   = sortedNames(templateFuncs)
)

func sortedNames[V any](m map[string]V) []string { return strings.Split(sortedKeys(m, ""), ", ") }

// genTemplate is the template and the data prog describes.
func genTemplate(prog []byte) (string, *TemplateData) {
	g := &tmplGen{prog: prog}
	d := diffData()
	d.Turn = g.pick(5) - 1
	d.Task = genTasks[g.pick(len(genTasks))]
	d.LastUser = genTasks[g.pick(len(genTasks))]
	d.ToolResults = genResults[g.pick(len(genResults))]
	d.I, d.N = g.pick(3), g.pick(3)
	d.Model = g.one("m-1", "")
	if g.pick(4) == 0 {
		d.req = nil
	}
	for range g.pick(3) {
		g.inDef = true
		g.w(`{{define "t`, fmt.Sprint(g.defs), `"}}`)
		g.scopes = [][]string{{"$"}}
		g.list()
		g.w(`{{end}}`)
		g.defs++
	}
	g.inDef = false
	g.scopes = [][]string{{"$"}}
	g.list()
	if g.b.Len() == 0 || g.pick(2) == 0 {
		g.action() // most templates have at least one action
	}
	return g.b.String(), d
}

func (g *tmplGen) list() {
	g.scopes = append(g.scopes, nil)
	for range g.pick(4) {
		g.item()
	}
	g.scopes = g.scopes[:len(g.scopes)-1]
}

func (g *tmplGen) item() {
	if g.depth > 2 || len(g.scopes) > 6 {
		g.action()
		return
	}
	switch g.pick(11) {
	case 0:
		g.w(g.one("x", "", " ", "\n", "a b", "%"))
	case 1, 2:
		g.action()
	case 3:
		g.branch("if", false)
	case 4:
		g.branch("with", false)
	case 5:
		if g.inDef || g.ranges == 2 {
			g.action()
			return
		}
		g.branch("range", true)
	case 6:
		if g.defs == 0 {
			g.w("y")
			return
		}
		g.w(`{{template "t`, fmt.Sprint(g.pick(g.defs)), `"`)
		if g.pick(3) > 0 {
			g.w(" ")
			g.pipeline()
		}
		g.w("}}")
	case 7:
		if g.ranges > 0 {
			g.w(g.one("{{break}}", "{{continue}}"))
		}
	case 8:
		g.w(g.one("{{/* c */}}", "{{- /* c */ -}}"))
	case 9:
		g.w("{{")
		declare := g.decl(false)
		g.pipeline()
		declare()
		g.w("}}")
	case 10:
		g.w(g.one("{{-", "{{"), " ")
		g.pipeline()
		g.w(" ", g.one("-}}", "}}"))
	}
}

func (g *tmplGen) action() {
	g.w("{{")
	g.pipeline()
	g.w("}}")
}

// branch writes an if, with or range, with else and else-if chains.
func (g *tmplGen) branch(kw string, isRange bool) {
	g.scopes = append(g.scopes, nil)
	g.w("{{", kw, " ")
	declare := g.decl(isRange)
	g.pipeline()
	declare()
	g.w("}}")
	if isRange {
		g.ranges++
	}
	g.list()
	if isRange {
		g.ranges--
	}
	for !isRange && g.pick(3) == 1 {
		g.w("{{else ", kw, " ")
		g.pipeline()
		g.w("}}")
		g.list()
	}
	if g.pick(3) == 1 {
		g.w("{{else}}")
		g.list()
	}
	g.w("{{end}}")
	g.scopes = g.scopes[:len(g.scopes)-1]
}

// decl may write a declaration or an assignment before a pipeline; in a
// range, of one or two variables. Calling the function it returns, after
// the pipeline, puts the declared variables in scope.
func (g *tmplGen) decl(isRange bool) (declare func()) {
	switch g.pick(5) {
	case 1, 2:
		names := []string{g.fresh()}
		if isRange && g.pick(2) == 0 {
			names = append(names, g.fresh())
		}
		g.w(strings.Join(names, ", "), " := ")
		top := len(g.scopes) - 1
		return func() { g.scopes[top] = append(g.scopes[top], names...) }
	case 3:
		g.w(g.variable(), " = ")
	}
	return func() {}
}

func (g *tmplGen) fresh() string {
	g.vars++
	return fmt.Sprintf("$v%d", g.vars)
}

// variable is one declared in scope, $ included.
func (g *tmplGen) variable() string {
	var all []string
	for _, s := range g.scopes {
		all = append(all, s...)
	}
	return all[g.pick(len(all))]
}

func (g *tmplGen) pipeline() {
	g.depth++
	defer func() { g.depth-- }()
	g.command(false)
	for g.pick(4) == 3 {
		g.w(" | ")
		g.command(true)
	}
}

// command writes one command; piped says the previous command's value is
// its last argument.
func (g *tmplGen) command(piped bool) {
	c := g.pick(8)
	if piped && c < 4 {
		c += 4 // something that takes an argument, mostly
	}
	switch c {
	case 0, 1, 2, 3:
		g.operand(argAny)
	case 4, 5, 6:
		g.call(piped)
	case 7:
		g.w(g.one(".Result", "$.Result"))
		if !piped {
			g.w(" ")
			g.operand(argString)
		}
	}
}

// call writes a call of a random function: mostly with as many arguments
// as it takes, of the kinds it takes.
func (g *tmplGen) call(piped bool) {
	name := genFuncs[g.pick(len(genFuncs))]
	f := templateFuncs[name]
	g.w(name)
	n := len(f.params)
	if f.variadic {
		n += g.pick(3) - 1
	}
	if piped {
		n--
	}
	if g.pick(5) == 0 {
		n = g.pick(4)
	}
	for i := range n {
		g.w(" ")
		g.operand(f.params[min(i, len(f.params)-1)])
	}
}

// operand writes an argument, mostly of kind k.
func (g *tmplGen) operand(k argKind) {
	if g.depth > 3 {
		g.literal(k)
		return
	}
	if g.pick(4) == 0 {
		k = argKind(g.pick(3))
	}
	switch k {
	case argInt:
		switch g.pick(4) {
		case 0:
			g.literal(argInt)
		case 1:
			g.w(g.one(".Turn", ".I", ".N", "$.N"))
		default:
			g.nested(g.one("len", "add", "lines"))
		}
	case argString:
		switch g.pick(4) {
		case 0:
			g.literal(argString)
		case 1:
			g.w(g.one(".Task", ".LastUser", ".Model", "$.Task", `(.Result "glob")`, `(.Result "bash")`, `(.Result "none")`))
		default:
			g.nested(g.one("index", "truncate", "lorem", "printf", "json", "grep", "find"))
		}
	default:
		g.anyOperand()
	}
}

// nested writes a parenthesized call of the function name.
func (g *tmplGen) nested(name string) {
	g.depth++
	defer func() { g.depth-- }()
	f := templateFuncs[name]
	g.w("(", name)
	if name == "index" {
		g.w(" ", g.one(".ToolResults", ".Task", "$.ToolResults", "."))
		g.w(" ", g.one("0", "1", "2", "-1", ".I"))
	} else {
		for _, k := range f.params {
			g.w(" ")
			g.operand(k)
		}
	}
	g.w(")")
}

func (g *tmplGen) literal(k argKind) {
	if k == argAny {
		k = argKind(g.pick(3))
	}
	switch k {
	case argInt:
		g.w(g.one("0", "1", "2", "3", "-1", "10", "'a'", "0x10", "1e1", "1.5", "1i", "3.0", "-0", "true", "nil"))
	default:
		g.w(g.one(`"glob"`, `""`, `"a"`, `"%d"`, `"^a"`, `"("`, `"x\ny"`, `"héllo"`, "`b`", `"bash"`, `"t"`))
	}
}

// anyOperand writes an argument of any kind; the choices that mostly
// fail (a function without its arguments, a field of something that has
// none) come up less often.
func (g *tmplGen) anyOperand() {
	switch g.pick(16) {
	case 0, 1:
		g.literal(argAny)
	case 2, 3:
		g.w(g.one(".Turn", ".Task", ".LastUser", ".ToolResults", ".I", ".N", ".Model", "$.Turn", "$.ToolResults", ".Task.X"))
	case 4:
		g.w(".")
	case 5, 6:
		g.w(g.variable())
	case 7, 8:
		g.w("(")
		g.pipeline()
		g.w(")")
	case 9:
		g.w(g.one("true", "false", "nil"))
	case 10:
		g.w(genFuncs[g.pick(len(genFuncs))])
	case 11:
		g.w("(")
		g.pipeline()
		g.w(").", g.one("Turn", "Task", "X"))
	case 12, 13:
		g.operand(argString)
	case 14:
		g.operand(argInt)
	case 15:
		if v := g.variable(); v != "$" {
			g.w(v, ".", g.one("Turn", "Task", "ToolResults", "X"))
		} else {
			g.w("$.", g.one("Turn", "Task", "ToolResults"))
		}
	}
}
