package agent_test

// End-to-end tests of subagents: a root agent and its children run the real
// loop and real tools against deputy's fake model server over loopback HTTP,
// once through the Anthropic provider and once through the OpenAI one. What
// the children were sent is checked in the server's request log.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/anthropic"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/providertest"
	"github.com/deputy-run/deputy/llm/retry"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
)

// wire is a provider the e2e tests run through.
type wire struct {
	name string
	open func(root string) (llm.Model, error)
}

func wires() []wire {
	policy := func() *retry.Policy {
		p := retry.Default()
		p.BaseDelay, p.StallTimeout, p.MaxAttempts = 0, 0, 2
		p.Clock = clock.NewInstant()
		return &p
	}
	return []wire{
		{"anthropic", func(root string) (llm.Model, error) {
			return anthropic.New("fake-model", anthropic.Options{APIKey: "k", BaseURL: root, Retry: policy()})
		}},
		{"openai", func(root string) (llm.Model, error) {
			return openai.New("fake-model", openai.Options{APIKey: "k", BaseURL: root + "/v1", Retry: policy()})
		}},
	}
}

// env is one test's world: a scenario served over HTTP, a workspace with
// the built-in tools, and a runner.
type env struct {
	t      *testing.T
	srv    *fake.Server
	model  llm.Model
	clk    *clock.Fake // nil unless the test drives time
	ws     string
	tools  *tool.Set
	runner *agent.Runner

	mu     sync.Mutex
	events []agent.Event
}

type envOption func(*envConfig)

type envConfig struct {
	clock *clock.Fake
	extra []tool.Tool
}

func withClock(c *clock.Fake) envOption { return func(e *envConfig) { e.clock = c } }
func withTools(t ...tool.Tool) envOption {
	return func(e *envConfig) { e.extra = append(e.extra, t...) }
}

func newEnv(t *testing.T, w wire, scenario string, opts ...envOption) *env {
	t.Helper()
	var cfg envConfig
	for _, o := range opts {
		o(&cfg)
	}
	s, err := fake.ParseScenario([]byte(scenario), t.Name()+".yaml")
	if err != nil {
		t.Fatalf("scenario: %v", err)
	}
	fo := fake.Options{Responder: s, MinCacheTokens: 256}
	if cfg.clock != nil {
		fo.Clock = cfg.clock
	}
	srv, root := providertest.StartServer(t, fo)
	model, err := w.open(root)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	for name, body := range map[string]string{"a.txt": "alpha\n", "b.txt": "beta\n", "notes.md": "# notes\nTODO: check\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bt := builtin.Config{Workspace: ws}
	if cfg.clock != nil {
		bt.Clock = cfg.clock
	}
	tools, err := builtin.Tools(bt)
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(append(tools, cfg.extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv, model: model, clk: cfg.clock, ws: ws, tools: set}
	e.runner = &agent.Runner{OnEvent: e.record}
	if cfg.clock != nil {
		e.runner.Clock = cfg.clock
	}
	return e
}

func (e *env) record(ev agent.Event) {
	if ev.Kind == agent.EventStep && ev.Loop.Kind == loop.EventModelDelta {
		return
	}
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
}

func (e *env) task(text string) agent.Task {
	return agent.Task{Task: text, System: "You are the root agent of an e2e test.", Model: e.model,
		ModelName: "fake-model", Tools: e.tools}
}

// run runs the task to its end (in the background when the test drives
// the clock, so the test can advance it).
func (e *env) run(t agent.Task) (*agent.Outcome, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return e.runner.Run(ctx, t)
}

// start runs the task in the background; wait collects the result.
func (e *env) start(t agent.Task) (wait func() (*agent.Outcome, error)) {
	type result struct {
		o   *agent.Outcome
		err error
	}
	ch := make(chan result, 1)
	go func() {
		o, err := e.run(t)
		ch <- result{o, err}
	}()
	return func() (*agent.Outcome, error) {
		select {
		case r := <-ch:
			return r.o, r.err
		case <-time.After(60 * time.Second):
			e.t.Fatal("the run did not end")
			return nil, nil
		}
	}
}

// waitPending waits until n timers wait on the test clock.
func (e *env) waitPending(n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.clk.WaitPending(ctx, n); err != nil {
		e.t.Fatalf("waiting for %d pending timers (have %d): %v", n, e.clk.Pending(), err)
	}
}

// requests returns the logged requests whose system prompt matches re.
func (e *env) requests(re string) []fake.LoggedRequest {
	var out []fake.LoggedRequest
	rx := regexp.MustCompile(re)
	for _, r := range e.srv.Requests() {
		if r.Request != nil && rx.MatchString(r.Request.System) {
			out = append(out, r)
		}
	}
	return out
}

func children(o *agent.Outcome) []instance.Record { return o.Instances[1:] }

func forWires(t *testing.T, f func(t *testing.T, w wire)) {
	for _, w := range wires() {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			f(t, w)
		})
	}
}

func toolNames(specs []llm.ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

func toolResults(m llm.Message) []llm.Block {
	var out []llm.Block
	for _, b := range m.Content {
		if b.Type == llm.TypeToolResult {
			out = append(out, b)
		}
	}
	return out
}

// resultsOfTurn returns the tool results the root got for its turn n.
func resultsOfTurn(t *testing.T, o *agent.Outcome, n int) []llm.Block {
	t.Helper()
	turn := 0
	for i, m := range o.Result.Messages {
		if m.Role == llm.Assistant {
			if turn++; turn == n && i+1 < len(o.Result.Messages) {
				return toolResults(o.Result.Messages[i+1])
			}
		}
	}
	t.Fatalf("no tool results for turn %d", n)
	return nil
}

const fanOutScenario = `
latency: {first_byte: 1s}
rules:
  - match: {system: "read-only explorer", turn: 1}
    tool_calls: [{name: glob, input: {pattern: "*.txt"}}]
  - match: {system: "read-only explorer", turn: 2}
    text: "Conclusion: {{lines (.Result \"glob\")}} text files seen for {{.Task}}."
  - match: {turn: 1}
    text: "Three explorers, in parallel."
    tool_calls:
      - name: spawn_subagent
        repeat: 3
        input: {subagent_type: explorer, task: "survey part {{.I}}", description: "part {{.I}}"}
  - match: {turn: 2}
    text: "Merged:{{range .ToolResults}}\n- {{.}}{{end}}"
`

func TestE2EParallelExplorers(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnv(t, w, fanOutScenario, withClock(clk))
		wait := e.start(e.task("survey the workspace"))

		e.waitPending(1) // the root's first call
		clk.Advance(time.Second)
		// Three children waiting for their first response at once is
		// the proof they run in parallel: one at a time, only one would.
		for range 2 {
			e.waitPending(3)
			clk.Advance(time.Second)
		}
		e.waitPending(1) // the root's second call
		clk.Advance(time.Second)
		o, err := wait()
		if err != nil {
			t.Fatal(err)
		}
		if o.Result.StopReason != loop.StopCompleted || len(o.Instances) != 4 {
			t.Fatalf("stop %s, %d instances", o.Result.StopReason, len(o.Instances))
		}
		// Reports come back in call order, each bounded and complete.
		res := resultsOfTurn(t, o, 1)
		for i, r := range res {
			want := "2 text files seen for survey part " + string(rune('1'+i))
			if r.IsError || !strings.Contains(r.Text, want) || !strings.Contains(r.Text, "(explorer): completed") {
				t.Errorf("result %d = %q, want it to hold %q", i, r.Text, want)
			}
		}
		if !strings.Contains(o.Result.Answer, "survey part 3") {
			t.Errorf("the root's answer does not merge the reports: %q", o.Result.Answer)
		}
		var sum llm.Usage
		for _, c := range children(o) {
			if c.Type != "explorer" || c.Depth != 1 || c.Parent != o.Instances[0].ID || c.State != instance.Completed || c.Turns != 2 {
				t.Errorf("child %+v", c)
			}
			sum.Add(c.Usage)
		}
		sum.Add(o.Instances[0].Usage)
		if sum != o.Usage || o.Usage.Total() == 0 {
			t.Errorf("usage does not roll up: %+v vs %+v", sum, o.Usage)
		}
		// The children were offered only their read-only tools: no spawn,
		// no writes, no shell.
		reqs := e.requests("read-only explorer")
		if len(reqs) != 6 {
			t.Fatalf("%d explorer requests, want 6", len(reqs))
		}
		got := strings.Join(toolNames(reqs[0].Request.Tools), ",")
		if got != "read_file,glob,grep,web_fetch" {
			t.Errorf("explorer tools = %s", got)
		}
		if m := reqs[0].Request.Messages; len(m) != 1 || !strings.HasPrefix(m[0].Text(), "survey part") {
			t.Errorf("an isolated child must start with only its task: %+v", m)
		}
	})
}

// forkScenario: the root reads a file, then in one turn reads another and
// forks a fixer. The fixer tries a tool outside its allowlist, tries to
// spawn (depth), edits a file, and reports.
const forkScenario = `
rules:
  - match: {last_user: "forked from this conversation"}
    text: "Trying web_fetch first."
    tool_calls:
      - {name: web_fetch, input: {url: "http://example.invalid/"}}
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "nested"}}
  - match: {tool_result: "not allowed here"}
    tool_calls: [{name: edit_file, input: {path: a.txt, old: alpha, new: ALPHA}}]
  - match: {tool_result: "(?i)edited|replaced"}
    text: "Conclusion: a.txt now says ALPHA."
  - match: {turn: 1}
    tool_calls: [{name: read_file, input: {path: notes.md}}]
  - match: {turn: 2}
    text: "Reading b.txt while a fixer edits a.txt."
    tool_calls:
      - {name: read_file, input: {path: b.txt}}
      - {name: spawn_subagent, input: {subagent_type: fixer, task: "Uppercase alpha in a.txt.", description: "fix a.txt"}}
  - match: {turn: 3}
    text: "done"
`

func TestE2EForkChild(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		e := newEnv(t, w, forkScenario)
		o, err := e.run(e.task("fix the workspace"))
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Instances) != 2 {
			t.Fatalf("%d instances", len(o.Instances))
		}
		fixer := o.Instances[1]
		if fixer.Mode != string(agentdef.ModeFork) || fixer.State != instance.Completed || len(fixer.Artifacts) != 1 || fixer.Artifacts[0] != "a.txt" {
			t.Fatalf("fixer %+v", fixer)
		}
		if b, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(b) != "ALPHA\n" {
			t.Errorf("a.txt = %q", b)
		}
		res := resultsOfTurn(t, o, 2)
		if len(res) != 2 || res[0].IsError || res[1].IsError || !strings.Contains(res[1].Text, "a.txt now says ALPHA") ||
			!strings.Contains(res[1].Text, "artifacts: a.txt") {
			t.Fatalf("turn 2 results: %+v", res)
		}

		// The child's first request repeats the parent's second request
		// byte for byte (cache markers aside): system, tools, and every
		// message the parent sent.
		reqs := e.srv.Requests()
		parent, child := reqs[1], reqs[2]
		if !strings.Contains(child.Request.Messages[len(child.Request.Messages)-1].Text(), "forked from this conversation") {
			t.Fatalf("request 3 is not the fork child's: %s", child.Body)
		}
		pf, cf := bodyFields(t, parent.Body), bodyFields(t, child.Body)
		for _, k := range []string{"model", "system", "tools"} {
			if string(pf[k]) != string(cf[k]) {
				t.Errorf("%s differs:\nparent %s\nchild  %s", k, pf[k], cf[k])
			}
		}
		pm, cm := rawList(t, pf["messages"]), rawList(t, cf["messages"])
		if len(cm) <= len(pm) {
			t.Fatalf("child has %d messages, parent %d; want the parent's plus the spawning turn and the task", len(cm), len(pm))
		}
		for i := range pm {
			if string(pm[i]) != string(cm[i]) {
				t.Errorf("message %d differs:\nparent %s\nchild  %s", i, pm[i], cm[i])
			}
		}
		// The spawning turn keeps its text and the sibling read_file call,
		// which gets a placeholder result; the spawn call itself is gone.
		msgs := child.Request.Messages
		turn, task := msgs[len(msgs)-2], msgs[len(msgs)-1]
		uses := turn.ToolUses()
		if turn.Text() != "Reading b.txt while a fixer edits a.txt." || len(uses) != 1 || uses[0].Name != "read_file" {
			t.Errorf("spawning turn in the child: %+v", turn)
		}
		if tr := toolResults(task); len(tr) != 1 || tr[0].ToolUseID != uses[0].ID || tr[0].Text != agent.ForkPlaceholder {
			t.Errorf("sibling placeholder: %+v", tr)
		}
		// A disallowed tool and a spawn beyond the depth were refused as
		// tool errors, and nothing was fetched.
		refusals := toolResults(e.srv.Requests()[3].Request.Messages[len(e.srv.Requests()[3].Request.Messages)-1])
		if len(refusals) != 2 || !strings.Contains(refusals[0].Text, "web_fetch is not allowed here") ||
			!strings.Contains(refusals[1].Text, "spawn_subagent is not allowed here") {
			t.Errorf("refusals: %+v", refusals)
		}
	})
}

// bodyFields splits a request body into its top-level fields, with the
// prompt-cache markers removed: they move with every request by design and
// are not part of the cached content.
func bodyFields(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	clean := cacheMarker.ReplaceAll(body, nil)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(clean, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

var cacheMarker = regexp.MustCompile(`,"cache_control":\{[^}]*\}`)

func rawList(t *testing.T, raw json.RawMessage) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

const refusalScenario = `
rules:
  - match: {system: "nested spawner"}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: explorer, task: "grandchild"}}]
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: reviewer, task: "review it", mode: fork}}
      - {name: spawn_subagent, input: {subagent_type: fixer, task: "fix it", model: "anthropic:other"}}
      - {name: spawn_subagent, input: {subagent_type: nope, task: "x"}}
      - {name: spawn_subagent, input: {subagent_type: spawner, task: "go deeper"}}
  - match: {turn: 2}
    text: "done"
`

func TestE2ERefusals(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		e := newEnv(t, w, refusalScenario)
		task := e.task("refusals")
		task.Volatile = []*agentdef.Definition{{Name: "spawner", Description: "tries to spawn",
			SystemPrompt: "You are a nested spawner.", Tools: []string{agentdef.SpawnTool, "read_file"}, MaxTurns: 2}}
		o, err := e.run(task)
		if err != nil {
			t.Fatal(err)
		}
		res := resultsOfTurn(t, o, 1)
		wants := []string{
			"reviewer always runs isolated (its mode is pinned)",
			"a fork child runs on the parent's model",
			`unknown subagent_type "nope"`,
		}
		for i, want := range wants {
			if !res[i].IsError || !strings.Contains(res[i].Text, want) {
				t.Errorf("result %d = %q, want an error with %q", i, res[i].Text, want)
			}
		}
		// The spawner ran (it was allowed to start) but, at max_depth, was
		// not offered the spawn tool it lists: its call was an error it
		// saw, not a silent drop.
		if len(o.Instances) != 2 || o.Instances[1].Type != "spawner" {
			t.Fatalf("instances: %+v", o.Instances)
		}
		reqs := e.requests("nested spawner")
		if len(reqs) != 2 {
			t.Fatalf("%d spawner requests", len(reqs))
		}
		last := reqs[1].Request.Messages
		tr := toolResults(last[len(last)-1])
		if len(tr) != 1 || !strings.Contains(tr[0].Text, `unknown tool "spawn_subagent"`) {
			t.Errorf("depth refusal: %+v", tr)
		}
	})
}

// holdTool blocks until released, and records how many calls hold at once.
type holdTool struct {
	mu      sync.Mutex
	now     int
	most    int
	entered chan struct{}
	release chan struct{}
}

func newHold() *holdTool {
	return &holdTool{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (h *holdTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "hold", Description: "test: holds the workspace", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (h *holdTool) ReadOnly() bool { return false }
func (h *holdTool) Run(ctx context.Context, _ json.RawMessage) (string, error) {
	h.mu.Lock()
	h.now++
	h.most = max(h.most, h.now)
	h.mu.Unlock()
	h.entered <- struct{}{}
	defer func() { h.mu.Lock(); h.now--; h.mu.Unlock() }()
	select {
	case <-h.release:
		return "held", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

const writersScenario = `
rules:
  - match: {system: "writer", turn: 1}
    tool_calls: [{name: hold, input: {}}]
  - match: {system: "writer", turn: 2}
    text: "wrote"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, repeat: 2, input: {subagent_type: writer, task: "write {{.I}}"}}
  - match: {turn: 2}
    text: "done"
`

func TestE2EWritersTakeTurns(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		hold := newHold()
		e := newEnv(t, w, writersScenario, withTools(hold))
		task := e.task("two writers")
		task.Volatile = []*agentdef.Definition{{Name: "writer", Description: "writes", SystemPrompt: "You are a writer.",
			Tools: []string{"hold", "write_file"}}}
		wait := e.start(task)

		<-hold.entered // one writer holds the workspace
		// The other one must be queued for its turn to write, never inside.
		e.awaitQueued(t, "its turn to write")
		hold.release <- struct{}{}
		<-hold.entered
		hold.release <- struct{}{}
		o, err := wait()
		if err != nil {
			t.Fatal(err)
		}
		if hold.most != 1 {
			t.Errorf("%d writers held the workspace at once", hold.most)
		}
		if len(o.Instances) != 3 || o.Instances[1].State != instance.Completed || o.Instances[2].State != instance.Completed {
			t.Errorf("instances %+v", o.Instances)
		}
	})
}

// awaitQueued waits for an EventQueued naming why.
func (e *env) awaitQueued(t *testing.T, why string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		for _, ev := range e.events {
			if ev.Kind == agent.EventQueued && ev.Waiting == why {
				e.mu.Unlock()
				return
			}
		}
		e.mu.Unlock()
		time.Sleep(time.Millisecond) // polling an event log, not timing anything
	}
	t.Fatalf("no child queued for %q", why)
}

// sleepTool waits on the test clock, like a long build.
type sleepTool struct{ clk clock.Clock }

func (s sleepTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "slow", Description: "test: takes d seconds",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"integer"}},"required":["s"]}`)}
}
func (s sleepTool) ReadOnly() bool { return true }
func (s sleepTool) Run(ctx context.Context, in json.RawMessage) (string, error) {
	var a struct{ S int }
	_ = json.Unmarshal(in, &a)
	if err := clock.Sleep(ctx, s.clk, time.Duration(a.S)*time.Second); err != nil {
		return "", err
	}
	return "slept", nil
}

const timeoutScenario = `
rules:
  - match: {system: "slowpoke", last_user: "Time is almost up"}
    latency: {first_byte: 5s}
    text: "never sent"
  - match: {system: "slowpoke", turn: 1}
    text: "Partial: found the first half."
    tool_calls: [{name: slow, input: {s: 9}}]
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: slowpoke, task: "take long"}}]
  - match: {turn: 2}
    text: "root done"
`

func TestE2ESoftThenHardTimeout(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnv(t, w, timeoutScenario, withClock(clk), withTools(sleepTool{clk}))
		task := e.task("slow work")
		task.Volatile = []*agentdef.Definition{{Name: "slowpoke", Description: "slow", SystemPrompt: "You are a slowpoke.",
			Tools: []string{"slow"}, Budgets: agentdef.Budgets{WallTime: 10 * time.Second}}}
		wait := e.start(task)

		// The child's slow tool (9 s) and its hard deadline (10 s) wait on
		// the clock.
		e.waitPending(2)
		clk.Advance(9 * time.Second)
		// Past 8 s (80%): the wrap-up turn is sent; its answer takes 5 s,
		// so the hard deadline at 10 s cuts it.
		e.waitPending(2)
		clk.Advance(time.Second)
		o, err := wait()
		if err != nil {
			t.Fatal(err)
		}
		c := o.Instances[1]
		if c.State != instance.TimedOut || !c.Incomplete || c.StopReason != "wall_time" || c.Turns != 2 {
			t.Fatalf("child %+v", c)
		}
		res := resultsOfTurn(t, o, 1)
		if len(res) != 1 || res[0].IsError || !strings.Contains(res[0].Text, "timed_out, incomplete") ||
			!strings.Contains(res[0].Text, "Partial: found the first half.") {
			t.Errorf("relay %q", res[0].Text)
		}
		if reqs := e.requests("slowpoke"); len(reqs) != 2 || !strings.Contains(reqs[1].Request.Messages[len(reqs[1].Request.Messages)-1].Text(), loop.WrapUp) {
			t.Errorf("the wrap-up message was not sent once: %d requests", len(reqs))
		}
		if o.Result.StopReason != loop.StopCompleted {
			t.Errorf("the root must go on after its child's timeout: %s", o.Result.StopReason)
		}
	})
}

const failureScenario = `
rules:
  - match: {system: "doomed"}
    fault: {kind: server_error}
    text: unused
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: doomed, task: "fail"}}]
  - match: {turn: 2, tool_result: "failed"}
    text: "the child failed: {{index .ToolResults 0}}"
`

func TestE2EFailingChild(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		e := newEnv(t, w, failureScenario)
		task := e.task("doomed")
		task.Volatile = []*agentdef.Definition{{Name: "doomed", Description: "fails", SystemPrompt: "You are doomed.", Tools: []string{}}}
		o, err := e.run(task)
		if err != nil {
			t.Fatal(err)
		}
		c := o.Instances[1]
		if c.State != instance.Failed || c.Error == "" || c.StopReason != "model_error" {
			t.Fatalf("child %+v", c)
		}
		res := resultsOfTurn(t, o, 1)
		if !res[0].IsError || !strings.Contains(res[0].Text, "failed") || !strings.Contains(res[0].Text, "error: ") ||
			!strings.Contains(res[0].Text, "[no report") {
			t.Errorf("relay %q", res[0].Text)
		}
		if !strings.HasPrefix(o.Result.Answer, "the child failed") {
			t.Errorf("root answer %q", o.Result.Answer)
		}
	})
}

const longReportScenario = `
rules:
  - match: {system: "verbose", last_user: "Rewrite it within"}
    text: "Short: {{lorem 500}}"
  - match: {system: "verbose"}
    text: "{{lorem 9000}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: verbose, task: "write a lot"}}]
  - match: {turn: 2}
    text: "ok"
`

func TestE2ELongReportSummarized(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		e := newEnv(t, w, longReportScenario)
		task := e.task("long")
		task.Volatile = []*agentdef.Definition{{Name: "verbose", Description: "verbose", SystemPrompt: "You are verbose.",
			Tools: []string{}, ReportCap: 1000}}
		o, err := e.run(task)
		if err != nil {
			t.Fatal(err)
		}
		c := o.Instances[1]
		reqs := e.requests("verbose")
		if len(reqs) != 2 {
			t.Fatalf("%d child requests, want the run and one summary request", len(reqs))
		}
		if utf8.RuneCountInString(c.Report) != len("Short: ")+500 || c.Incomplete {
			t.Errorf("child %+v", c)
		}
		// The summary request's usage counts toward the child.
		var both int64
		for _, r := range reqs {
			both += int64(llm.EstimateRequest(r.Request))
		}
		if c.Usage.Prompt() != both {
			t.Errorf("child prompt tokens %d, want both requests' %d", c.Usage.Prompt(), both)
		}
		res := resultsOfTurn(t, o, 1)
		if !strings.Contains(res[0].Text, "Short: ") || strings.Contains(res[0].Text, "report cut") {
			t.Errorf("relay %q", res[0].Text)
		}
	})
}

const budgetScenario = `
rules:
  - match: {system: "spender"}
    text: "spending {{lorem 4000}}"
    tool_calls: [{name: read_file, input: {path: a.txt}}]
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: spender, task: "spend"}}]
  - match: {turn: 2}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: spender, task: "spend more"}}]
  - match: {turn: 3}
    text: "never reached"
`

func TestE2ETreeBudget(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		e := newEnv(t, w, budgetScenario)
		task := e.task("budget")
		task.Budget = agent.TreeBudget{Tokens: 5000}
		task.Volatile = []*agentdef.Definition{{Name: "spender", Description: "spends", SystemPrompt: "You are a spender.",
			Tools: []string{"read_file"}}}
		o, err := e.run(task)
		if err != nil {
			t.Fatal(err)
		}
		// Each child turn spends over 1000 output tokens: the child stops
		// at its next turn once the tree has spent 5000, and so does the
		// root.
		if len(o.Instances) != 2 {
			t.Fatalf("instances %+v", o.Instances)
		}
		c := o.Instances[1]
		if c.StopReason != "budget" || !c.Incomplete {
			t.Errorf("child %+v", c)
		}
		if o.Result.StopReason != loop.StopBudget {
			t.Errorf("root stop %s", o.Result.StopReason)
		}
		if o.Usage.Total() < 5000 || o.Usage.Total() > 5000+3000 {
			t.Errorf("tree spent %d tokens; the budget is 5000 and one call spends about 1000-2000", o.Usage.Total())
		}
	})
}

const skillScenario = `
rules:
  - match: {system: "Skills you can load", turn: 1}
    tool_calls: [{name: skill, input: {name: checklist}}]
  - match: {system: "(?s)^You are (granted|denied)", turn: 1}
    tool_calls: [{name: skill, input: {name: checklist}}]
  - match: {system: "You are (granted|denied)", turn: 2}
    text: "skill said: {{index .ToolResults 0}}"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: granted, task: "use the skill"}}
      - {name: spawn_subagent, input: {subagent_type: denied, task: "use the skill"}}
  - match: {turn: 2}
    text: "done"
`

func TestE2ESkillOnlyWhenGranted(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		e := newEnv(t, w, skillScenario)
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "checklist"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "checklist", "SKILL.md"),
			[]byte("---\ndescription: A release checklist\n---\nStep one: run the tests.\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		skills, errs, _ := agentdef.LoadSkills(dir)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		e.runner.Skills = skills
		task := e.task("skills")
		task.Volatile = []*agentdef.Definition{
			{Name: "granted", Description: "has it", SystemPrompt: "You are granted.", Tools: []string{"read_file"}, Skills: []string{"checklist"}},
			{Name: "denied", Description: "has not", SystemPrompt: "You are denied.", Tools: []string{"read_file"}},
		}
		o, err := e.run(task)
		if err != nil {
			t.Fatal(err)
		}
		res := resultsOfTurn(t, o, 1)
		if !strings.Contains(res[0].Text, "skill said: # Skill checklist") || !strings.Contains(res[0].Text, "Step one: run the tests.") {
			t.Errorf("granted child: %q", res[0].Text)
		}
		if !strings.Contains(res[1].Text, `skill said: unknown tool "skill"`) {
			t.Errorf("denied child: %q", res[1].Text)
		}
		for _, r := range e.requests("You are denied") {
			if strings.Contains(strings.Join(toolNames(r.Request.Tools), ","), "skill") || strings.Contains(r.Request.System, "checklist") {
				t.Errorf("the denied child was told about the skill")
			}
		}
		if r := e.requests("You are granted"); len(r) == 0 || !strings.Contains(r[0].Request.System, "- checklist: A release checklist") {
			t.Errorf("the granted child's system prompt does not list the skill")
		}
	})
}
