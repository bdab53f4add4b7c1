package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"text/template/parse"
	"unicode/utf8"

	"github.com/deputy-run/deputy/llm"
)

// TemplateData is what a scenario template sees: `{{.Task}}`,
// `{{.Result "glob"}}` and so on.
type TemplateData struct {
	// Turn is the number of assistant messages in the request, plus one.
	Turn int
	// Task is the text of the first user message.
	Task string
	// LastUser is the text of the last user message's text blocks.
	LastUser string
	// ToolResults are the contents of the last user message's tool results,
	// in order.
	ToolResults []string
	// I is the 1-based position of a tool call within its `repeat` (1..N);
	// N is the repeat count. Both are 1 for a tool call without repeat and 0
	// in text and thinking.
	I, N int
	// Model is the model name the request asked for.
	Model string

	req *llm.Request
}

// Result returns the content of the most recent tool result answering a
// call of the named tool anywhere in the conversation, or "" if there is
// none. It lets a late turn quote an early tool's output without depending
// on the order of results.
func (d *TemplateData) Result(name string) string {
	if d.req == nil {
		return ""
	}
	msgs := d.req.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		for j := len(msgs[i].Content) - 1; j >= 0; j-- {
			b := &msgs[i].Content[j]
			if b.Type != llm.TypeToolResult {
				continue
			}
			if toolNameOf(msgs[:i], b.ToolUseID) == name {
				return b.Text
			}
		}
	}
	return ""
}

// toolNameOf finds the name of the tool_use with id in msgs, searching from
// the end, where the call answered by a result normally is.
func toolNameOf(msgs []llm.Message, id string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		for j := range msgs[i].Content {
			b := &msgs[i].Content[j]
			if b.Type == llm.TypeToolUse && b.ID == id {
				return b.Name
			}
		}
	}
	return ""
}

// dataField is a name a template may use on TemplateData: a field (get)
// or a method (method).
type dataField struct {
	get    func(*TemplateData) any
	method *templateFunc
}

// templateFields are the names a template may use on its root data; a
// template naming anything else is refused at load time instead of failing
// on every request.
var templateFields = map[string]dataField{
	"Turn":        {get: func(d *TemplateData) any { return d.Turn }},
	"Task":        {get: func(d *TemplateData) any { return d.Task }},
	"LastUser":    {get: func(d *TemplateData) any { return d.LastUser }},
	"ToolResults": {get: func(d *TemplateData) any { return d.ToolResults }},
	"I":           {get: func(d *TemplateData) any { return d.I }},
	"N":           {get: func(d *TemplateData) any { return d.N }},
	"Model":       {get: func(d *TemplateData) any { return d.Model }},
	"Result": {method: &templateFunc{params: []argKind{argString}, call: func(d *TemplateData, a []any) (any, error) {
		return d.Result(a[0].(string)), nil
	}}},
}

// maxLorem bounds `lorem N` so a typo cannot make the fake allocate
// gigabytes; 4 MiB of filler is more than any context window holds.
const maxLorem = 4 << 20

// templateFuncs are the functions scenario templates may call: the fake's
// own and the builtins (template_builtins.go).
var templateFuncs = withBuiltins(map[string]*templateFunc{
	"lorem": {params: []argKind{argInt}, call: func(_ *TemplateData, a []any) (any, error) { return lorem(a[0].(int)) }},
	"truncate": {params: []argKind{argInt, argString}, call: func(_ *TemplateData, a []any) (any, error) {
		return truncate(a[0].(int), a[1].(string))
	}},
	"json":  {params: []argKind{argAny}, call: func(_ *TemplateData, a []any) (any, error) { return jsonString(a[0]) }},
	"lines": {params: []argKind{argString}, call: func(_ *TemplateData, a []any) (any, error) { return lines(a[0].(string)), nil }},
	"grep":  stringsFunc(grep),
	"find":  stringsFunc(find),
	"hasPrefix": {params: []argKind{argString, argString}, call: func(_ *TemplateData, a []any) (any, error) {
		return strings.HasPrefix(a[1].(string), a[0].(string)), nil
	}},
	"add": {params: []argKind{argInt, argInt}, call: func(_ *TemplateData, a []any) (any, error) {
		return a[0].(int) + a[1].(int), nil
	}},
})

func withBuiltins(m map[string]*templateFunc) map[string]*templateFunc {
	for name, f := range templateBuiltins {
		m[name] = f
	}
	return m
}

// stringsFunc is a template function of two strings returning a string.
func stringsFunc(f func(a, b string) (string, error)) *templateFunc {
	return &templateFunc{params: []argKind{argString, argString}, call: func(_ *TemplateData, a []any) (any, error) {
		return f(a[0].(string), a[1].(string))
	}}
}

// loremSentences is the filler prose `lorem` cycles through. It is ASCII,
// so its length in bytes is its length in characters.
const loremSentences = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor " +
	"incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation " +
	"ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit in " +
	"voluptate velit esse cillum dolore eu fugiat nulla pariatur. Excepteur sint occaecat cupidatat non " +
	"proident, sunt in culpa qui officia deserunt mollit anim id est laborum. "

// loremBase is a few kilobytes of filler, so most `lorem N` calls are a
// substring of it and allocate nothing.
var loremBase = strings.Repeat(loremSentences, 16)

// lorem returns exactly n characters of deterministic filler prose. A result
// never ends in a space (a period takes its place), so text trimmed
// downstream keeps its length.
func lorem(n int) (string, error) {
	if n < 0 || n > maxLorem {
		return "", fmt.Errorf("lorem %d: want 0..%d characters", n, maxLorem)
	}
	var s string
	if n <= len(loremBase) {
		s = loremBase[:n]
	} else {
		var b strings.Builder
		b.Grow(n)
		for b.Len()+len(loremBase) <= n {
			b.WriteString(loremBase)
		}
		b.WriteString(loremBase[:n-b.Len()])
		s = b.String()
	}
	if n > 0 && s[n-1] == ' ' {
		s = s[:n-1] + "."
	}
	return s, nil
}

// truncate returns s cut to at most n characters (runes), without an
// ellipsis, so lengths stay predictable.
func truncate(n int, s string) (string, error) {
	if n < 0 {
		return "", fmt.Errorf("truncate %d: negative length", n)
	}
	if len(s) <= n {
		return s, nil
	}
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i], nil
}

// jsonString encodes v as JSON (a string becomes a quoted JSON string), for
// templates that build JSON by hand. HTML characters are left alone.
func jsonString(v any) (string, error) {
	if s, ok := v.(string); ok {
		return string(appendJSONString(nil, s)), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// lines counts the lines of s: 0 for "", and a final newline does not start
// another line.
func lines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// find returns the first match of the regular expression re (RE2) in s,
// "" when there is none: `find "i-[0-9a-f]+" (index .ToolResults 0)`
// picks an id out of a tool result.
func find(re, s string) (string, error) {
	rx, err := regexp.Compile(re)
	if err != nil {
		return "", fmt.Errorf("find: %w", err)
	}
	return rx.FindString(s), nil
}

// grep returns the lines of s that match the regular expression re (RE2,
// unanchored), each ending in a newline, so `lines (grep re s)` counts them.
// The pattern is compiled on every call: it may come from request data, so
// caching it could grow without bound, and scenarios call grep rarely.
func grep(re, s string) (string, error) {
	rx, err := regexp.Compile(re)
	if err != nil {
		return "", fmt.Errorf("grep: %w", err)
	}
	var b strings.Builder
	for line := range strings.Lines(s) {
		if rx.MatchString(strings.TrimSuffix(line, "\n")) {
			b.WriteString(line)
			if !strings.HasSuffix(line, "\n") {
				b.WriteByte('\n')
			}
		}
	}
	return b.String(), nil
}

// tmpl is a string that may be a template. A string without "{{" is stored
// rendered and costs nothing per request.
type tmpl struct {
	static string
	// trees are the parsed template under name and those it {{define}}s;
	// nil when the string is static. They are only read, so renders may run
	// concurrently.
	trees map[string]*parse.Tree
	name  string
	where string // "file:line", for errors at execution
}

// parseFuncs tells the parser which function names exist: the ones
// templates may call and the builtins they may not, which nameCheck then
// refuses by name.
var parseFuncs = func() map[string]any {
	m := make(map[string]any, len(templateFuncs)+len(unsupportedBuiltins))
	for name, f := range templateFuncs {
		m[name] = f
	}
	for _, name := range unsupportedBuiltins {
		m[name] = true
	}
	return m
}()

// newTmpl parses s. name identifies the field in parse errors.
func newTmpl(s, name, where string) (*tmpl, error) {
	if !strings.Contains(s, "{{") {
		return &tmpl{static: s, where: where}, nil
	}
	trees, err := parse.Parse(name, s, "", "", parseFuncs)
	if err != nil {
		return nil, templateErr(err)
	}
	for tname, tree := range trees {
		// Bodies of {{define}}d templates run with whatever dot they are
		// given, so only the main body is checked against TemplateData.
		if err := (nameCheck{name, s}).check(tree.Root, tname == name); err != nil {
			return nil, err
		}
	}
	return &tmpl{trees: trees, name: name, where: where}, nil
}

// templateErr strips the parser's "template: " prefix; the caller adds the
// file position.
func templateErr(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "template: "))
}

// isStatic reports whether rendering needs no request data.
func (t *tmpl) isStatic() bool { return t.trees == nil }

// render executes the template. An execution error (an index out of range,
// say) cannot be reported to anyone at request time, so it becomes the
// rendered text, where a test or a user will see it.
func (t *tmpl) render(d *TemplateData) string {
	if t.trees == nil {
		return t.static
	}
	var b limitedBuilder
	if err := t.execute(&b, t.name, d); err != nil {
		return fmt.Sprintf("[fake: template error at %s: %v]", t.where, err)
	}
	return b.String()
}

// maxRendered bounds one rendered string, so a template looping over lorem
// fails visibly instead of exhausting memory.
const maxRendered = maxLorem + 64<<10

var errTooLong = fmt.Errorf("output longer than %d bytes", maxRendered)

// limitedBuilder is a strings.Builder that refuses to grow past
// maxRendered.
type limitedBuilder struct{ strings.Builder }

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxRendered {
		return 0, errTooLong
	}
	return b.Builder.Write(p)
}

func (b *limitedBuilder) WriteString(s string) (int, error) {
	if b.Len()+len(s) > maxRendered {
		return 0, errTooLong
	}
	return b.Builder.WriteString(s)
}

// nameCheck refuses root fields TemplateData does not have, such as a
// misspelt {{.Tsak}}, and the builtins scenario templates do not support,
// when a template is loaded.
type nameCheck struct {
	name, src string // the template's name and text, for positions
}

// check checks n. rootDot says whether dot is still the TemplateData:
// inside range and with it is something else and is not checked.
func (c nameCheck) check(n parse.Node, rootDot bool) error {
	field := func(ident []string) error {
		if _, ok := templateFields[ident[0]]; !ok {
			return fmt.Errorf("template %s: unknown field .%s (known: %s)", c.name, ident[0], knownFields())
		}
		return nil
	}
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, m := range n.Nodes {
			if err := c.check(m, rootDot); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return c.check(n.Pipe, rootDot)
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, m := range n.Cmds {
			if err := c.check(m, rootDot); err != nil {
				return err
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if err := c.check(a, rootDot); err != nil {
				return err
			}
		}
	case *parse.IdentifierNode:
		if templateFuncs[n.Ident] == nil {
			return fmt.Errorf("%s: function %q is not supported in scenario templates (they have: %s)",
				c.position(n), n.Ident, knownFuncs())
		}
	case *parse.FieldNode:
		if rootDot {
			return field(n.Ident)
		}
	case *parse.VariableNode:
		// $ is always the root data, whatever dot is.
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			return field(n.Ident[1:])
		}
	case *parse.ChainNode:
		return c.check(n.Node, rootDot)
	case *parse.IfNode:
		return c.branch(&n.BranchNode, rootDot, rootDot)
	case *parse.RangeNode:
		return c.branch(&n.BranchNode, rootDot, false)
	case *parse.WithNode:
		return c.branch(&n.BranchNode, rootDot, false)
	case *parse.TemplateNode:
		return c.check(n.Pipe, rootDot)
	}
	return nil
}

func (c nameCheck) branch(b *parse.BranchNode, rootDot, bodyDot bool) error {
	if err := c.check(b.Pipe, rootDot); err != nil {
		return err
	}
	if err := c.check(b.List, bodyDot); err != nil {
		return err
	}
	return c.check(b.ElseList, rootDot)
}

// position is "name:line:col" of n, as the parser places its errors (it
// gives only the line).
func (c nameCheck) position(n parse.Node) string {
	pos := min(int(n.Position()), len(c.src))
	line := 1 + strings.Count(c.src[:pos], "\n")
	col := pos - strings.LastIndexByte(c.src[:pos], '\n')
	return fmt.Sprintf("%s:%d:%d", c.name, line, col)
}

func knownFields() string { return sortedKeys(templateFields, ".") }

func knownFuncs() string { return sortedKeys(templateFuncs, "") }

func sortedKeys[V any](m map[string]V, prefix string) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, prefix+k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
