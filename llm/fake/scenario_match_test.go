package fake

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

func TestMatchConditions(t *testing.T) {
	t.Parallel()
	// The request every case starts from: turn 2, a tool result that
	// failed, a user note next to it.
	base := func() *llm.Request {
		return &llm.Request{
			Model:  "claude-sonnet-x",
			System: "You are a careful reviewer.",
			Tools:  tools("glob", "read_file"),
			Messages: []llm.Message{
				llm.UserText("Audit the parser"),
				{Role: llm.Assistant, Content: []llm.Block{
					llm.ToolUse("toolu_a", "glob", json.RawMessage(`{}`)),
					llm.ToolUse("toolu_b", "read_file", json.RawMessage(`{}`))}},
				{Role: llm.User, Content: []llm.Block{
					llm.ToolResult("toolu_a", "main.go\nparse.go", false),
					llm.ToolResult("toolu_b", "permission denied", true),
					llm.Text("also check the lexer")}},
			},
		}
	}
	cases := []struct {
		match string
		want  bool
	}{
		{`{}`, true},
		{`{system: "careful rev"}`, true},
		{`{system: "^You are a careful"}`, true},
		{`{system: "sloppy"}`, false},
		{`{model: "^claude-"}`, true},
		{`{model: "^gpt"}`, false},
		{`{last_user: "lexer"}`, true},
		{`{last_user: "(?i)AUDIT"}`, false}, // the task is not the last user message
		{`{tool_result: "parse\\.go"}`, true},
		{`{tool_result: "denied$"}`, true},
		{`{tool_result: "lexer"}`, false}, // text blocks are not tool results
		{`{tool_error: true}`, true},
		{`{tool_error: false}`, false},
		{`{turn: 2}`, true},
		{`{turn: 1}`, false},
		{`{turn: "2"}`, true},
		{`{turn: "1-3"}`, true},
		{`{turn: "3-5"}`, false},
		{`{turn: "2-"}`, true},
		{`{turn: "3-"}`, false},
		{`{tools: [glob]}`, true},
		{`{tools: [glob, read_file]}`, true},
		{`{tools: [glob, bash]}`, false},
		{`{tools: []}`, true},
		// Conditions are ANDed.
		{`{turn: 2, tools: [glob], tool_error: true, system: reviewer, model: claude, last_user: lexer, tool_result: main}`, true},
		{`{turn: 2, tools: [glob], tool_error: true, system: reviewer, model: gpt}`, false},
	}
	for _, c := range cases {
		s := mustParse(t, "rules:\n  - match: "+c.match+"\n    text: hit\ndefault: {text: miss}\n")
		got := onlyText(t, s.Respond(base(), RequestInfo{N: 1})) == "hit"
		if got != c.want {
			t.Errorf("match %s: got %v, want %v", c.match, got, c.want)
		}
	}

	// Without an error result, tool_error: false matches; a first turn has
	// no last-user tool results at all.
	s := mustParse(t, "rules:\n  - match: {tool_error: false}\n    text: hit\n  - match: {tool_result: \".\"}\n    text: other\ndefault: {text: miss}\n")
	if got := onlyText(t, s.Respond(atTurn("x", 1), RequestInfo{N: 1})); got != "hit" {
		t.Errorf("tool_error false on turn 1: %q", got)
	}
	// A request with no user message at all matches only what needs none.
	s = mustParse(t, "rules:\n  - match: {last_user: \"x\"}\n    text: hit\n  - match: {last_user: \"^$\"}\n    text: empty\n")
	if got := onlyText(t, s.Respond(&llm.Request{}, RequestInfo{N: 1})); got != "empty" {
		t.Errorf("no messages: %q", got)
	}
}

func TestMatchFirstRuleWins(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
rules:
  - match: {turn: 2}
    text: second-turn
  - match: {tools: [glob]}
    text: glob-offered
  - text: anything
`)
	req := atTurn("x", 1)
	req.Tools = tools("glob")
	if got := onlyText(t, s.Respond(req, RequestInfo{N: 1})); got != "glob-offered" {
		t.Errorf("turn 1: %q", got)
	}
	req = atTurn("x", 2)
	req.Tools = tools("glob")
	if got := onlyText(t, s.Respond(req, RequestInfo{N: 2})); got != "second-turn" {
		t.Errorf("turn 2: %q", got)
	}
	if got := onlyText(t, s.Respond(atTurn("x", 3), RequestInfo{N: 3})); got != "anything" {
		t.Errorf("turn 3: %q", got)
	}
}

func TestTimesFallsThrough(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
rules:
  - times: 2
    text: limited
  - text: after
`)
	var got []string
	for n := 1; n <= 4; n++ {
		got = append(got, onlyText(t, s.Respond(atTurn("x", 1), RequestInfo{N: n})))
	}
	if want := "limited limited after after"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
}

func TestTimesUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
rules:
  - times: 37
    text: limited
  - text: after
`)
	const workers, each = 16, 25
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			local := map[string]int{}
			for i := range each {
				r := s.Respond(atTurn("x", 1), RequestInfo{N: w*each + i + 1})
				local[r.Content[0].Text]++
			}
			mu.Lock()
			for k, v := range local {
				counts[k] += v
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts["limited"] != 37 || counts["after"] != workers*each-37 {
		t.Errorf("counts %v", counts)
	}
}

func TestScenarioFaults(t *testing.T) {
	t.Parallel()
	src := `
seed: 11
faults:
  - {kind: rate_limit, rate: 0.3, retry_after: 2s}
  - {kind: overloaded, on_request: [4, 9]}
rules:
  - text: ok
`
	hits := func(s *Scenario) map[int]FaultKind {
		out := map[int]FaultKind{}
		for n := 1; n <= 2000; n++ {
			if f := s.Respond(atTurn("x", 1), RequestInfo{N: n}).Fault; f != nil {
				out[n] = f.Kind
			}
		}
		return out
	}
	a, b := hits(mustParse(t, src)), hits(mustParse(t, src))
	if len(a) != len(b) {
		t.Fatalf("not deterministic: %d vs %d faults", len(a), len(b))
	}
	for n, k := range a {
		if b[n] != k {
			t.Fatalf("request %d: %s vs %s", n, k, b[n])
		}
	}
	// Requests 4 and 9 always fail (rate_limit may take them first, being
	// listed first); the rate is near 30%.
	for _, n := range []int{4, 9} {
		if a[n] == "" {
			t.Errorf("request %d did not fail", n)
		}
	}
	rate := 0
	for _, k := range a {
		if k == FaultRateLimit {
			rate++
		}
	}
	if rate < 500 || rate > 700 {
		t.Errorf("rate_limit on %d of 2000 requests, want about 600", rate)
	}
	// Another seed picks other requests.
	c := hits(mustParse(t, "seed: 12\n"+src[len("\nseed: 11\n"):]))
	same := 0
	for n, k := range a {
		if c[n] == k {
			same++
		}
	}
	if same == len(a) {
		t.Error("seed does not change which requests fail")
	}
}

func TestScenarioFaultDoesNotUseUpTimes(t *testing.T) {
	t.Parallel()
	// The faulted request 1 carries the content it would have had, and its
	// retry (request 2) gets that same rule, which then is used up.
	s := mustParse(t, `
faults:
  - {kind: overloaded, on_request: [1]}
rules:
  - times: 1
    text: first
  - text: second
`)
	r1 := s.Respond(atTurn("x", 1), RequestInfo{N: 1})
	r2 := s.Respond(atTurn("x", 1), RequestInfo{N: 2})
	r3 := s.Respond(atTurn("x", 1), RequestInfo{N: 3})
	if r1.Fault == nil || r1.Fault.Kind != FaultOverloaded || onlyText(t, r1) != "first" {
		t.Errorf("request 1: %+v", r1)
	}
	if r2.Fault != nil || onlyText(t, r2) != "first" || onlyText(t, r3) != "second" {
		t.Errorf("requests 2, 3: %+v %+v", r2, r3)
	}

	// A rule's own fault does use it up: the retry gets the next rule.
	s, err := LoadScenario("testdata/scenarios/faults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r1 = s.Respond(atTurn("x", 1), RequestInfo{N: 1})
	r2 = s.Respond(atTurn("x", 1), RequestInfo{N: 2}) // scenario server_error
	r3 = s.Respond(atTurn("x", 1), RequestInfo{N: 3})
	if r1.Fault == nil || r1.Fault.Kind != FaultRateLimit || r1.Fault.RetryAfter.Seconds() != 1 {
		t.Errorf("request 1: %+v", r1.Fault)
	}
	if r2.Fault == nil || r2.Fault.Kind != FaultServerError || onlyText(t, r2) != "after the retry" {
		t.Errorf("request 2: %+v", r2)
	}
	if r3.Fault != nil || onlyText(t, r3) != "after the retry" {
		t.Errorf("request 3: %+v", r3)
	}
}

func TestLiteralPatternsSkipRegexp(t *testing.T) {
	t.Parallel()
	lit, err := compileTextMatch("careful reviewer")
	if err != nil || !lit.isLit || lit.re != nil {
		t.Errorf("literal compiled as %+v, %v", lit, err)
	}
	re, err := compileTextMatch("care+ful")
	if err != nil || re.isLit || re.re == nil || !re.match("a careeeful one") {
		t.Errorf("regexp compiled as %+v, %v", re, err)
	}
}

// An anchored pattern is Go's complete literal too, but not a substring
// test: ^small$ names small alone.
func TestAnchoredLiteralIsNotASubstring(t *testing.T) {
	t.Parallel()
	for pattern, cases := range map[string]map[string]bool{
		"^small$":   {"small": true, "not-small-at-all": false, "smaller": false},
		`\Asmall\z`: {"small": true, "a small one": false},
		`gpt-5\.6`:  {"gpt-5.6-terra": true, "gpt-5x6": false},
	} {
		m, err := compileTextMatch(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for s, want := range cases {
			if got := m.match(s); got != want {
				t.Errorf("%q matching %q = %v, want %v", pattern, s, got, want)
			}
		}
	}
	if m, _ := compileTextMatch(`gpt-5\.6`); !m.isLit {
		t.Error(`gpt-5\.6 is a literal and should take the substring path`)
	}
}
