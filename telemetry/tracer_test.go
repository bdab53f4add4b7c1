package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/anthropic"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/providertest"
	"github.com/deputy-run/deputy/llm/retry"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/telemetry"
	"github.com/deputy-run/deputy/tool"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The tree every run test uses: a root spawns an explorer and a worker in
// one turn (two spawn calls open at once); the worker's tool call fails.
// The usage figures are scripted so the cache counts are not zero.
const treeScenario = `
rules:
  - match: {system: "failing worker", turn: 1}
    tool_calls: [{name: boom, input: {why: "TOOL-ARGS"}}]
    usage: {input_tokens: 40, output_tokens: 7, cache_read_tokens: 0, cache_write_tokens: 11}
  - match: {system: "failing worker", turn: 2}
    text: "boom failed as expected"
    usage: {input_tokens: 60, output_tokens: 9, cache_read_tokens: 11, cache_write_tokens: 0}
  - match: {system: "read-only explorer"}
    text: "found it"
    usage: {input_tokens: 100, output_tokens: 20, cache_read_tokens: 300, cache_write_tokens: 50}
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "EXPLORE-TASK"}}
      - {name: spawn_subagent, input: {subagent_type: worker, task: "WORKER-TASK"}}
    usage: {input_tokens: 500, output_tokens: 30, cache_read_tokens: 0, cache_write_tokens: 400}
  - match: {turn: 2}
    text: "ROOT-ANSWER"
    usage: {input_tokens: 80, output_tokens: 5, cache_read_tokens: 400, cache_write_tokens: 0}
`

const spec = "anthropic:claude-test"

// boom always fails, after two seconds on the test's clock.
type boom struct{ clk *clock.Fake }

func (boom) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "boom", Description: "fails", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (boom) ReadOnly() bool { return false }
func (b boom) Run(context.Context, json.RawMessage) (string, error) {
	b.clk.Advance(2 * time.Second)
	return "", errors.New("TOOL-ERROR-TEXT")
}

// world is one test's tracing: spans to an in-memory exporter (and a
// recorder, which also sees spans that never end), stamped by a fake clock.
type world struct {
	exp *tracetest.InMemoryExporter
	rec *tracetest.SpanRecorder
	tr  *telemetry.Tracer
	clk *clock.Fake
}

func newWorld(t *testing.T, content bool, known map[string]telemetry.Known) *world {
	t.Helper()
	w := &world{exp: tracetest.NewInMemoryExporter(), rec: tracetest.NewSpanRecorder(), clk: clock.NewFake(t0)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(w.exp), sdktrace.WithSpanProcessor(w.rec),
		sdktrace.WithIDGenerator(telemetry.IDGenerator()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	w.tr = telemetry.New(tp, telemetry.Options{Content: content, Clock: w.clk, Lookup: func(id string) (telemetry.Known, bool) {
		k, ok := known[id]
		return k, ok
	}})
	return w
}

// runTree runs the tree on model (ModelName claude-test, spec
// anthropic:claude-test) with the world's tracer as the event hook.
func (w *world) runTree(t *testing.T, id string, model llm.Model) *agent.Outcome {
	t.Helper()
	tools, err := tool.NewSet(boom{w.clk})
	if err != nil {
		t.Fatal(err)
	}
	r := &agent.Runner{Clock: w.clk, OnEvent: w.tr.Event}
	o, err := r.Run(context.Background(), agent.Task{ID: id, Task: "ROOT-TASK", System: "root", Model: model,
		ModelName: "claude-test", ModelSpec: spec, Tools: tools,
		Volatile: []*agentdef.Definition{{Name: "worker", Description: "fails a tool call",
			SystemPrompt: "You are a failing worker.", Tools: []string{"boom"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func scripted(t *testing.T, scenario string) llm.Model {
	t.Helper()
	s, err := fake.ParseScenario([]byte(scenario), t.Name()+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewModel(s, fake.WithoutLatency())
}

// overHTTP is the same scenario served by the fake Anthropic server, each
// conversation's first request failing once with overloaded (so attempts
// and a retry are reported), through the real provider.
func overHTTP(t *testing.T, scenario string) llm.Model {
	t.Helper()
	s, err := fake.ParseScenario([]byte(scenario), t.Name()+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, root := providertest.StartServer(t, fake.Options{Responder: &failFirst{Responder: s}})
	p := retry.Default()
	p.BaseDelay, p.StallTimeout, p.MaxAttempts, p.Clock = 0, 0, 3, clock.NewInstant()
	m, err := anthropic.New("claude-test", anthropic.Options{APIKey: "k", BaseURL: root, Retry: &p})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// failFirst fails the first request of the whole run with overloaded.
type failFirst struct {
	fake.Responder
	once sync.Once
}

func (f *failFirst) Respond(req *llm.Request, info fake.RequestInfo) fake.Reply {
	rep := f.Responder.Respond(req, info)
	f.once.Do(func() { rep.Fault = &fake.Fault{Kind: fake.FaultOverloaded} })
	return rep
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func str(s tracetest.SpanStub, k string) string { return attrs(s)[attribute.Key(k)].AsString() }
func num(s tracetest.SpanStub, k string) int64  { return attrs(s)[attribute.Key(k)].AsInt64() }

func TestTreeSpans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		model func(*testing.T, string) llm.Model
	}{{"scripted", scripted}, {"anthropic-http", overHTTP}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const rootID = "i-tele-root"
			w := newWorld(t, false, map[string]telemetry.Known{rootID: {Root: rootID, Model: spec, Task: "ROOT-TASK"}})
			o := w.runTree(t, rootID, tc.model(t, treeScenario))
			checkTree(t, w, o, rootID, tc.name == "anthropic-http")
		})
	}
}

func checkTree(t *testing.T, w *world, o *agent.Outcome, rootID string, http bool) {
	t.Helper()
	if n := w.tr.OpenInstances(); n != 0 {
		t.Errorf("%d instances left open", n)
	}
	if s, e := len(w.rec.Started()), len(w.rec.Ended()); s != e {
		t.Errorf("%d spans started, %d ended", s, e)
	}
	spans := w.exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	invoke := map[string]tracetest.SpanStub{} // by instance id
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
		if strings.HasPrefix(s.Name, "invoke_agent ") {
			invoke[str(s, "deputy.instance.id")] = s
		}
	}
	for name, n := range map[string]int{"invoke_agent root": 1, "invoke_agent explorer": 1, "invoke_agent worker": 1,
		"chat claude-test": 5, "execute_tool spawn_subagent": 2, "execute_tool boom": 1} {
		if len(byName[name]) != n {
			t.Errorf("%d spans %q, want %d", len(byName[name]), name, n)
		}
	}
	if len(spans) != 11 {
		t.Errorf("%d spans, want 11", len(spans))
	}
	if len(o.Instances) != 3 {
		t.Fatalf("%d instances", len(o.Instances))
	}

	// One trace, derived from the root's id; the root span has no parent.
	root := invoke[rootID]
	want := telemetry.TraceID(rootID)
	for _, s := range spans {
		if s.SpanContext.TraceID() != want {
			t.Errorf("%s in trace %s, want %s", s.Name, s.SpanContext.TraceID(), want)
		}
	}
	if root.Parent.IsValid() {
		t.Errorf("the root's span has a parent %v", root.Parent)
	}

	// Each child under the spawn call that started it: the call whose
	// task is the child's, as the root's transcript has it.
	transcript, _ := o.Transcript(rootID)
	callOf := map[string]string{} // task → tool_use id
	for _, b := range transcript[1].Content {
		if b.Type == llm.TypeToolUse {
			var in struct{ Task string }
			_ = json.Unmarshal(b.Input, &in)
			callOf[in.Task] = b.ID
		}
	}
	spawnSpan := map[string]tracetest.SpanStub{} // call id → span
	for _, s := range byName["execute_tool spawn_subagent"] {
		spawnSpan[str(s, "gen_ai.tool.call.id")] = s
		if s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("spawn call %s not under the root", str(s, "gen_ai.tool.call.id"))
		}
	}
	for _, in := range o.Instances[1:] {
		task := map[string]string{"explorer": "EXPLORE-TASK", "worker": "WORKER-TASK"}[in.Type]
		call := spawnSpan[callOf[task]]
		s := invoke[in.ID]
		if s.Parent.SpanID() != call.SpanContext.SpanID() || !call.SpanContext.IsValid() {
			t.Errorf("%s's span is not under its spawn call %s", in.Type, callOf[task])
		}
		if str(call, "deputy.subagent.id") != in.ID {
			t.Errorf("spawn call %s names subagent %q, want %s", callOf[task], str(call, "deputy.subagent.id"), in.ID)
		}
		a := attrs(s)
		if a["gen_ai.operation.name"].AsString() != "invoke_agent" || a["gen_ai.agent.name"].AsString() != in.Type ||
			a["gen_ai.agent.id"].AsString() != in.ID || a["deputy.parent.id"].AsString() != rootID ||
			a["deputy.root.id"].AsString() != rootID || a["deputy.depth"].AsInt64() != 1 ||
			a["deputy.state"].AsString() != string(instance.Completed) || a["gen_ai.provider.name"].AsString() != "anthropic" {
			t.Errorf("%s attributes %v", in.Type, s.Attributes)
		}
	}

	// chat and execute_tool spans sit under their instance's invoke_agent.
	var chatUsage, agentUsage llm.Usage
	for _, s := range spans {
		owner := invoke[str(s, "deputy.instance.id")]
		switch {
		case strings.HasPrefix(s.Name, "chat "):
			if s.Parent.SpanID() != owner.SpanContext.SpanID() {
				t.Errorf("chat span of %s not under its invoke_agent", str(s, "deputy.instance.id"))
			}
			if s.SpanKind != trace.SpanKindClient || str(s, "gen_ai.operation.name") != "chat" ||
				str(s, "gen_ai.provider.name") != "anthropic" || str(s, "gen_ai.request.model") != "claude-test" {
				t.Errorf("chat attributes %v", s.Attributes)
			}
			chatUsage.Add(usageOf(s))
			if fr := attrs(s)["gen_ai.response.finish_reasons"].AsStringSlice(); len(fr) != 1 || (fr[0] != "end_turn" && fr[0] != "tool_use") {
				t.Errorf("finish reasons %v", fr)
			}
		case strings.HasPrefix(s.Name, "execute_tool "):
			if s.Parent.SpanID() != owner.SpanContext.SpanID() {
				t.Errorf("%s not under its invoke_agent", s.Name)
			}
			if str(s, "gen_ai.operation.name") != "execute_tool" || str(s, "gen_ai.tool.call.id") == "" ||
				"execute_tool "+str(s, "gen_ai.tool.name") != s.Name {
				t.Errorf("tool attributes %v", s.Attributes)
			}
		case strings.HasPrefix(s.Name, "invoke_agent "):
			agentUsage.Add(usageOf(s))
		}
	}
	// Usage: the conventions' input_tokens is the whole prompt.
	wantUsage := llm.Usage{InputTokens: o.Usage.Prompt(), OutputTokens: o.Usage.OutputTokens,
		CacheReadTokens: o.Usage.CacheReadTokens, CacheWriteTokens: o.Usage.CacheWriteTokens}
	if chatUsage != wantUsage || agentUsage != wantUsage {
		t.Errorf("usage: chat spans %+v, invoke_agent spans %+v, outcome %+v", chatUsage, agentUsage, wantUsage)
	}
	if o.Usage.CacheReadTokens != 711 || o.Usage.CacheWriteTokens != 461 {
		t.Errorf("the scripted usage did not arrive: %+v", o.Usage)
	}
	for _, s := range byName["chat claude-test"] {
		if str(s, "deputy.instance.id") == o.Instances[1].ID && (num(s, "gen_ai.usage.input_tokens") != 450 ||
			num(s, "gen_ai.usage.cache_read.input_tokens") != 300 || num(s, "gen_ai.usage.cache_creation.input_tokens") != 50 ||
			num(s, "gen_ai.usage.output_tokens") != 20) {
			t.Errorf("explorer's chat usage %v", s.Attributes)
		}
	}

	// The failed tool call, timed by the clock the tool moved.
	b := byName["execute_tool boom"][0]
	if b.Status.Code != codes.Error || str(b, "error.type") != "tool_error" {
		t.Errorf("boom status %+v, attributes %v", b.Status, b.Attributes)
	}
	if d := b.EndTime.Sub(b.StartTime); d != 2*time.Second || !b.StartTime.Equal(t0) {
		t.Errorf("boom span %v from %v, want 2s from %v", d, b.StartTime, t0)
	}
	if !root.StartTime.Equal(t0) || !root.EndTime.Equal(t0.Add(2*time.Second)) {
		t.Errorf("root span %v..%v", root.StartTime, root.EndTime)
	}
	if str(root, "deputy.state") != string(instance.Completed) || str(root, "deputy.stop_reason") != "completed" ||
		num(root, "deputy.turns") != 2 || str(root, "gen_ai.agent.name") != "root" {
		t.Errorf("root attributes %v", root.Attributes)
	}

	// Content is off: no task, prompt, answer, argument or error text.
	for _, s := range spans {
		for _, kv := range s.Attributes {
			switch kv.Key {
			case "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result":
				t.Errorf("%s has %s without content opted in", s.Name, kv.Key)
			}
		}
		all := fmt.Sprint(s.Attributes, s.Status, s.Events)
		for _, secret := range []string{"ROOT-TASK", "EXPLORE-TASK", "WORKER-TASK", "TOOL-ARGS", "TOOL-ERROR-TEXT", "ROOT-ANSWER", "found it"} {
			if strings.Contains(all, secret) {
				t.Errorf("%s carries %q without content opted in", s.Name, secret)
			}
		}
	}

	if http {
		// The first request was refused once: its chat span has both
		// attempts, the first retried with its status.
		retried := 0
		for _, s := range byName["chat claude-test"] {
			for _, ev := range s.Events {
				if ev.Name != "deputy.attempt" {
					continue
				}
				a := map[attribute.Key]attribute.Value{}
				for _, kv := range ev.Attributes {
					a[kv.Key] = kv.Value
				}
				if a["deputy.attempt.retry"].AsBool() {
					retried++
					if a["http.response.status_code"].AsInt64() != 529 || a["deputy.attempt.reason"].AsString() != "overloaded" {
						t.Errorf("retried attempt %v", ev.Attributes)
					}
				}
			}
		}
		if retried != 1 {
			t.Errorf("%d retried attempts recorded, want 1", retried)
		}
	}
}

func usageOf(s tracetest.SpanStub) llm.Usage {
	return llm.Usage{InputTokens: num(s, "gen_ai.usage.input_tokens"), OutputTokens: num(s, "gen_ai.usage.output_tokens"),
		CacheReadTokens: num(s, "gen_ai.usage.cache_read.input_tokens"), CacheWriteTokens: num(s, "gen_ai.usage.cache_creation.input_tokens")}
}

func TestContentWhenOptedIn(t *testing.T) {
	t.Parallel()
	const rootID = "i-tele-content"
	w := newWorld(t, true, map[string]telemetry.Known{rootID: {Root: rootID, Model: spec, Task: "ROOT-TASK"}})
	o := w.runTree(t, rootID, scripted(t, treeScenario))
	var rootChats []tracetest.SpanStub
	found := map[string]bool{}
	for _, s := range w.exp.GetSpans() {
		a := attrs(s)
		in, out := a["gen_ai.input.messages"].AsString(), a["gen_ai.output.messages"].AsString()
		for _, v := range []string{in, out} {
			if v != "" && !json.Valid([]byte(v)) {
				t.Errorf("%s: not JSON: %s", s.Name, v)
			}
		}
		switch {
		case s.Name == "invoke_agent root":
			found["root task"] = strings.Contains(in, "ROOT-TASK")
			found["root answer"] = strings.Contains(out, `"content":"ROOT-ANSWER"`)
		case s.Name == "invoke_agent explorer":
			found["child task"] = strings.Contains(in, `"role":"user","parts":[{"type":"text","content":"EXPLORE-TASK"}]`)
			found["child report"] = strings.Contains(out, "found it")
		case s.Name == "execute_tool boom":
			found["arguments"] = a["gen_ai.tool.call.arguments"].AsString() == `{"why":"TOOL-ARGS"}`
			found["result"] = strings.Contains(a["gen_ai.tool.call.result"].AsString(), "TOOL-ERROR-TEXT") &&
				strings.Contains(s.Status.Description, "TOOL-ERROR-TEXT")
		case s.Name == "chat claude-test" && str(s, "deputy.instance.id") == rootID:
			rootChats = append(rootChats, s)
		case s.Name == "chat claude-test" && str(s, "deputy.instance.id") == o.Instances[1].ID:
			found["child prompt"] = strings.Contains(in, "EXPLORE-TASK")
		}
	}
	if len(rootChats) == 2 {
		out1, in2 := str(rootChats[0], "gen_ai.output.messages"), str(rootChats[1], "gen_ai.input.messages")
		found["tool calls out"] = strings.Contains(out1, `"type":"tool_call"`) && strings.Contains(out1, `"finish_reason":"tool_use"`) &&
			strings.Contains(out1, `"arguments":{"subagent_type":"explorer","task":"EXPLORE-TASK"}`)
		// The second call's input is what the first call's turn added:
		// the children's reports as tool results.
		found["tool results in"] = strings.Contains(in2, `"type":"tool_call_response"`) && strings.Contains(in2, "found it")
		found["answer out"] = strings.Contains(str(rootChats[1], "gen_ai.output.messages"), "ROOT-ANSWER")
	}
	for _, k := range []string{"root task", "root answer", "child task", "child report", "arguments", "result",
		"child prompt", "tool calls out", "tool results in", "answer out"} {
		if !found[k] {
			t.Errorf("content missing: %s", k)
		}
	}
	if n := w.tr.OpenInstances(); n != 0 {
		t.Errorf("%d instances left open", n)
	}
}

// Many trees on one tracer at once, under the race detector: every span
// ends and nothing stays in the tracer's map.
func TestConcurrentTrees(t *testing.T) {
	t.Parallel()
	w := newWorld(t, true, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { w.runTree(t, fmt.Sprintf("i-conc-%d", i), scripted(t, treeScenario)) })
	}
	wg.Wait()
	if n := w.tr.OpenInstances(); n != 0 {
		t.Errorf("%d instances left open", n)
	}
	if s, e := len(w.rec.Started()), len(w.rec.Ended()); s != e || e != 8*11 {
		t.Errorf("%d spans started, %d ended, want %d", s, e, 8*11)
	}
	traces := map[trace.TraceID]int{}
	for _, s := range w.exp.GetSpans() {
		traces[s.SpanContext.TraceID()]++
	}
	for i := range 8 {
		if n := traces[telemetry.TraceID(fmt.Sprintf("i-conc-%d", i))]; n != 11 {
			t.Errorf("tree %d: %d spans in its trace", i, n)
		}
	}
}

// A root's later run (a worker resuming it) lands in the trace of its
// first, and so does a grandchild's later run, found through Lookup.
func TestResumedRunsShareTheTrace(t *testing.T) {
	t.Parallel()
	const rootID = "i-resumed"
	first := newWorld(t, false, nil)
	first.runTree(t, rootID, scripted(t, treeScenario))
	second := newWorld(t, false, map[string]telemetry.Known{"i-grandchild": {Root: rootID, Model: spec}})
	second.runTree(t, rootID, scripted(t, treeScenario))
	// A child two levels down, run again in a tree rebuilt from the store:
	// its parent is not running here.
	second.tr.Event(agent.Event{Kind: agent.EventSpawned, Instance: "i-grandchild", Parent: "i-child", Type: "explorer", Depth: 2,
		Spawned: &agent.Spawned{Model: spec, Task: "t"}})
	second.tr.Event(agent.Event{Kind: agent.EventEnded, Instance: "i-grandchild", Final: &instance.Record{State: instance.Completed}})
	want := telemetry.TraceID(rootID)
	for _, w := range []*world{first, second} {
		for _, s := range w.exp.GetSpans() {
			if s.SpanContext.TraceID() != want {
				t.Errorf("%s (%s) in trace %s, want %s", s.Name, str(s, "deputy.instance.id"), s.SpanContext.TraceID(), want)
			}
		}
	}
	if telemetry.TraceID("a") == telemetry.TraceID("b") || telemetry.TraceID("a") != telemetry.TraceID("a") {
		t.Error("TraceID is not a function of the root id")
	}
}

// Hand-fed events: a failed model call, a compaction, a run that stops to
// wait, and a close with spans still open.
func TestFailuresSuspensionAndClose(t *testing.T) {
	t.Parallel()
	w := newWorld(t, false, nil)
	step := func(id string, le loop.Event) {
		w.tr.Event(agent.Event{Kind: agent.EventStep, Instance: id, Loop: le})
	}
	// A root whose model call fails after a retry.
	w.tr.Event(agent.Event{Kind: agent.EventSpawned, Instance: "i-a", Type: "root"})
	step("i-a", loop.Event{Kind: loop.EventTurnStarted, Turn: 1})
	step("i-a", loop.Event{Kind: loop.EventCompaction, Turn: 1, Usage: llm.Usage{InputTokens: 1000, OutputTokens: 100}})
	step("i-a", loop.Event{Kind: loop.EventModelAttempt, Turn: 1, Attempt: llm.Attempt{Provider: "openai", Model: "gpt-x", N: 1,
		Status: 500, Reason: "server_error", Err: errors.New("500 api_error"), Error: "500 api_error"}})
	step("i-a", loop.Event{Kind: loop.EventFinished, Turn: 1, Stop: loop.StopModelError, Err: errors.New("turn 1: 500 api_error")})
	w.tr.Event(agent.Event{Kind: agent.EventEnded, Instance: "i-a"})

	// A child that asks: its run ends at finished (no EventEnded comes),
	// asking, since its last turn's ask_parent call succeeded.
	w.tr.Event(agent.Event{Kind: agent.EventSpawned, Instance: "i-b", Parent: "i-gone", Depth: 1, Type: "helper",
		Spawned: &agent.Spawned{Model: "ollama:llama3"}})
	step("i-b", loop.Event{Kind: loop.EventTurnStarted, Turn: 1})
	step("i-b", loop.Event{Kind: loop.EventModelResponse, Turn: 1, ModelStop: llm.StopToolUse})
	step("i-b", loop.Event{Kind: loop.EventToolCall, Turn: 1, Block: llm.ToolUse("toolu_ask", agentdef.AskTool, json.RawMessage(`{}`))})
	step("i-b", loop.Event{Kind: loop.EventToolResult, Turn: 1, Block: llm.ToolResult("toolu_ask", agent.Waiting, false)})
	step("i-b", loop.Event{Kind: loop.EventFinished, Turn: 1, Stop: loop.StopSuspended})
	// One paused at a turn boundary: a turn whose ask failed, then the
	// pause before the next.
	w.tr.Event(agent.Event{Kind: agent.EventSpawned, Instance: "i-p", Parent: "i-gone", Depth: 1, Type: "helper"})
	step("i-p", loop.Event{Kind: loop.EventTurnStarted, Turn: 1})
	step("i-p", loop.Event{Kind: loop.EventToolCall, Turn: 1, Block: llm.ToolUse("toolu_no", agentdef.AskTool, json.RawMessage(`{}`))})
	step("i-p", loop.Event{Kind: loop.EventToolResult, Turn: 1, Block: llm.ToolResult("toolu_no", "the question is empty", true)})
	step("i-p", loop.Event{Kind: loop.EventFinished, Turn: 1, Stop: loop.StopSuspended})

	// A root still in a tool call when the process closes.
	w.tr.Event(agent.Event{Kind: agent.EventSpawned, Instance: "i-c", Type: "root"})
	step("i-c", loop.Event{Kind: loop.EventTurnStarted, Turn: 1})
	step("i-c", loop.Event{Kind: loop.EventToolCall, Turn: 1, Block: llm.ToolUse("toolu_1", "bash", json.RawMessage(`{}`))})
	w.clk.Advance(time.Minute)
	w.tr.Close()
	// Events after Close start nothing.
	w.tr.Event(agent.Event{Kind: agent.EventSpawned, Instance: "i-d", Type: "root"})
	step("i-c", loop.Event{Kind: loop.EventToolResult, Turn: 1, Block: llm.ToolResult("toolu_1", "late", false)})

	if n := w.tr.OpenInstances(); n != 0 {
		t.Errorf("%d instances left open", n)
	}
	if s, e := len(w.rec.Started()), len(w.rec.Ended()); s != e {
		t.Errorf("%d spans started, %d ended", s, e)
	}
	got := map[string]tracetest.SpanStub{}
	for _, s := range w.exp.GetSpans() {
		got[str(s, "deputy.instance.id")+" "+s.Name+" "+str(s, "deputy.purpose")] = s
	}
	if len(got) != 12 {
		t.Errorf("%d spans: %v", len(got), got)
	}
	if s := got["i-a chat compact"]; num(s, "gen_ai.usage.input_tokens") != 1000 || s.Status.Code == codes.Error {
		t.Errorf("compaction span %v %v", s.Attributes, s.Status)
	}
	// The provider's names, from the attempt, replace the unknown spec.
	if s := got["i-a chat gpt-x "]; s.Status.Code != codes.Error || str(s, "error.type") != "server_error" ||
		str(s, "gen_ai.provider.name") != "openai" || !strings.Contains(s.Status.Description, "500 api_error") ||
		len(s.Events) != 1 || s.Events[0].Name != "deputy.attempt" {
		t.Errorf("failed chat %+v %v %v", s.Status, s.Attributes, s.Events)
	}
	if s := got["i-a invoke_agent root "]; s.Status.Code != codes.Error || str(s, "deputy.state") != string(instance.Failed) ||
		str(s, "error.type") != string(instance.Failed) {
		t.Errorf("failed root %+v %v", s.Status, s.Attributes)
	}
	if s := got["i-b invoke_agent helper "]; str(s, "deputy.state") != string(instance.Asking) || s.Status.Code == codes.Error ||
		s.SpanContext.TraceID() != telemetry.TraceID("i-gone") || str(s, "gen_ai.provider.name") != "ollama" {
		t.Errorf("asking child %+v %v", s.Status, s.Attributes)
	}
	if s := got["i-p invoke_agent helper "]; str(s, "deputy.state") != string(instance.Paused) || s.Status.Code == codes.Error {
		t.Errorf("paused child %+v %v", s.Status, s.Attributes)
	}
	if s := got["i-c execute_tool bash "]; s.Status.Code != codes.Error || !s.EndTime.Equal(t0.Add(time.Minute)) ||
		str(s, "error.type") != "interrupted" {
		t.Errorf("tool open at close %+v %v %v", s.Status, s.Attributes, s.EndTime)
	}
	if s := got["i-c invoke_agent root "]; !attrs(s)["deputy.interrupted"].AsBool() || !s.EndTime.Equal(t0.Add(time.Minute)) {
		t.Errorf("root open at close %v", s.Attributes)
	}
}

// A disabled tracer ignores everything and hands the next hook back.
func TestDisabled(t *testing.T) {
	t.Parallel()
	var nilTracer *telemetry.Tracer
	for _, tr := range []*telemetry.Tracer{nilTracer, {}, telemetry.New(nil, telemetry.Options{})} {
		if tr.Enabled() {
			t.Error("enabled")
		}
		tr.Event(agent.Event{Kind: agent.EventSpawned, Instance: "x"})
		tr.Close()
		if tr.Hook(nil) != nil {
			t.Error("a disabled tracer's hook must be the next one")
		}
	}
}

// A bad call's arguments (not a JSON object) are reported as the model
// sent them: on the tool span, and in the chat's output messages (as a
// JSON string when they are not JSON at all).
func TestContentKeepsABadCallsArguments(t *testing.T) {
	t.Parallel()
	const rootID = "i-tele-badargs"
	const scenario = `
rules:
  - match: {turn: 1}
    tool_calls: [{name: boom, raw_input: '{"why": "CUT'}]
  - match: {turn: 2}
    text: "done"
`
	w := newWorld(t, true, map[string]telemetry.Known{rootID: {Root: rootID, Model: spec, Task: "ROOT-TASK"}})
	w.runTree(t, rootID, scripted(t, scenario))
	var tool, out bool
	for _, s := range w.exp.GetSpans() {
		a := attrs(s)
		switch s.Name {
		case "execute_tool boom":
			tool = a["gen_ai.tool.call.arguments"].AsString() == `{"why": "CUT`
		case "chat claude-test":
			if m := a["gen_ai.output.messages"].AsString(); strings.Contains(m, `"type":"tool_call"`) {
				if !json.Valid([]byte(m)) {
					t.Errorf("output messages not JSON: %s", m)
				}
				out = strings.Contains(m, `"arguments":"{\"why\": \"CUT"`)
				if !out {
					t.Errorf("output messages: %s", m)
				}
			}
		}
	}
	if !tool || !out {
		t.Errorf("a bad call's arguments: on the tool span %v, in the output messages %v", tool, out)
	}
}
