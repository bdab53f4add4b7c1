package fake

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/llm"
)

// Helpers that build conversations the way the agent loop does.

func tools(names ...string) []llm.ToolSpec {
	out := make([]llm.ToolSpec, len(names))
	for i, n := range names {
		out[i] = llm.ToolSpec{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	return out
}

// atTurn returns a request at the given turn: the task, then turn-1 rounds
// of an assistant tool call answered by a tool result.
func atTurn(task string, turn int) *llm.Request {
	req := &llm.Request{Model: "claude-test", Messages: []llm.Message{llm.UserText(task)}}
	for i := 1; i < turn; i++ {
		id := "toolu_prev" + string(rune('a'+i))
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.Assistant, Content: []llm.Block{llm.ToolUse(id, "bash", json.RawMessage(`{}`))}},
			llm.Message{Role: llm.User, Content: []llm.Block{llm.ToolResult(id, "ok", false)}})
	}
	return req
}

func mustParse(t testing.TB, src string) *Scenario {
	t.Helper()
	s, err := ParseScenario([]byte(src), "t.yaml")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return s
}

func texts(r Reply) []string {
	var out []string
	for _, b := range r.Content {
		if b.Type == llm.TypeText {
			out = append(out, b.Text)
		}
	}
	return out
}

func onlyText(t *testing.T, r Reply) string {
	t.Helper()
	if len(r.Content) != 1 || r.Content[0].Type != llm.TypeText {
		t.Fatalf("want one text block, got %+v", r.Content)
	}
	return r.Content[0].Text
}

// noScenarioFault returns the first request number from n on that no
// scenario-wide fault hits.
func noScenarioFault(s *Scenario, n int) int {
	for ; ; n++ {
		hit := false
		for i := range s.faults {
			hit = hit || s.faults[i].fires(s.seed, n, i)
		}
		if !hit {
			return n
		}
	}
}

func TestParseEveryField(t *testing.T) {
	t.Parallel()
	s, err := LoadScenario("testdata/scenarios/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "everything" || s.seed != 7 {
		t.Errorf("name %q seed %d", s.Name(), s.seed)
	}
	if s.latency != (latency{firstByte: 200 * time.Millisecond, perToken: 5 * time.Millisecond, hasFirstByte: true, hasPerToken: true}) {
		t.Errorf("latency %+v", s.latency)
	}
	if len(s.faults) != 2 || s.faults[0].fault.Kind != FaultRateLimit || s.faults[0].rate != 0.25 ||
		s.faults[0].fault.RetryAfter != 2*time.Second || s.faults[1].fault.Kind != FaultOverloaded ||
		len(s.faults[1].onRequest) != 2 || s.faults[1].onRequest[1] != 5 {
		t.Errorf("faults %+v", s.faults)
	}
	if len(s.rules) != 2 || s.rules[0].times != 2 || s.def == nil {
		t.Fatalf("rules %+v", s.rules)
	}
	m := s.rules[0].match
	if m.turnLo != 2 || m.turnHi != 4 || m.toolError != -1 || len(m.tools) != 2 {
		t.Errorf("match %+v", m)
	}

	// The whole rule, through Respond.
	req := &llm.Request{
		Model:  "claude-x",
		System: "You are a Reviewer.",
		Tools:  tools("glob", "bash", "read_file"),
		Messages: []llm.Message{
			llm.UserText("review the parser"),
			{Role: llm.Assistant, Content: []llm.Block{llm.ToolUse("toolu_1", "bash", json.RawMessage(`{}`))}},
			{Role: llm.User, Content: []llm.Block{llm.ToolResult("toolu_1", "ok: 3 files", false), llm.Text("now fix it")}},
		},
	}
	r := s.Respond(req, RequestInfo{Provider: Anthropic, N: noScenarioFault(s, 1)})
	if len(r.Content) != 6 {
		t.Fatalf("want thinking+text+4 tool calls, got %d blocks: %+v", len(r.Content), r.Content)
	}
	var th struct{ Type, Thinking, Signature string }
	if err := json.Unmarshal(r.Content[0].Raw, &th); err != nil || r.Content[0].Type != "thinking" ||
		th.Type != "thinking" || th.Thinking != "Let me think about review the parser." ||
		th.Signature != ThinkingSignature(th.Thinking) {
		t.Errorf("thinking block %s (%v)", r.Content[0].Raw, err)
	}
	if r.Content[1].Text != "Turn 2 on claude-x" {
		t.Errorf("text %q", r.Content[1].Text)
	}
	wantInputs := []string{
		`{"command":"ls -la","timeout_s":30}`,
		`{"task":"part 1 of 3","nested":{"z":1,"a":[true,null,1.5,"x"]}}`,
		`{"task":"part 2 of 3","nested":{"z":1,"a":[true,null,1.5,"x"]}}`,
		`{"task":"part 3 of 3","nested":{"z":1,"a":[true,null,1.5,"x"]}}`,
	}
	for i, want := range wantInputs {
		b := r.Content[2+i]
		if b.Type != llm.TypeToolUse || string(b.Input) != want {
			t.Errorf("tool call %d: %s %s, want %s", i, b.Name, b.Input, want)
		}
	}
	if r.Content[2].Name != "bash" || r.Content[3].Name != "spawn_subagent" {
		t.Errorf("names %q %q", r.Content[2].Name, r.Content[3].Name)
	}
	if r.StopReason != llm.StopMaxTokens {
		t.Errorf("stop reason %q", r.StopReason)
	}
	if r.Usage == nil || *r.Usage != (llm.Usage{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 3, CacheWriteTokens: 2}) {
		t.Errorf("usage %+v", r.Usage)
	}
	// The rule overrides first_byte and inherits per_token.
	if r.FirstByte != time.Second || r.PerToken != 5*time.Millisecond {
		t.Errorf("latency %v %v", r.FirstByte, r.PerToken)
	}
	if r.Fault == nil || *r.Fault != (Fault{Kind: FaultCutStream, AfterBytes: 100, RetryAfter: 3 * time.Second, Delay: 50 * time.Millisecond}) {
		t.Errorf("fault %+v", r.Fault)
	}

	// turn 1 → the second rule, which inherits the scenario's latency.
	r = s.Respond(atTurn("x", 1), RequestInfo{N: noScenarioFault(s, 1)})
	if onlyText(t, r) != "plain" || r.FirstByte != 200*time.Millisecond || r.StopReason != "" || r.Fault != nil {
		t.Errorf("turn 1: %+v", r)
	}
	// turn 5 → the default.
	r = s.Respond(atTurn("x", 5), RequestInfo{N: noScenarioFault(s, 1)})
	if onlyText(t, r) != "nothing for turn 5" {
		t.Errorf("default: %+v", r)
	}
}

func TestParseTestdataAndDemo(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/scenarios/*.yaml")
	if len(files) < 4 {
		t.Fatalf("testdata missing: %v", files)
	}
	for _, f := range files {
		if _, err := LoadScenario(f); err != nil {
			t.Errorf("%v", err)
		}
	}
	if d := DemoScenario(); d.Name() != "demo" || len(d.rules) < 9 {
		t.Errorf("demo: %q with %d rules", d.Name(), len(d.rules))
	}
	if _, err := LoadScenario("testdata/scenarios/missing.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	t.Parallel()
	s, err := LoadScenario("testdata/scenarios/anchors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := s.Respond(atTurn("t", 1), RequestInfo{N: 1})
	if len(r.Content) != 2 {
		t.Fatalf("%+v", r.Content)
	}
	// Merged keys sit where the merge key was; an explicit key wins, in
	// the place it was written.
	if got := string(r.Content[0].Input); got != `{"path":"notes.md","content":"hello","mode":"overwrite"}` {
		t.Errorf("merged input %s", got)
	}
	if got := string(r.Content[1].Input); got != `{"path":"notes.md","mode":"append"}` {
		t.Errorf("aliased input %s", got)
	}
	// An anchor in a rule's text used by its match, which is decoded first.
	s = mustParse(t, "rules:\n  - text: &t hello\n    match: {last_user: *t}\ndefault: {text: no}\n")
	if got := onlyText(t, s.Respond(atTurn("say hello", 1), RequestInfo{N: 1})); got != "hello" {
		t.Errorf("anchor used before it is decoded: %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		line      int
		want      string
	}{
		{"syntax", "rules: [\n  {text: a}\n", 1, "not found"},
		{"duplicate key", "name: a\nname: b\n", 2, "already defined"},
		{"two documents", "name: a\n---\nname: b\n", 3, "one YAML document"},
		{"unknown top field", "name: x\nnmae: y\n", 2, `unknown field "nmae"`},
		{"unknown rule field", "rules:\n  - match: {turn: 1}\n    txet: hi\n", 3, `unknown field "txet"`},
		{"unknown match field", "rules:\n  - match: {trun: 1}\n    text: hi\n", 2, `unknown field "trun"`},
		{"unknown tool call field", "rules:\n  - tool_calls:\n      - name: a\n        inptu: {}\n", 4, `unknown field "inptu"`},
		{"unknown latency field", "latency: {first: 1s}\n", 1, `unknown field "first"`},
		{"unknown fault field", "rules:\n  - fault: {kind: overloaded, after: 1}\n", 2, `unknown field "after"`},
		{"bad template", "rules:\n  - text: \"{{.Task\"\n", 2, "rules[0].text"},
		{"unknown template field", "rules:\n  - text: hi\n  - text: \"{{.Tsak}}\"\n", 3, "unknown field .Tsak"},
		{"unknown template func", "default:\n  text: \"{{shout .Task}}\"\n", 2, `function "shout" not defined`},
		{"bad template in input", "rules:\n  - tool_calls:\n      - name: a\n        input:\n          x: \"{{if}}\"\n", 5, "rules[0].tool_calls[0].input.x"},
		{"bad regexp", "rules:\n  - match:\n      system: \"(unclosed\"\n    text: a\n", 3, "system"},
		{"bad duration", "latency:\n  first_byte: fast\n", 2, "not a duration"},
		{"duration without unit", "latency: {per_token: 5}\n", 1, "must be a duration"},
		{"negative duration", "latency: {per_token: -5ms}\n", 1, "negative"},
		{"bad fault kind", "rules:\n  - fault: {kind: meltdown}\n", 2, `unknown fault "meltdown"`},
		{"fault without kind", "rules:\n  - text: a\n    fault: {retry_after: 1s}\n", 3, "needs a kind"},
		{"fault never fires", "faults:\n  - {kind: overloaded}\n", 2, "never fires"},
		{"rate out of range", "faults:\n  - {kind: overloaded, rate: 1.5}\n", 2, "0..1"},
		{"on_request zero", "faults:\n  - {kind: overloaded, on_request: [0]}\n", 2, "1.."},
		{"turn range reversed", "rules:\n  - match: {turn: \"4-2\"}\n    text: a\n", 2, "turn"},
		{"turn zero", "rules:\n  - match: {turn: 0}\n    text: a\n", 2, "turn"},
		{"turn word", "rules:\n  - match: {turn: first}\n    text: a\n", 2, "turn"},
		{"times zero", "rules:\n  - times: 0\n    text: a\n", 2, "times"},
		{"repeat too big", "rules:\n  - tool_calls: [{name: a, repeat: 5000}]\n", 2, "repeat"},
		{"tool call without name", "rules:\n  - tool_calls:\n      - input: {a: 1}\n", 3, "needs a name"},
		{"input and raw_input", "rules:\n  - tool_calls:\n      - name: a\n        input: {x: 1}\n        raw_input: '{\"x\"'\n", 5, "both input and raw_input"},
		{"raw_input not a string", "rules:\n  - tool_calls: [{name: a, raw_input: {x: 1}}]\n", 2, "raw_input must be a string"},
		{"input not a mapping", "rules:\n  - tool_calls: [{name: a, input: [1, 2]}]\n", 2, "must be a mapping"},
		{"input infinity", "rules:\n  - tool_calls: [{name: a, input: {x: .inf}}]\n", 2, "infinity"},
		{"tool_error not bool", "rules:\n  - match: {tool_error: \"yes\"}\n    text: a\n", 2, "true or false"},
		{"tools not a list", "rules:\n  - match: {tools: glob}\n    text: a\n", 2, "must be a list"},
		{"rule answers nothing", "rules:\n  - match: {turn: 1}\n", 2, "answers nothing"},
		{"unknown alias", "rules:\n  - text: *nope\n", 2, "alias"},
		{"usage negative", "rules:\n  - text: a\n    usage: {input_tokens: -1}\n", 3, "input_tokens"},
		{"empty stop reason", "rules:\n  - text: a\n    stop_reason: \"\"\n", 3, "stop_reason"},
		{"seed not a number", "seed: lots\n", 1, "seed must be an integer"},
		{"seed too big", "seed: 18446744073709551615\n", 1, "out of range"},
		{"rules not a list", "rules: {text: a}\n", 1, "must be a list"},
		{"scenario not a mapping", "- text: a\n", 1, "must be a mapping"},
		{"text is a mapping", "default:\n  text: {a: 1}\n", 2, "must be a string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseScenario([]byte(c.src), "t.yaml")
			var se *ScenarioError
			if !errors.As(err, &se) {
				t.Fatalf("want *ScenarioError, got %v", err)
			}
			if se.File != "t.yaml" || se.Line != c.line {
				t.Errorf("at %s:%d, want t.yaml:%d (%v)", se.File, se.Line, c.line, err)
			}
			if !strings.HasPrefix(err.Error(), "t.yaml:") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

func TestParseEmpty(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"", "# just a comment\n", "---\n"} {
		if _, err := ParseScenario([]byte(src), "e.yaml"); err == nil || !strings.Contains(err.Error(), "e.yaml: empty scenario") {
			t.Errorf("%q: %v", src, err)
		}
	}
	// A scenario of only a default is fine, and so is a name alone: it
	// answers DefaultText.
	s := mustParse(t, "name: quiet\n")
	if got := onlyText(t, s.Respond(atTurn("x", 1), RequestInfo{N: 1})); got != DefaultText {
		t.Errorf("%q", got)
	}
	if s.Name() != "quiet" {
		t.Errorf("name %q", s.Name())
	}
	if s := mustParse(t, "seed: 1\n"); s.Name() != "t" {
		t.Errorf("name from file: %q", s.Name())
	}
}

func TestNilScenarioAnswersDefaultText(t *testing.T) {
	t.Parallel()
	var s *Scenario
	r := s.Respond(atTurn("x", 1), RequestInfo{N: 1})
	if onlyText(t, r) != DefaultText || r.StopReason != "" {
		t.Errorf("%+v", r)
	}
	// A nil request is an empty conversation, not a crash.
	if r := mustParse(t, "default: {text: \"t{{.Turn}}\"}\n").Respond(nil, RequestInfo{}); onlyText(t, r) != "t1" {
		t.Errorf("%+v", r)
	}
}

var toolIDPattern = regexp.MustCompile(`^(toolu|call)_[0-9A-Za-z]{24}$`)

func TestToolIDsDeterministic(t *testing.T) {
	t.Parallel()
	src := "rules:\n  - tool_calls: [{name: a, repeat: 3}, {name: b}]\n"
	s1, s2 := mustParse(t, src), mustParse(t, src)
	ids := func(s *Scenario, req *llm.Request, p Provider, n int) []string {
		var out []string
		for _, b := range s.Respond(req, RequestInfo{Provider: p, N: n}).Content {
			out = append(out, b.ID)
		}
		return out
	}
	a := ids(s1, atTurn("task one", 1), Anthropic, 1)
	// Same conversation: same IDs, whatever the request number or the
	// Scenario value.
	if b := ids(s2, atTurn("task one", 1), Anthropic, 99); strings.Join(a, ",") != strings.Join(b, ",") {
		t.Errorf("not deterministic: %v vs %v", a, b)
	}
	seen := map[string]bool{}
	for _, id := range a {
		if !toolIDPattern.MatchString(id) || !strings.HasPrefix(id, "toolu_") {
			t.Errorf("bad id %q", id)
		}
		if seen[id] {
			t.Errorf("duplicate id %q", id)
		}
		seen[id] = true
	}
	for _, id := range ids(s1, atTurn("task one", 1), OpenAI, 1) {
		if !strings.HasPrefix(id, "call_") || !toolIDPattern.MatchString(id) {
			t.Errorf("openai id %q", id)
		}
	}
	if id := ids(s1, atTurn("task one", 1), InProcess, 1)[0]; id != a[0] {
		t.Errorf("in-process id %q, want the Anthropic form %q", id, a[0])
	}
	// Another task, another turn or another seed: other IDs.
	for name, other := range map[string][]string{
		"task": ids(s1, atTurn("task two", 1), Anthropic, 1),
		"turn": ids(s1, atTurn("task one", 2), Anthropic, 1),
		"seed": ids(mustParse(t, "seed: 9\n"+src), atTurn("task one", 1), Anthropic, 1),
	} {
		for _, id := range other {
			if seen[id] {
				t.Errorf("%s: id %q repeats", name, id)
			}
		}
	}
}

// TestDocsExamplesParse keeps the YAML in docs/scenarios.md loadable:
// whole scenarios as they are, rule fragments inside a rules list.
func TestDocsExamplesParse(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 6 {
		t.Fatalf("found %d YAML examples", len(blocks))
	}
	for _, b := range blocks {
		src := b[1]
		switch {
		case strings.HasPrefix(src, "  - "):
			src = "rules:\n" + src
		case strings.HasPrefix(src, "tool_calls:"):
			src = "rules:\n  - " + strings.ReplaceAll(strings.TrimSuffix(src, "\n"), "\n", "\n    ") + "\n"
		}
		if _, err := ParseScenario([]byte(src), "docs/scenarios.md"); err != nil {
			t.Errorf("%v in:\n%s", err, src)
		}
	}
}

// TestHostileShapesFailFast covers inputs on which the YAML parser would
// take minutes (it is quadratic in nesting and in keys per mapping): they
// are refused from the tokens, with a position.
func TestHostileShapesFailFast(t *testing.T) {
	t.Parallel()
	var keys strings.Builder
	for i := range maxMappingKeys + 1 {
		keys.WriteString("k" + strconv.Itoa(i) + ": v\n")
	}
	cases := []struct{ name, src, want string }{
		{"deep flow", "x-a: " + strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000), "nested more than"},
		{"deep flow mapping", "x-a: " + strings.Repeat("{b: ", 10_000) + "1" + strings.Repeat("}", 10_000), "nested more than"},
		{"deep block", strings.Repeat("- ", 20_000) + "x", "columns deep"},
		{"many keys", keys.String(), "more than 10000 keys"},
		{"huge", "x-a: \"" + strings.Repeat("a", maxScenarioBytes) + "\"", "more than a scenario may have"},
	}
	for _, c := range cases {
		_, err := ParseScenario([]byte(c.src), "h.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "h.yaml") {
			t.Errorf("%s: %.200v", c.name, err)
		}
	}
	// Many keys spread over many mappings are fine.
	var rules strings.Builder
	rules.WriteString("rules:\n")
	for range 3000 {
		rules.WriteString("  - match: {turn: 1}\n    name: r\n    text: hi\n    times: 1\n")
	}
	if _, err := ParseScenario([]byte(rules.String()), "ok.yaml"); err != nil {
		t.Error(err)
	}
}

// TestDocCommentExampleParses keeps the format summary on Scenario honest.
func TestDocCommentExampleParses(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("scenario.go")
	if err != nil {
		t.Fatal(err)
	}
	var yaml strings.Builder
	for _, line := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(line, "//\t"); ok {
			yaml.WriteString(rest + "\n")
		}
	}
	if yaml.Len() < 500 {
		t.Fatalf("no example found:\n%s", yaml.String())
	}
	if _, err := ParseScenario([]byte(yaml.String()), "scenario.go"); err != nil {
		t.Errorf("%v\n%s", err, yaml.String())
	}
}

// TestRawInput: raw_input is the arguments text as sent, JSON or not, a
// template like text; llm.ToolCall sorts it as a provider would.
func TestRawInput(t *testing.T) {
	t.Parallel()
	s, err := ParseScenario([]byte(`
rules:
  - tool_calls:
      - {name: bash, raw_input: '{"command": "echo {{.I}}"', repeat: 2}
      - {name: bash, raw_input: '{"command": "ok"}'}
`), "raw.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := NewModel(s, WithoutLatency()).Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText("go")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Message().ToolUses()
	if len(c) != 3 || c[0].InvalidInput != `{"command": "echo 1"` || c[1].InvalidInput != `{"command": "echo 2"` ||
		len(c[0].Input) != 0 || string(c[2].Input) != `{"command": "ok"}` || c[2].InvalidInput != "" {
		t.Fatalf("calls %+v", c)
	}
}
