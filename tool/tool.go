// Package tool defines what a tool is to deputy, the set of tools offered to
// one agent, argument validation against each tool's JSON schema, and output
// truncation. The built-in tools live in sub-packages.
package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/deputy-run/deputy/llm"
)

// Tool is something a model can call.
type Tool interface {
	// Spec names the tool and gives its description and input JSON schema.
	Spec() llm.ToolSpec
	// ReadOnly reports that the tool changes nothing outside itself. Calls
	// to read-only tools of one turn may run concurrently, and after a crash
	// a read-only call may simply run again.
	ReadOnly() bool
	// Run executes one call. input has already been validated against the
	// schema. A returned error becomes a tool error result the model sees;
	// it must not contain secrets.
	Run(ctx context.Context, input json.RawMessage) (string, error)
}

// Concurrent is implemented by a tool that changes things yet whose calls
// may run at the same time as each other and as read-only calls: the spawn
// tool, whose children work in parallel and which serializes the children
// that write by itself.
type Concurrent interface {
	Concurrent() bool
}

// Resumable is implemented by a tool that changes things yet whose call,
// cut short by a crash, may run again, because running it again picks up
// the work the first run started instead of doing it twice: the spawn
// tool under a durable engine, which reattaches to the child it named
// after the call.
type Resumable interface {
	Resumable() bool
}

// Set is the tools offered to one agent: ordered, unique by name, with
// compiled input schemas. A Set is immutable and safe for concurrent use.
type Set struct {
	tools   []Tool
	specs   []llm.ToolSpec
	index   map[string]int
	schemas []*jsonschema.Schema
	fast    []*fastSchema // nil where the schema is outside the fast subset
}

// NewSet builds a set. Duplicate names and invalid schemas are errors.
func NewSet(tools ...Tool) (*Set, error) {
	s := &Set{index: make(map[string]int, len(tools))}
	for _, t := range tools {
		spec := t.Spec()
		if spec.Name == "" {
			return nil, fmt.Errorf("tool %T has no name", t)
		}
		if _, dup := s.index[spec.Name]; dup {
			return nil, fmt.Errorf("tool %q is defined twice", spec.Name)
		}
		sch, err := compileSchema(spec.Name, spec.InputSchema)
		if err != nil {
			return nil, err
		}
		s.index[spec.Name] = len(s.tools)
		s.tools = append(s.tools, t)
		s.specs = append(s.specs, spec)
		s.schemas = append(s.schemas, sch)
		s.fast = append(s.fast, fastTopLevel(spec.InputSchema))
	}
	return s, nil
}

// MustSet is NewSet for tool lists known to be valid at compile time.
func MustSet(tools ...Tool) *Set {
	s, err := NewSet(tools...)
	if err != nil {
		panic(err)
	}
	return s
}

// compiled memoizes compiled schemas by their bytes. Compiling one costs
// hundreds of microseconds and thousands of allocations, and the same
// schemas are compiled again and again: every run of a tree builds its
// spawn tool's set, every subagent its own. A compiled schema is
// immutable and safe for concurrent use, so one serves every set.
var compiled sync.Map // string(raw schema) → *jsonschema.Schema

func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	if sch, ok := compiled.Load(string(raw)); ok {
		return sch.(*jsonschema.Schema), nil
	}
	sch, err := compileSchemaOnce(name, raw)
	if err == nil {
		compiled.Store(string(raw), sch)
	}
	return sch, err
}

func compileSchemaOnce(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "deputy:///tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", name, err)
	}
	return sch, nil
}

// Len is the number of tools.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tools)
}

// Specs returns the tool specs in order, for a model request. The slice is
// shared; callers must not modify it.
func (s *Set) Specs() []llm.ToolSpec {
	if s == nil {
		return nil
	}
	return s.specs
}

// Names returns the tool names in order.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s.specs))
	for i := range s.specs {
		out[i] = s.specs[i].Name
	}
	return out
}

// Lookup returns the named tool.
func (s *Set) Lookup(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	i, ok := s.index[name]
	if !ok {
		return nil, false
	}
	return s.tools[i], true
}

// Filter returns the tools named in allow (all of them when allow is nil)
// minus those named in deny, in the set's order.
func (s *Set) Filter(allow, deny []string) *Set {
	out := &Set{index: map[string]int{}}
	if s == nil {
		return out
	}
	for i, t := range s.tools {
		name := s.specs[i].Name
		if (allow != nil && !slices.Contains(allow, name)) || slices.Contains(deny, name) {
			continue
		}
		out.index[name] = len(out.tools)
		out.tools = append(out.tools, t)
		out.specs = append(out.specs, s.specs[i])
		out.schemas = append(out.schemas, s.schemas[i])
		out.fast = append(out.fast, s.fast[i])
	}
	for alias, i := range s.index {
		if name := s.specs[i].Name; alias != name {
			if j, kept := out.index[name]; kept {
				out.index[alias] = j
			}
		}
	}
	return out
}

// Alias returns a set in which calls to alias run the tool called name.
// The alias is not offered to the model (Specs and Names do not list it);
// it serves a model that calls a tool by a name it was trained on, such as
// Claude Code's Task for spawn_subagent.
func (s *Set) Alias(alias, name string) (*Set, error) {
	out := s.Filter(nil, nil)
	i, ok := out.index[name]
	if !ok {
		return nil, fmt.Errorf("alias %q: no tool %q", alias, name)
	}
	if _, taken := out.index[alias]; taken {
		return nil, fmt.Errorf("alias %q: the name is taken", alias)
	}
	out.index[alias] = i
	return out, nil
}

// With returns a set holding s's tools followed by more. s's compiled
// schemas are reused; only more's are compiled.
func (s *Set) With(more ...Tool) (*Set, error) {
	add, err := NewSet(more...)
	if err != nil {
		return nil, err
	}
	return s.Join(add)
}

// Join returns a set holding s's tools followed by add's (without add's
// aliases), reusing both sets' compiled schemas: joining costs no schema
// compilation, which matters when a set is assembled per subagent.
func (s *Set) Join(add *Set) (*Set, error) {
	out := s.Filter(nil, nil)
	if add == nil {
		return out, nil
	}
	for i, t := range add.tools {
		name := add.specs[i].Name
		if _, dup := out.index[name]; dup {
			return nil, fmt.Errorf("tool %q is defined twice", name)
		}
		out.index[name] = len(out.tools)
		out.tools = append(out.tools, t)
		out.specs = append(out.specs, add.specs[i])
		out.schemas = append(out.schemas, add.schemas[i])
		out.fast = append(out.fast, add.fast[i])
	}
	return out, nil
}

// Refuse returns a set offering the same specs as s, in which a call to a
// tool that allow rejects is refused with an error result naming the tool
// and why, before its arguments are even looked at. A fork child uses it:
// its requests must offer the parent's tools byte for byte (the prompt
// cache), yet it may use only its own allowlist.
func (s *Set) Refuse(allow func(name string) bool, why string) *Set {
	out := s.Filter(nil, nil)
	for i, t := range out.tools {
		name := out.specs[i].Name
		if !allow(name) {
			out.tools[i] = refused{Tool: t, msg: fmt.Sprintf("tool %s is not allowed here: %s", name, why)}
		}
	}
	return out
}

// Replace returns a set offering the same specs as s, in s's order, in
// which each tool that impl also has by name runs impl's implementation.
// A fenced child uses it: its tools run in its sandbox or worktree, while
// the specs a fork child sends stay its parent's, byte for byte. A tool
// Refuse refused stays refused.
func (s *Set) Replace(impl *Set) *Set {
	out := s.Filter(nil, nil)
	for i := range out.tools {
		if _, no := out.tools[i].(refused); no {
			continue
		}
		if t, ok := impl.Lookup(out.specs[i].Name); ok {
			out.tools[i] = t
		}
	}
	return out
}

// refused stands in for a tool the caller may see but not use.
type refused struct {
	Tool
	msg string
}

func (r refused) ReadOnly() bool { return true } // it does nothing

func (r refused) Run(context.Context, json.RawMessage) (string, error) {
	return "", errors.New(r.msg)
}

// ReadOnly reports whether the named tool is read-only. Unknown tools count
// as read-only: calling one changes nothing, it only earns an error.
func (s *Set) ReadOnly(name string) bool {
	t, ok := s.Lookup(name)
	return !ok || t.ReadOnly()
}

// Suspending is implemented by a tool whose successful call stops the run
// after its turn, leaving the instance waiting: ask_parent, whose answer
// starts the next run. The loop tells from the tool and the result, not
// from the call running, so a run replayed from checkpoints stops at the
// same place.
type Suspending interface {
	Suspends() bool
}

// Suspends reports whether a successful call to the named tool stops the
// run (Suspending).
func (s *Set) Suspends(name string) bool {
	t, ok := s.Lookup(name)
	if !ok {
		return false
	}
	x, ok := t.(Suspending)
	return ok && x.Suspends()
}

// Resumable reports whether a call to the named tool that a crash cut
// short may run again: read-only tools and those implementing Resumable.
func (s *Set) Resumable(name string) bool {
	t, ok := s.Lookup(name)
	if !ok || t.ReadOnly() {
		return true
	}
	r, ok := t.(Resumable)
	return ok && r.Resumable()
}

// Concurrent reports whether calls to the named tool may run at the same
// time as other concurrent calls: read-only tools and those implementing
// Concurrent.
func (s *Set) Concurrent(name string) bool {
	t, ok := s.Lookup(name)
	if !ok || t.ReadOnly() {
		return true
	}
	c, ok := t.(Concurrent)
	return ok && c.Concurrent()
}

// Call runs one tool call the way the agent loop needs it: an unknown tool,
// input that is not a JSON object matching the schema, a returned error and
// even a panic all become an error result for the model, never a failure of
// the run. The output is not yet truncated.
func (s *Set) Call(ctx context.Context, name string, input json.RawMessage) (out string, isError bool) {
	i, msg := s.check(name, input)
	if msg != "" {
		return msg, true
	}
	defer func() {
		if r := recover(); r != nil {
			out, isError = fmt.Sprintf("tool %s crashed: %v\n%s", name, r, firstLines(string(debug.Stack()), 12)), true
		}
	}()
	out, err := s.tools[i].Run(ctx, input)
	if err != nil {
		if out != "" {
			return out + "\n" + err.Error(), true
		}
		return err.Error(), true
	}
	return out, false
}

// Check reports what Call would answer a call it cannot run at all (an
// unknown or refused tool, arguments its schema rejects), "" when the
// call would run. A permission gate asks it first, so it never holds a
// call that could not run anyway.
func (s *Set) Check(name string, input json.RawMessage) string {
	_, msg := s.check(name, input)
	return msg
}

func (s *Set) check(name string, input json.RawMessage) (int, string) {
	i, ok := -1, false
	if s != nil {
		i, ok = s.index[name]
	}
	if !ok {
		return i, fmt.Sprintf("unknown tool %q; available tools: %s", name, strings.Join(s.Names(), ", "))
	}
	if r, ok := s.tools[i].(refused); ok {
		return i, r.msg
	}
	if err := s.validate(i, input); err != nil {
		return i, fmt.Sprintf("invalid arguments for %s: %v", name, err)
	}
	return i, ""
}

// validate checks input against tool i's schema: the allocation-free fast
// path first (see fastschema.go), the full validator when it is not sure.
func (s *Set) validate(i int, input json.RawMessage) error {
	if f := s.fast[i]; f != nil && f.accepts(input) {
		return nil
	}
	return s.validateFull(i, input)
}

// jsonschemaSchema is the full validator's compiled schema.
type jsonschemaSchema = jsonschema.Schema

func (s *Set) validateFull(i int, input json.RawMessage) error {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return fmt.Errorf("input is not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("input must be a JSON object")
	}
	if err := s.schemas[i].Validate(v); err != nil {
		return schemaError(err)
	}
	return nil
}

// schemaError flattens a jsonschema validation error into one readable line
// per cause, without the schema URL noise.
func schemaError(err error) error {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err
	}
	var causes []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			causes = append(causes, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(english)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return fmt.Errorf("%s", strings.Join(causes, "; "))
}

// english prints schema errors; the validator needs a printer to format them.
var english = message.NewPrinter(language.English)

func firstLines(s string, n int) string {
	for i, c := 0, 0; i < len(s); i++ {
		if s[i] == '\n' {
			if c++; c == n {
				return s[:i]
			}
		}
	}
	return s
}

// DefaultOutputLimit caps one tool result, in characters.
const DefaultOutputLimit = 50_000

// Truncate caps s at max characters (runes); the result is never longer
// than max. What is cut is the middle: the head and the tail of an output (a
// command's first lines and its final error) are usually what matter. The
// marker says exactly how much was cut so the model can ask for a range
// instead of guessing. When max is too small to hold the marker, the head
// alone is kept.
func Truncate(s string, max int) string {
	if max <= 0 || len(s) <= max { // len counts bytes >= runes
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	runes := []rune(s)
	// The marker reports how many characters it replaces, and its own length
	// depends on that number: cut = n - (max - len(marker(cut))). Iterate to
	// the fixed point; cut only grows and is bounded by n, so this ends, in
	// practice after one or two rounds.
	cut := n - max
	var marker string
	for {
		marker = truncMarker(cut, n)
		keep := max - utf8.RuneCountInString(marker)
		if keep < 0 {
			return string(runes[:max])
		}
		if n-keep == cut {
			head := keep * 2 / 3
			return string(runes[:head]) + marker + string(runes[n-(keep-head):])
		}
		cut = n - keep
	}
}

func truncMarker(cut, total int) string {
	return fmt.Sprintf("\n[... %d of %d characters cut by deputy; narrow the request (offset/limit, a pattern) to see them ...]\n", cut, total)
}
