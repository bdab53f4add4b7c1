package tool_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// countingTool counts how often its spec is read (a set compiles a tool's
// schema from its spec, so an unchanged count means nothing was compiled)
// and how often it runs.
type countingTool struct {
	name       string
	schema     string
	readOnly   bool
	specs, ran atomic.Int32
}

func (c *countingTool) Spec() llm.ToolSpec {
	c.specs.Add(1)
	return llm.ToolSpec{Name: c.name, Description: "counting " + c.name, InputSchema: json.RawMessage(c.schema)}
}
func (c *countingTool) ReadOnly() bool { return c.readOnly }
func (c *countingTool) Run(_ context.Context, in json.RawMessage) (string, error) {
	c.ran.Add(1)
	return c.name + " ran with " + string(in), nil
}

// concurrentTool is a side-effecting tool that says whether its calls may
// run in parallel.
type concurrentTool struct {
	countingTool
	concurrent bool
}

func (c *concurrentTool) Concurrent() bool { return c.concurrent }

// slowSchema is outside the fast validator's subset (checked below), so the
// full validator runs for it.
const slowSchema = `{"type":"object","properties":{"n":{"type":"integer","multipleOf":3}},"required":["n"],"not":{"required":["x"]}}`

func call(s *tool.Set, name, input string) (string, bool) {
	return s.Call(context.Background(), name, json.RawMessage(input))
}

func TestSetConcurrent(t *testing.T) {
	t.Parallel()
	set := tool.MustSet(
		&countingTool{name: "read", schema: `{"type":"object"}`, readOnly: true},
		&countingTool{name: "write", schema: `{"type":"object"}`},
		&concurrentTool{countingTool: countingTool{name: "spawn", schema: `{"type":"object"}`}, concurrent: true},
		&concurrentTool{countingTool: countingTool{name: "serial", schema: `{"type":"object"}`}, concurrent: false},
	)
	want := map[string]bool{"read": true, "write": false, "spawn": true, "serial": false, "unknown": true}
	for name, w := range want {
		if got := set.Concurrent(name); got != w {
			t.Errorf("Concurrent(%q) = %v, want %v", name, got, w)
		}
	}
	if set.ReadOnly("spawn") {
		t.Error("a concurrent tool is not read-only")
	}
	var nilSet *tool.Set
	if !nilSet.Concurrent("x") {
		t.Error("an unknown tool of a nil set is concurrent: calling it changes nothing")
	}
}

type resumableTool struct {
	countingTool
	resumable bool
}

func (r *resumableTool) Resumable() bool { return r.resumable }

func TestSetResumable(t *testing.T) {
	t.Parallel()
	set := tool.MustSet(
		&countingTool{name: "read", schema: `{"type":"object"}`, readOnly: true},
		&countingTool{name: "write", schema: `{"type":"object"}`},
		&resumableTool{countingTool: countingTool{name: "spawn", schema: `{"type":"object"}`}, resumable: true},
		&resumableTool{countingTool: countingTool{name: "once", schema: `{"type":"object"}`}, resumable: false},
	)
	alias, err := set.Alias("task", "spawn")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"read": true, "write": false, "spawn": true, "once": false, "task": true, "unknown": true}
	for name, w := range want {
		if got := alias.Resumable(name); got != w {
			t.Errorf("Resumable(%q) = %v, want %v", name, got, w)
		}
	}
}

func TestSetJoinReusesSchemasAndKeepsValidation(t *testing.T) {
	t.Parallel()
	fast := &countingTool{name: "fast", schema: echoSchema, readOnly: true}
	slow := &countingTool{name: "slow", schema: slowSchema}
	if !tool.OnFastPath(json.RawMessage(echoSchema)) || tool.OnFastPath(json.RawMessage(slowSchema)) {
		t.Fatal("the schemas no longer cover both validators; pick others")
	}
	left := tool.MustSet(fast)
	right := tool.MustSet(slow)
	joined, err := left.Join(right)
	if err != nil {
		t.Fatal(err)
	}
	if fast.specs.Load() != 1 || slow.specs.Load() != 1 {
		t.Fatalf("Join read specs again (fast %d, slow %d times): schemas were recompiled", fast.specs.Load(), slow.specs.Load())
	}
	if !slices.Equal(joined.Names(), []string{"fast", "slow"}) || joined.Len() != 2 ||
		joined.Specs()[0].Description != "counting fast" || joined.Specs()[1].Description != "counting slow" {
		t.Fatalf("joined %v %+v", joined.Names(), joined.Specs())
	}
	if !slices.Equal(left.Names(), []string{"fast"}) || !slices.Equal(right.Names(), []string{"slow"}) {
		t.Fatalf("Join changed its operands: %v %v", left.Names(), right.Names())
	}
	cases := []struct{ name, input, want string }{
		{"fast", `{"msg":"hi"}`, "fast ran with "},
		{"fast", `{"msg":3}`, "invalid arguments for fast: at /msg: got number, want string"},
		{"fast", `{"msg":"a","x":1}`, "invalid arguments for fast: at /: additional properties 'x' not allowed"},
		{"slow", `{"n":6}`, "slow ran with "},
		{"slow", `{"n":7}`, "invalid arguments for slow: at /n: multipleOf: got 7, want 3"},
		{"slow", `{"n":3,"x":1}`, "invalid arguments for slow: at /: 'not' failed"},
		{"slow", `{}`, "invalid arguments for slow: at /: missing property 'n'"},
	}
	for _, c := range cases {
		out, isErr := call(joined, c.name, c.input)
		if !strings.HasPrefix(out, c.want) || isErr != strings.HasPrefix(c.want, "invalid") {
			t.Errorf("%s %s: got (%q, %v), want %q", c.name, c.input, out, isErr, c.want)
		}
	}
	if fast.ran.Load() != 1 || slow.ran.Load() != 1 {
		t.Errorf("runs: fast %d, slow %d", fast.ran.Load(), slow.ran.Load())
	}

	// Duplicate names are errors, including a name the left side uses as
	// an alias.
	if _, err := joined.Join(tool.MustSet(&countingTool{name: "slow", schema: `{"type":"object"}`})); err == nil ||
		!strings.Contains(err.Error(), `tool "slow" is defined twice`) {
		t.Errorf("duplicate: %v", err)
	}
	aliased, err := left.Alias("task", "fast")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aliased.Join(tool.MustSet(&countingTool{name: "task", schema: `{"type":"object"}`})); err == nil {
		t.Error("Join let a tool shadow an alias")
	}
	// The left side's aliases stay; the right side's are not carried.
	rightAliased, err := right.Alias("other", "slow")
	if err != nil {
		t.Fatal(err)
	}
	both, err := aliased.Join(rightAliased)
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := call(both, "task", `{"msg":"via alias"}`); isErr || !strings.HasPrefix(out, "fast ran") {
		t.Errorf("left alias: %q", out)
	}
	if out, isErr := call(both, "other", `{"n":3}`); !isErr || !strings.HasPrefix(out, `unknown tool "other"`) {
		t.Errorf("right alias carried over: %q", out)
	}
	// Joining nothing is a copy.
	if same, err := left.Join(nil); err != nil || !slices.Equal(same.Names(), left.Names()) {
		t.Errorf("Join(nil): %v %v", same.Names(), err)
	}
}

func TestSetWithCompilesOnlyTheNewTools(t *testing.T) {
	t.Parallel()
	base := &countingTool{name: "base", schema: slowSchema}
	set := tool.MustSet(base)
	extra := &countingTool{name: "extra", schema: echoSchema}
	more, err := set.With(extra)
	if err != nil {
		t.Fatal(err)
	}
	if base.specs.Load() != 1 || extra.specs.Load() != 1 {
		t.Fatalf("spec reads: base %d, extra %d", base.specs.Load(), extra.specs.Load())
	}
	if !slices.Equal(more.Names(), []string{"base", "extra"}) || set.Len() != 1 {
		t.Fatalf("%v, base now %v", more.Names(), set.Names())
	}
	if out, _ := call(more, "base", `{"n":1}`); !strings.Contains(out, "multipleOf: got 1, want 3") {
		t.Errorf("base validation: %q", out)
	}
	if out, _ := call(more, "extra", `{}`); !strings.Contains(out, "missing property 'msg'") {
		t.Errorf("extra validation: %q", out)
	}
	if _, err := set.With(&countingTool{name: "bad", schema: `{"type":"nonsense"}`}); err == nil ||
		!strings.Contains(err.Error(), `tool "bad": input schema`) {
		t.Errorf("invalid schema: %v", err)
	}
	if _, err := set.With(&countingTool{name: "base", schema: `{"type":"object"}`}); err == nil {
		t.Error("With accepted a duplicate of the set's tool")
	}
}

func TestSetRefuse(t *testing.T) {
	t.Parallel()
	read := &countingTool{name: "read", schema: echoSchema, readOnly: true}
	write := &countingTool{name: "write", schema: echoSchema}
	bash := &countingTool{name: "bash", schema: slowSchema}
	set := tool.MustSet(read, write, bash)
	aliased, err := set.Alias("Bash", "bash")
	if err != nil {
		t.Fatal(err)
	}
	r := aliased.Refuse(func(name string) bool { return name == "read" }, "the child may only read")

	before, _ := json.Marshal(set.Specs())
	after, _ := json.Marshal(r.Specs())
	if string(before) != string(after) || !slices.Equal(set.Names(), r.Names()) {
		t.Fatalf("specs changed:\n%s\n%s", before, after)
	}
	// Refused calls get the message, whatever their arguments, and never run.
	for _, c := range []struct{ name, tool, input string }{
		{"write", "write", `{"msg":"x"}`}, {"write", "write", `{not json`},
		{"bash", "bash", `{"n":1}`}, {"bash", "Bash", `{"n":3}`},
	} {
		out, isErr := call(r, c.tool, c.input)
		if want := "tool " + c.name + " is not allowed here: the child may only read"; !isErr || out != want {
			t.Errorf("%s %s: got (%q, %v), want %q", c.tool, c.input, out, isErr, want)
		}
	}
	if write.ran.Load() != 0 || bash.ran.Load() != 0 {
		t.Fatalf("refused tools ran: write %d, bash %d", write.ran.Load(), bash.ran.Load())
	}
	// The allowed tool works and is still validated.
	if out, isErr := call(r, "read", `{"msg":"x"}`); isErr || !strings.HasPrefix(out, "read ran") {
		t.Errorf("allowed call: %q", out)
	}
	if out, isErr := call(r, "read", `{"msg":1}`); !isErr || !strings.HasPrefix(out, "invalid arguments for read") {
		t.Errorf("allowed call validation: %q", out)
	}
	// A refused tool does nothing, so it is read-only; the original set is
	// untouched.
	if !r.ReadOnly("write") || set.ReadOnly("write") || !r.Concurrent("write") {
		t.Error("refused tools should be read-only and concurrent, only in the refusing set")
	}
	if tl, ok := r.Lookup("write"); !ok || tl.Spec().Name != "write" {
		t.Error("Lookup of a refused tool")
	}
	if out, isErr := call(set, "write", `{"msg":"x"}`); isErr || write.ran.Load() != 1 {
		t.Errorf("the original set lost its tool: %q", out)
	}
	// Nothing refused: every call runs.
	open := set.Refuse(func(string) bool { return true }, "unused")
	if out, isErr := call(open, "bash", `{"n":9}`); isErr || bash.ran.Load() != 1 {
		t.Errorf("allow-all refused: %q", out)
	}
}

func TestSetAlias(t *testing.T) {
	t.Parallel()
	spawn := &countingTool{name: "spawn_subagent", schema: echoSchema}
	read := &countingTool{name: "read", schema: `{"type":"object"}`, readOnly: true}
	set := tool.MustSet(spawn, read)
	a, err := set.Alias("Task", "spawn_subagent")
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := call(a, "Task", `{"msg":"go"}`); isErr || out != `spawn_subagent ran with {"msg":"go"}` {
		t.Fatalf("alias call: %q %v", out, isErr)
	}
	if out, isErr := call(a, "Task", `{}`); !isErr || !strings.Contains(out, "missing property 'msg'") {
		t.Errorf("alias validation: %q", out)
	}
	if !slices.Equal(a.Names(), []string{"spawn_subagent", "read"}) || len(a.Specs()) != 2 || a.Len() != 2 {
		t.Errorf("alias offered: %v", a.Names())
	}
	if out, _ := call(a, "nope", `{}`); strings.Contains(out, "Task") {
		t.Errorf("unknown-tool message lists the alias: %q", out)
	}
	if a.ReadOnly("Task") || a.Concurrent("Task") {
		t.Error("the alias lost its target's nature")
	}
	// The original set has no alias.
	if _, isErr := call(set, "Task", `{"msg":"go"}`); !isErr {
		t.Error("Alias changed the original set")
	}

	for _, c := range []struct{ alias, target, want string }{
		{"X", "missing", `alias "X": no tool "missing"`},
		{"read", "spawn_subagent", `alias "read": the name is taken`},
		{"Task", "read", `alias "Task": the name is taken`},
	} {
		if _, err := a.Alias(c.alias, c.target); err == nil || err.Error() != c.want {
			t.Errorf("Alias(%q, %q): %v, want %q", c.alias, c.target, err, c.want)
		}
	}

	// An alias of an alias runs the tool itself.
	if b, err := a.Alias("Agent", "Task"); err != nil {
		t.Error(err)
	} else if out, isErr := call(b, "Agent", `{"msg":"chained"}`); isErr || !strings.HasPrefix(out, "spawn_subagent ran") {
		t.Errorf("chained alias: %q", out)
	}

	// Filter keeps an alias exactly when it keeps its target.
	kept := a.Filter([]string{"spawn_subagent"}, nil)
	if out, isErr := call(kept, "Task", `{"msg":"kept"}`); isErr || !strings.HasPrefix(out, "spawn_subagent ran") {
		t.Errorf("alias lost with its target kept: %q", out)
	}
	for name, f := range map[string]*tool.Set{
		"denied target": a.Filter(nil, []string{"spawn_subagent"}),
		"alias allowed": a.Filter([]string{"Task", "read"}, nil),
	} {
		if out, isErr := call(f, "Task", `{"msg":"x"}`); !isErr || !strings.HasPrefix(out, `unknown tool "Task"`) {
			t.Errorf("%s: alias survived without its target: %q", name, out)
		}
	}
	// A later tool cannot take the alias's name.
	if _, err := a.With(&countingTool{name: "Task", schema: `{"type":"object"}`}); err == nil {
		t.Error("With shadowed an alias")
	}
	if spawn.ran.Load() != 3 {
		t.Errorf("target ran %d times, want 3", spawn.ran.Load())
	}
	var nilSet *tool.Set
	if _, err := nilSet.Alias("a", "b"); err == nil {
		t.Error("alias on a nil set")
	}
}
