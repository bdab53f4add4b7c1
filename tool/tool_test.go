package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTool is a tool whose behaviour a test chooses.
type fakeTool struct {
	name     string
	schema   string
	readOnly bool
	run      func(input json.RawMessage) (string, error)
}

func (f *fakeTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: f.name, Description: "test tool", InputSchema: json.RawMessage(f.schema)}
}
func (f *fakeTool) ReadOnly() bool { return f.readOnly }
func (f *fakeTool) Run(_ context.Context, input json.RawMessage) (string, error) {
	return f.run(input)
}

const echoSchema = `{"type":"object","properties":{"msg":{"type":"string","minLength":1},"n":{"type":"integer","minimum":1}},"required":["msg"],"additionalProperties":false}`

func testSet(t *testing.T) *tool.Set {
	t.Helper()
	echo := &fakeTool{name: "echo", schema: echoSchema, readOnly: true, run: func(in json.RawMessage) (string, error) {
		var v struct{ Msg string }
		if err := json.Unmarshal(in, &v); err != nil {
			return "", err
		}
		return v.Msg, nil
	}}
	boom := &fakeTool{name: "boom", run: func(json.RawMessage) (string, error) {
		var m map[string]int
		m["x"] = 1 // a real nil-map panic, not a staged one
		return "", nil
	}}
	fail := &fakeTool{name: "fail", run: func(json.RawMessage) (string, error) {
		return "partial output", errors.New("then it failed")
	}}
	failQuiet := &fakeTool{name: "fail_quiet", run: func(json.RawMessage) (string, error) {
		return "", errors.New("failed with no output")
	}}
	set, err := tool.NewSet(echo, boom, fail, failQuiet)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestSetCall(t *testing.T) {
	t.Parallel()
	set := testSet(t)
	tests := []struct {
		name, tool, input string
		want              string // exact, or a regexp when it starts with ^
		isErr             bool
	}{
		{"ok", "echo", `{"msg":"hi"}`, "hi", false},
		{"unknown tool lists the available ones", "nope", `{}`,
			`unknown tool "nope"; available tools: echo, boom, fail, fail_quiet`, true},
		{"not json", "echo", `{"msg":`, "^invalid arguments for echo: input is not valid JSON: ", true},
		{"not an object", "echo", `["msg"]`, "invalid arguments for echo: input must be a JSON object", true},
		{"null", "echo", `null`, "invalid arguments for echo: input must be a JSON object", true},
		{"empty input is an empty object", "echo", ``, "invalid arguments for echo: at /: missing property 'msg'", true},
		{"missing required", "echo", `{}`, "invalid arguments for echo: at /: missing property 'msg'", true},
		{"wrong type", "echo", `{"msg":3}`, "invalid arguments for echo: at /msg: got number, want string", true},
		{"extra property", "echo", `{"msg":"a","x":1}`, "invalid arguments for echo: at /: additional properties 'x' not allowed", true},
		{"minimum", "echo", `{"msg":"a","n":0}`, "invalid arguments for echo: at /n: minimum: got 0, want 1", true},
		{"several causes", "echo", `{"msg":"","n":1.5}`, "^invalid arguments for echo: at /(msg|n): .*; at /(msg|n): ", true},
		{"panic becomes an error result", "boom", `{}`, "^tool boom crashed: assignment to entry in nil map\n", true},
		{"error after output keeps both", "fail", `{}`, "partial output\nthen it failed", true},
		{"error alone", "fail_quiet", `{}`, "failed with no output", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, isErr := set.Call(context.Background(), tc.tool, json.RawMessage(tc.input))
			ok := out == tc.want
			if strings.HasPrefix(tc.want, "^") {
				ok = regexp.MustCompile(tc.want).MatchString(out)
			}
			if !ok || isErr != tc.isErr {
				t.Errorf("got (%q, err=%v), want %q (err=%v)", out, isErr, tc.want, tc.isErr)
			}
			if strings.Contains(out, "deputy:///") {
				t.Errorf("schema URL noise in %q", out)
			}
		})
	}
}

func TestNewSetErrors(t *testing.T) {
	t.Parallel()
	ok := &fakeTool{name: "a", schema: `{"type":"object"}`}
	tests := []struct {
		tools []tool.Tool
		want  string
	}{
		{[]tool.Tool{ok, &fakeTool{name: "a"}}, `tool "a" is defined twice`},
		{[]tool.Tool{&fakeTool{}}, "has no name"},
		{[]tool.Tool{&fakeTool{name: "bad", schema: `{"type":`}}, `tool "bad": input schema`},
		{[]tool.Tool{&fakeTool{name: "bad", schema: `{"type":"nonsense"}`}}, `tool "bad": input schema`},
	}
	for _, tc := range tests {
		if _, err := tool.NewSet(tc.tools...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

func TestSetFilterWithLookup(t *testing.T) {
	t.Parallel()
	set := testSet(t)
	if got := set.Filter(nil, nil).Names(); !slices.Equal(got, []string{"echo", "boom", "fail", "fail_quiet"}) {
		t.Errorf("nil allow: %v", got)
	}
	// Order is the set's, not the allow list's; deny wins over allow.
	f := set.Filter([]string{"fail", "echo", "boom", "ghost"}, []string{"boom"})
	if got := f.Names(); !slices.Equal(got, []string{"echo", "fail"}) {
		t.Errorf("filtered: %v", got)
	}
	if f.Len() != 2 || len(f.Specs()) != 2 || f.Specs()[1].Name != "fail" {
		t.Errorf("specs: %v", f.Specs())
	}
	// A filtered-out tool cannot be called, and the message names only the
	// tools the agent has.
	out, isErr := f.Call(context.Background(), "boom", json.RawMessage(`{}`))
	if !isErr || out != `unknown tool "boom"; available tools: echo, fail` {
		t.Errorf("denied tool: %q", out)
	}
	// Schemas survive filtering.
	if out, _ := f.Call(context.Background(), "echo", json.RawMessage(`{"msg":1}`)); !strings.Contains(out, "at /msg") {
		t.Errorf("filtered schema: %q", out)
	}
	if out, isErr := f.Call(context.Background(), "echo", json.RawMessage(`{"msg":"x"}`)); isErr || out != "x" {
		t.Errorf("filtered call: %q", out)
	}
	if got := set.Filter([]string{}, nil).Names(); len(got) != 0 {
		t.Errorf("empty allow list allows nothing, got %v", got)
	}
	if _, ok := f.Lookup("boom"); ok {
		t.Error("Lookup found a filtered-out tool")
	}
	if tl, ok := f.Lookup("echo"); !ok || tl.Spec().Name != "echo" {
		t.Error("Lookup lost echo")
	}
	if !set.ReadOnly("echo") || set.ReadOnly("boom") || !set.ReadOnly("unknown") {
		t.Error("ReadOnly")
	}
	more, err := f.With(&fakeTool{name: "extra", schema: `{"type":"object"}`})
	if err != nil || !slices.Equal(more.Names(), []string{"echo", "fail", "extra"}) {
		t.Errorf("With: %v %v", more.Names(), err)
	}
	if _, err := f.With(&fakeTool{name: "echo"}); err == nil {
		t.Error("With accepted a duplicate")
	}
	var nilSet *tool.Set
	if nilSet.Len() != 0 || nilSet.Names() != nil || nilSet.Filter(nil, nil).Len() != 0 {
		t.Error("nil set")
	}
	if out, isErr := nilSet.Call(context.Background(), "x", nil); !isErr || !strings.HasPrefix(out, `unknown tool "x"`) {
		t.Errorf("nil set call: %q", out)
	}
}

var markerRE = regexp.MustCompile(`\n\[\.\.\. (\d+) of (\d+) characters cut by deputy; [^\]]*\]\n`)

// checkTruncate verifies Truncate's contract on one input.
func checkTruncate(t interface {
	Helper()
	Fatalf(string, ...any)
}, s string, max int) {
	t.Helper()
	got := tool.Truncate(s, max)
	n := utf8.RuneCountInString(s)
	if max <= 0 || n <= max {
		if got != s {
			t.Fatalf("Truncate(%d runes, %d) changed a string that fits", n, max)
		}
		return
	}
	if c := utf8.RuneCountInString(got); c != max {
		t.Fatalf("Truncate(%d runes, %d) = %d runes, want exactly %d", n, max, c, max)
	}
	if utf8.ValidString(s) && !utf8.ValidString(got) {
		t.Fatalf("Truncate split a character: %q", got)
	}
	loc := markerRE.FindStringSubmatchIndex(got)
	if loc == nil {
		// Only when the marker itself does not fit: then the head alone.
		if !strings.HasPrefix(s, got) || max > 150 {
			t.Fatalf("no marker and not a plain head cut: %q", got)
		}
		return
	}
	cut, _ := strconv.Atoi(got[loc[2]:loc[3]])
	total, _ := strconv.Atoi(got[loc[4]:loc[5]])
	head, tail := got[:loc[0]], got[loc[1]:]
	if total != n {
		t.Fatalf("marker says %d in all, want %d", total, n)
	}
	if kept := utf8.RuneCountInString(head) + utf8.RuneCountInString(tail); kept != n-cut {
		t.Fatalf("marker says %d cut, but %d of %d were kept", cut, kept, n)
	}
	if !strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail) {
		t.Fatalf("head or tail is not the original's")
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	ascii := strings.Repeat("0123456789", 100)
	wide := strings.Repeat("日本語😀é", 200)
	for _, max := range []int{-1, 0, 1, 10, 99, 100, 130, 200, 333, 999, 1000, 1001} {
		checkTruncate(t, ascii, max)
		checkTruncate(t, wide, max)
	}
	if got := tool.Truncate("short", 10); got != "short" {
		t.Errorf("%q", got)
	}
	got := tool.Truncate(ascii, 200)
	if !strings.HasPrefix(got, "0123456789") || !strings.HasSuffix(got, "0123456789") {
		t.Errorf("head and tail not kept: %q", got)
	}
	if !strings.Contains(got, " of 1000 characters cut by deputy") {
		t.Errorf("marker: %q", got)
	}
	// A string of more bytes than max but fewer runes is left alone.
	if got := tool.Truncate(strings.Repeat("é", 60), 100); got != strings.Repeat("é", 60) {
		t.Errorf("cut by bytes: %q", got)
	}
}

func TestTruncateProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		max := rapid.IntRange(-5, 400).Draw(t, "max")
		checkTruncate(t, s, max)
	})
}

func ExampleTruncate() {
	out := tool.Truncate(strings.Repeat("x", 300), 150)
	fmt.Println(len(out), strings.Contains(out, "cut by deputy"))
	// Output: 150 true
}

// Replace swaps implementations by name and keeps the specs, their order
// and refusals.
func TestSetReplace(t *testing.T) {
	t.Parallel()
	mk := func(name, out string) tool.Tool {
		return &fakeTool{name: name, readOnly: true, run: func(json.RawMessage) (string, error) { return out, nil }}
	}
	base := tool.MustSet(mk("a", "base a"), mk("b", "base b"), mk("c", "base c"))
	base = base.Refuse(func(n string) bool { return n != "c" }, "not yours")
	got := base.Replace(tool.MustSet(mk("c", "fenced c"), mk("b", "fenced b"), mk("z", "fenced z")))
	if names := got.Names(); strings.Join(names, ",") != "a,b,c" {
		t.Fatalf("names %v", names)
	}
	for name, want := range map[string]string{"a": "base a", "b": "fenced b"} {
		if out, isErr := got.Call(context.Background(), name, json.RawMessage(`{}`)); isErr || out != want {
			t.Errorf("%s: %q (error %v), want %q", name, out, isErr, want)
		}
	}
	if out, isErr := got.Call(context.Background(), "c", json.RawMessage(`{}`)); !isErr || !strings.Contains(out, "not yours") {
		t.Errorf("a refused tool ran after Replace: %q", out)
	}
}
