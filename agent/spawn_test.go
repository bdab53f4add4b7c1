package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/cost"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// local runs a scenario on the in-process scripted model: the same runner,
// no HTTP, for the cases the provider wire does not change.
type local struct {
	runner *agent.Runner
	task   agent.Task
	mu     sync.Mutex
	events []agent.Event
}

func newLocal(t *testing.T, scenario string, tools ...tool.Tool) *local {
	t.Helper()
	s, err := fake.ParseScenario([]byte(scenario), t.Name()+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	l := &local{}
	l.runner = &agent.Runner{OnEvent: func(e agent.Event) {
		l.mu.Lock()
		l.events = append(l.events, e)
		l.mu.Unlock()
	}}
	l.task = agent.Task{Task: "go", System: "root", Model: fake.NewModel(s, fake.WithoutLatency()), ModelName: "fake", Tools: set}
	return l
}

func (l *local) run(t *testing.T) *agent.Outcome {
	t.Helper()
	o, err := l.runner.Run(context.Background(), l.task)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestTaskAliasSpawns(t *testing.T) {
	t.Parallel()
	l := newLocal(t, `
rules:
  - match: {system: "read-only explorer"}
    text: "found it"
  - match: {turn: 1}
    tool_calls: [{name: task, input: {subagent_type: explorer, task: "look"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`)
	o := l.run(t)
	if len(o.Instances) != 2 || !strings.Contains(o.Result.Answer, "found it") {
		t.Fatalf("a call to task must spawn like spawn_subagent: %q", o.Result.Answer)
	}
	// The relay's id finds the child's whole transcript.
	m, ok := o.Transcript(o.Instances[1].ID)
	if !ok || len(m) != 2 || m[0].Text() != "look" || m[1].Text() != "found it" {
		t.Errorf("child transcript %+v", m)
	}
}

func TestReportStillTooLongIsCut(t *testing.T) {
	t.Parallel()
	l := newLocal(t, `
rules:
  - match: {system: "verbose"}
    text: "{{lorem 5000}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: verbose, task: "x"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`)
	l.task.Volatile = []*agentdef.Definition{{Name: "verbose", Description: "v", SystemPrompt: "You are verbose.", Tools: []string{}, ReportCap: 400}}
	o := l.run(t)
	c := o.Instances[1]
	// Asked once for a shorter report, it wrote as much again, up to the
	// summary call's max_tokens (256 tokens, 1024 characters): the cut
	// keeps the first 400 characters and says where the rest is. Both
	// calls count: 1250 output tokens for the report, 256 for the retry.
	if c.Turns != 1 || c.Usage.OutputTokens != 1250+256 || !strings.Contains(o.Result.Answer, "[report cut: 624 more characters") {
		t.Fatalf("child %+v\nanswer %q", c, o.Result.Answer)
	}
	if n := utf8.RuneCountInString(c.Report); n > 400+200 {
		t.Errorf("report of %d characters", n)
	}
}

func TestMaxParallelQueues(t *testing.T) {
	t.Parallel()
	l := newLocal(t, `
rules:
  - match: {system: "read-only explorer"}
    text: "ok"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, repeat: 3, input: {subagent_type: explorer, task: "t{{.I}}"}}]
  - match: {turn: 2}
    text: "done"
`)
	l.runner.MaxParallel = 1
	o := l.run(t)
	if len(o.Instances) != 4 {
		t.Fatalf("%d instances", len(o.Instances))
	}
	// With one slot, at most one child runs at a time: between a child's
	// start and its end no other child starts.
	running := 0
	for _, e := range l.events {
		if e.Depth == 0 {
			continue
		}
		switch e.Kind {
		case agent.EventSpawned:
			if running++; running > 1 {
				t.Fatal("two children ran at once with MaxParallel 1")
			}
		case agent.EventEnded:
			running--
		}
	}
}

func TestChildModelFromTierAndPrices(t *testing.T) {
	t.Parallel()
	l := newLocal(t, `
rules:
  - match: {system: "read-only explorer", model: "^small$"}
    text: "on the small model"
  - match: {system: "read-only explorer"}
    text: "on the wrong model"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "t"}}
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "t", model: "opus"}}
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "t", model: "nope:x"}}
  - match: {turn: 2}
    text: "{{range .ToolResults}}{{.}}\n{{end}}"
`)
	var opened []string
	var mu sync.Mutex
	l.runner.Config = &agentdef.Config{
		Tiers:  map[string]string{agentdef.TierHaiku: "test:small"},
		Prices: cost.Table{"fake": {Input: 1, Output: 1}, "test:small": {Input: 2, Output: 2}},
	}
	l.runner.Models = func(spec string) (llm.Model, error) {
		mu.Lock()
		opened = append(opened, spec)
		mu.Unlock()
		if spec != "test:small" {
			return nil, context.DeadlineExceeded // any error: it must reach the parent
		}
		return l.task.Model, nil
	}
	o := l.run(t)
	if len(o.Instances) != 3 {
		t.Fatalf("instances %+v", o.Instances)
	}
	// explorer is haiku: the tier maps to test:small, requested as "small".
	if c := o.Instances[1]; c.Model != "test:small" || c.Cost == nil || *c.Cost != float64(c.Usage.Total())*2/1e6 {
		t.Errorf("haiku child %+v", c)
	}
	// opus has no mapping: it inherits the parent's model and price.
	if c := o.Instances[2]; c.Model != "fake" || c.Cost == nil {
		t.Errorf("opus child %+v", c)
	}
	if !strings.Contains(o.Result.Answer, "on the small model") || !strings.Contains(o.Result.Answer, "spawn refused: model nope:x") {
		t.Errorf("answer %q", o.Result.Answer)
	}
	if !o.CostKnown || o.Cost <= 0 {
		t.Errorf("tree cost %v known %v", o.Cost, o.CostKnown)
	}
}

func TestSandboxedDefinitionIsRefusedNotRunUnfenced(t *testing.T) {
	t.Parallel()
	l := newLocal(t, `
rules:
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: boxed, task: "t"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`)
	l.task.Volatile = []*agentdef.Definition{{Name: "boxed", Description: "b", Isolation: agentdef.IsolationSandbox}}
	o := l.run(t)
	if len(o.Instances) != 1 || !strings.Contains(o.Result.Answer, "asks for isolation sandbox") {
		t.Fatalf("instances %d, answer %q", len(o.Instances), o.Result.Answer)
	}
}

func TestInvalidVolatileDefinition(t *testing.T) {
	t.Parallel()
	l := newLocal(t, `rules: [{text: x}]`)
	l.task.Volatile = []*agentdef.Definition{{Name: "bad", Description: "d", Mode: "sideways"}}
	if _, err := l.runner.Run(context.Background(), l.task); err == nil || !strings.Contains(err.Error(), `mode: "sideways" does not exist`) {
		t.Fatalf("err = %v", err)
	}
}

func TestCancelledParentCancelsChildren(t *testing.T) {
	t.Parallel()
	block := newHold()
	l := newLocal(t, `
rules:
  - match: {system: "waiter", turn: 1}
    tool_calls: [{name: hold, input: {}}]
  - match: {system: "waiter"}
    text: "never"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, repeat: 2, input: {subagent_type: waiter, task: "wait {{.I}}"}}]
`, block)
	l.task.Volatile = []*agentdef.Definition{{Name: "waiter", Description: "w", SystemPrompt: "You are a waiter.", Tools: []string{"hold"}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *agent.Outcome, 1)
	go func() {
		o, _ := l.runner.Run(ctx, l.task)
		done <- o
	}()
	<-block.entered // one waiter holds; the other waits for its turn to write
	l.awaitQueued(t)
	cancel()
	o := <-done
	if o.Result.StopReason != loop.StopCancelled || len(o.Instances) != 3 {
		t.Fatalf("root %s, %d instances", o.Result.StopReason, len(o.Instances))
	}
	for _, c := range o.Instances[1:] {
		if c.State != instance.Cancelled {
			t.Errorf("child %+v", c)
		}
	}
}

// awaitQueued waits until some child is queued.
func (l *local) awaitQueued(t *testing.T) {
	t.Helper()
	for range 20_000 {
		l.mu.Lock()
		for _, e := range l.events {
			if e.Kind == agent.EventQueued {
				l.mu.Unlock()
				return
			}
		}
		l.mu.Unlock()
		time.Sleep(time.Millisecond) // polling an event log, not timing anything
	}
	t.Fatal("no child was queued")
}

func TestRelayRollsUpTheSubtree(t *testing.T) {
	t.Parallel()
	l := newLocal(t, `
rules:
  - match: {system: "read-only explorer"}
    text: "leaf report"
  - match: {system: "You are mid", turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: explorer, task: "leaf"}}]
  - match: {system: "You are mid", turn: 2}
    text: "mid report"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: mid, task: "delegate further"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`)
	l.runner.MaxDepth = 2
	l.runner.Config = &agentdef.Config{Prices: cost.Table{"fake": {Input: 1, Output: 1}}}
	l.task.Volatile = []*agentdef.Definition{{Name: "mid", Description: "m", SystemPrompt: "You are mid.", Tools: []string{agentdef.SpawnTool}}}
	o := l.run(t)
	if len(o.Instances) != 3 || o.Instances[2].Depth != 2 || o.Instances[2].Parent != o.Instances[1].ID {
		t.Fatalf("instances %+v", o.Instances)
	}
	mid, leaf := o.Instances[1], o.Instances[2]
	sub := mid.Usage
	sub.Add(leaf.Usage)
	want := fmt.Sprintf("%d tokens in, %d out, $%.4f", sub.Prompt(), sub.OutputTokens, float64(sub.Total())/1e6)
	if !strings.Contains(o.Result.Answer, want) {
		t.Errorf("mid's relay should count its child: want %q in\n%s", want, o.Result.Answer)
	}
}

func TestUSDBudgetChargesUnderTheFullModelName(t *testing.T) {
	t.Parallel()
	l := newLocal(t, `
rules:
  - tool_calls: [{name: spawn_subagent, input: {subagent_type: explorer, task: "t"}}]
    text: "{{lorem 2000}}"
`)
	// Two providers serve a model called m: the bare name the requests
	// carry is ambiguous, the instance's provider:model is not.
	l.runner.Config = &agentdef.Config{Prices: cost.Table{"anthropic:m": {Output: 10}, "bedrock:m": {Output: 10}}}
	l.task.ModelName, l.task.ModelSpec = "m", "anthropic:m"
	l.task.Budget = agent.TreeBudget{USD: 0.01}
	o, err := l.runner.Run(context.Background(), l.task)
	if err != nil {
		t.Fatal(err)
	}
	// 500 output tokens at $10 per million is $0.005 a call: the budget
	// is spent after two calls, not run to the turn limit.
	if o.Result.StopReason != loop.StopBudget || o.Cost > 0.03 {
		t.Fatalf("stop %s, cost %v", o.Result.StopReason, o.Cost)
	}

	l.task.ModelSpec = "anthropic:unpriced"
	if _, err := l.runner.Run(context.Background(), l.task); err == nil || !strings.Contains(err.Error(), "needs a price for anthropic:unpriced") {
		t.Fatalf("a USD budget over an unpriced model must be refused: %v", err)
	}
}

// schemaTool is a tool of a given schema that echoes its input.
type schemaTool struct{ schema json.RawMessage }

func (s schemaTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "spawn", Description: "d", InputSchema: s.schema}
}
func (schemaTool) ReadOnly() bool                                            { return true }
func (schemaTool) Run(_ context.Context, in json.RawMessage) (string, error) { return string(in), nil }

// One spawn schema, the agent's and an MCP client's: its properties are
// SpawnInput's JSON names, every one of them by default; a schema less
// some leaves out exactly those (never subagent_type and task) and
// refuses them in a call.
func TestSpawnSchema(t *testing.T) {
	t.Parallel()
	props := func(raw json.RawMessage) ([]string, []string) {
		var m struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		var names []string
		for n := range m.Properties {
			names = append(names, n)
		}
		slices.Sort(names)
		return names, m.Required
	}
	var fields []string
	for f := range reflect.TypeFor[agent.SpawnInput]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	slices.Sort(fields)
	if got, req := props(agent.SpawnSchema()); !slices.Equal(got, fields) || !slices.Equal(req, []string{"subagent_type", "task"}) {
		t.Errorf("properties %v (required %v), SpawnInput's fields %v", got, req, fields)
	}
	less := agent.SpawnSchema(agent.SpawnMode, agent.SpawnDescription, "task", "subagent_type")
	if got, _ := props(less); !slices.Equal(got, []string{"background", "model", "subagent_type", "task"}) {
		t.Errorf("less mode and description: %v", got)
	}
	call := `{"subagent_type":"explorer","task":"t","mode":"fork"}`
	if out, isErr := tool.MustSet(schemaTool{less}).Call(context.Background(), "spawn", json.RawMessage(call)); !isErr ||
		!strings.Contains(out, "additional properties 'mode' not allowed") {
		t.Errorf("a field the schema leaves out: %v %s", isErr, out)
	}
	if out, isErr := tool.MustSet(schemaTool{agent.SpawnSchema()}).Call(context.Background(), "spawn", json.RawMessage(call)); isErr {
		t.Errorf("the full schema refused %s: %s", call, out)
	}
}
