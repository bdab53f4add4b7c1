package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/mcpserver"
	"github.com/deputy-run/deputy/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scenario scripts every type the tests start; each rule answers one
// type's system prompt only.
const scenario = `
rules:
  - match: {system: "read-only explorer"}
    text: "Conclusion: the answer is 42.\nSources: none.\nNot verified: nothing."
  - match: {system: "^You ask", turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "Which colour?"}}]
  - match: {system: "^You ask", turn: 2}
    text: "Painted it {{index .ToolResults 0}}."
  - match: {system: "^You wait", turn: 1}
    tool_calls: [{name: gate, input: {}}]
  - match: {system: "^You wait"}
    text: "the gate opened"
  - match: {system: "^You break"}
    fault: {kind: server_error}
    text: "unused"
  - text: "unscripted"
`

// gate is a read-only tool that returns only when its call is cancelled.
type gate struct{}

func (gate) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "gate", Description: "Waits.", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (gate) ReadOnly() bool { return true }
func (gate) Run(ctx context.Context, _ json.RawMessage) (string, error) {
	<-ctx.Done()
	return "", context.Cause(ctx)
}

// types are the program's own types beside the built-ins.
func types() []*deputy.Definition {
	return []*deputy.Definition{
		{Name: "asker", Description: "Asks which colour, then paints.", SystemPrompt: "You ask before you paint.", Tools: []string{agentdef.AskTool}},
		{Name: "waiter", Description: "Waits at the gate.", SystemPrompt: "You wait at the gate.", Tools: []string{"gate"}},
		{Name: "broken", Description: "Its model fails.", SystemPrompt: "You break.", Tools: []string{}},
		{Name: "boxed", Description: "Works in a sandbox.", SystemPrompt: "x", Isolation: agentdef.IsolationSandbox},
	}
}

type rig struct {
	rt      *deputy.Runtime
	clk     *clock.Fake
	session *mcp.ClientSession
}

// newRig opens a runtime on a fresh database and workspace and connects a
// go-sdk client to Handler over real HTTP.
func newRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	rt, err := deputy.Open(context.Background(), deputy.Options{ModelSpec: "fake", Scenario: []byte(scenario),
		DB: filepath.Join(dir, "deputy.db"), Workspace: dir, Tools: []deputy.Tool{gate{}}, Definitions: types(),
		Config: deputy.DemoConfig()})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	srv := httptest.NewServer(mcpserver.Handler(rt, mcpserver.Options{Clock: clk, Version: "test"}))
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		srv.Close()
		rt.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		session.Close()
		srv.Close()
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	return &rig{rt: rt, clk: clk, session: session}
}

// call calls a tool and returns its text and whether it is an error
// result; a protocol error fails the test.
func (r *rig) call(t *testing.T, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := r.session.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	return resultText(t, res), res.IsError
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("%d content blocks", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T", res.Content[0])
	}
	return tc.Text
}

var startedID = regexp.MustCompile(`^subagent (i-[0-9a-f]{12}) \(`)

// idOf is the instance id a background spawn names.
func idOf(t *testing.T, out string) string {
	t.Helper()
	m := startedID.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no id in %q", out)
	}
	return m[1]
}

// The tools are listed with their names, and spawn_subagent's description
// lists the catalog as agent's spawn tool does.
func TestMcpHTTPListsTools(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	res, err := r.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var spawn *mcp.Tool
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if tl.Name == mcpserver.SpawnTool {
			spawn = tl
		}
	}
	slices.Sort(names)
	want := []string{"list_definitions", "spawn_subagent", "subagent_answer", "subagent_approve", "subagent_cancel", "subagent_list",
		"subagent_pause", "subagent_resume", "subagent_send", "subagent_status", "subagent_wait"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v", names)
	}
	catalog := agentdef.Describe(r.rt.Definitions())
	if !strings.Contains(spawn.Description, "Subagent types:\n"+catalog) ||
		!strings.Contains(catalog, "- waiter: Waits at the gate.") || !strings.Contains(catalog, "- explorer: Fast read-only") {
		t.Errorf("spawn's description:\n%s", spawn.Description)
	}
	// The agent's spawn schema, less what does not apply to a client.
	schema, _ := json.Marshal(spawn.InputSchema)
	var got, agents map[string]any
	if err := json.Unmarshal(schema, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(agent.SpawnSchema(agent.SpawnMode, agent.SpawnDescription), &agents); err != nil {
		t.Fatal(err)
	}
	props, _ := got["properties"].(map[string]any)
	if !reflect.DeepEqual(got, agents) || len(props) != 4 || props["subagent_type"] == nil || props["mode"] != nil {
		t.Errorf("spawn's schema: %s", schema)
	}
	defs, isErr := r.call(t, mcpserver.DefinitionsTool, nil)
	if isErr || !strings.Contains(defs, "- waiter: Waits at the gate.\n  model: inherit; tools: gate;") ||
		!strings.Contains(defs, "- boxed: Works in a sandbox.\n  model: inherit; tools: all but spawning; max turns: 30; report: at most 3000 characters\n  not startable here") {
		t.Errorf("list_definitions:\n%s", defs)
	}
}

// A background spawn returns its id at once; subagent_wait returns its
// relay, which is the instance's relay and ends with its report; a
// foreground spawn returns the relay itself.
func TestMcpHTTPBackgroundAndForeground(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	out, isErr := r.call(t, mcpserver.SpawnTool, map[string]any{"subagent_type": "explorer", "task": "find the answer", "background": true})
	if isErr || !strings.Contains(out, "started in the background") {
		t.Fatalf("%v %s", isErr, out)
	}
	id := idOf(t, out)
	relay, isErr := r.call(t, mcpserver.WaitTool, map[string]any{"id": id, "timeout_seconds": 60})
	in, err := r.rt.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := r.rt.Relay(ctx, id)
	want, _ := rel.ToolResult()
	if isErr || relay != want || in.State != deputy.Completed || in.Type != "explorer" || in.Parent != "" ||
		!strings.HasSuffix(relay, "\n\n"+in.Report) || !strings.HasPrefix(in.Report, "Conclusion: the answer is 42.") {
		t.Fatalf("wait: %v\n%s\ninstance %s %s %q", isErr, relay, in.State, in.Type, in.Report)
	}
	// The explorer's tier (haiku) is the demo's second scripted model.
	if in.Model != "fake:haiku" {
		t.Errorf("model %s", in.Model)
	}

	// type, subagent_type's old name here, is still understood.
	fg, isErr := r.call(t, mcpserver.SpawnTool, map[string]any{"type": "explorer", "task": "again", "model": "fake"})
	if isErr || !strings.Contains(fg, "(explorer): completed") || !strings.HasSuffix(fg, "Not verified: nothing.") {
		t.Fatalf("foreground: %v\n%s", isErr, fg)
	}
	if again, _ := r.rt.Get(ctx, idOf(t, fg)); again.Model != "fake" {
		t.Errorf("the named model was not used: %s", again.Model)
	}

	// A tier names a model through deputy.yaml (the demo's, here), as in
	// a spawn; inherit is the runtime's.
	for tier, model := range map[string]string{"haiku": "fake:haiku", "inherit": "fake"} {
		out, isErr := r.call(t, mcpserver.SpawnTool, map[string]any{"subagent_type": "general-purpose", "task": "x", "model": tier})
		if in, _ := r.rt.Get(ctx, idOf(t, out)); isErr || in.Model != model || in.State != deputy.Completed {
			t.Errorf("model %s: %v %s\n%s", tier, isErr, in.Model, out)
		}
	}

	status, isErr := r.call(t, mcpserver.StatusTool, map[string]any{"id": id})
	if isErr || status != want {
		t.Errorf("status of an ended one is its relay: %s", status)
	}
	list, isErr := r.call(t, mcpserver.ListTool, map[string]any{"limit": 1, "state": "completed,failed"})
	if isErr || !strings.Contains(list, " (general-purpose): completed") || !strings.Contains(list, "and 3 older") {
		t.Errorf("list:\n%s", list)
	}
}

// An instance that settles asking returns its question and id; the answer
// through subagent_answer lets it go on, and subagent_wait returns its
// report.
func TestMcpHTTPAskAndAnswer(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	out, isErr := r.call(t, mcpserver.SpawnTool, map[string]any{"subagent_type": "asker", "task": "paint the shed"})
	if isErr || !strings.Contains(out, "(asker): asking") || !strings.Contains(out, "question: Which colour?") ||
		!strings.Contains(out, "subagent_answer") {
		t.Fatalf("%v\n%s", isErr, out)
	}
	id := idOf(t, out)
	if got, isErr := r.call(t, mcpserver.AnswerTool, map[string]any{"id": id, "text": "blue"}); isErr {
		t.Fatalf("answer: %s", got)
	}
	relay, isErr := r.call(t, mcpserver.WaitTool, map[string]any{"id": id})
	if isErr || !strings.HasSuffix(relay, "\n\nPainted it blue.") || !strings.Contains(relay, "(asker): completed") {
		t.Fatalf("%v\n%s", isErr, relay)
	}
	// It has no open question any more: a second answer is refused.
	again, isErr := r.call(t, mcpserver.AnswerTool, map[string]any{"id": id, "text": "red"})
	if !isErr || !strings.Contains(again, "illegal state transition") {
		t.Errorf("second answer: %v %s", isErr, again)
	}
}

// A wait whose timeout passes says the instance is still running; cancel
// ends it and returns its partial relay.
func TestMcpHTTPWaitTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	out, _ := r.call(t, mcpserver.SpawnTool, map[string]any{"subagent_type": "waiter", "task": "wait", "background": true})
	id := idOf(t, out)
	atGate(t, r.rt, id)
	type result struct {
		text  string
		isErr bool
	}
	done := make(chan result, 1)
	go func() {
		res, err := r.session.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.WaitTool,
			Arguments: map[string]any{"id": id, "timeout_seconds": 30}})
		if err != nil {
			done <- result{err.Error(), true}
			return
		}
		tc, _ := res.Content[0].(*mcp.TextContent)
		done <- result{tc.Text, res.IsError}
	}()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := r.clk.WaitPending(wctx, 1); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(30 * time.Second)
	got := <-done
	if got.isErr || !strings.HasPrefix(got.text, "still running after 30s") || !strings.Contains(got.text, "subagent "+id+" (waiter): ") {
		t.Fatalf("%v %s", got.isErr, got.text)
	}
	status, isErr := r.call(t, mcpserver.StatusTool, map[string]any{"id": id})
	if isErr || !strings.HasPrefix(status, "subagent "+id+" (waiter): running, 1 turns") {
		t.Errorf("status %s", status)
	}
	// Bounded: a cancel that never settles fails the test, not hangs it.
	cctx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	res, err := r.session.CallTool(cctx, &mcp.CallToolParams{Name: mcpserver.CancelTool, Arguments: map[string]any{"id": id}})
	if err != nil {
		t.Fatal(err)
	}
	if relay := resultText(t, res); res.IsError || !strings.Contains(relay, "subagent "+id+" (waiter): cancelled") {
		t.Fatalf("cancel: %v\n%s", res.IsError, relay)
	}
	if in, _ := r.rt.Get(ctx, id); in.State != deputy.Cancelled {
		t.Errorf("state %s", in.State)
	}
	again, isErr := r.call(t, mcpserver.CancelTool, map[string]any{"id": id})
	if !isErr || !strings.Contains(again, "cannot be cancelled") {
		t.Errorf("second cancel: %v %s", isErr, again)
	}
}

// Every failure is a tool error whose text says what to do, never a
// protocol error: unknown id, unknown type, a fenced type, a bad model, an
// empty task, a bad state, and an instance that failed.
func TestMcpHTTPErrorsAreToolErrors(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{mcpserver.StatusTool, map[string]any{"id": "i-000000000000"}, `no subagent "i-000000000000" on this deputy database`},
		{mcpserver.WaitTool, map[string]any{"id": "nope"}, `no subagent "nope"`},
		{mcpserver.CancelTool, map[string]any{"id": "nope"}, `no subagent "nope"`},
		{mcpserver.AnswerTool, map[string]any{"id": "nope", "text": "x"}, `no subagent "nope"`},
		{mcpserver.SendTool, map[string]any{"id": "nope", "text": "x"}, `no subagent "nope"`},
		{mcpserver.SpawnTool, map[string]any{"subagent_type": "nobody", "task": "x"}, `unknown subagent type "nobody"; the types are: asker, boxed, broken, explorer`},
		{mcpserver.SpawnTool, map[string]any{"subagent_type": "boxed", "task": "x"}, "refused rather than run unfenced"},
		{mcpserver.SpawnTool, map[string]any{"subagent_type": "explorer", "task": "x", "model": "gpt"}, `model "gpt" is neither a tier`},
		{mcpserver.SpawnTool, map[string]any{"subagent_type": "explorer", "task": "x", "model": "nosuch:model"}, "model nosuch:model: "},
		{mcpserver.SpawnTool, map[string]any{"subagent_type": "explorer", "task": "  "}, "the task is empty"},
		{mcpserver.SpawnTool, map[string]any{"task": "x"}, `invalid arguments for spawn_subagent: at /: missing property 'subagent_type'`},
		{mcpserver.SpawnTool, map[string]any{"subagent_type": "", "task": "x"}, "name the subagent_type to start; the types are: asker, boxed"},
		{mcpserver.SpawnTool, map[string]any{"subagent_type": "explorer", "task": "x", "mode": "fork"}, "additional properties 'mode' not allowed"},
		{mcpserver.SpawnTool, map[string]any{"subagent_type": "explorer", "type": "explorer", "task": "x"}, "give subagent_type only (type is its old name)"},
		{mcpserver.SpawnTool, map[string]any{"subagent_type": 7, "task": "x"}, "at /subagent_type: got number, want string"},
		{mcpserver.ListTool, map[string]any{"state": "sleeping"}, `unknown state "sleeping"`},
		{mcpserver.WaitTool, map[string]any{"id": "x", "timeout_seconds": -1}, "must not be negative"},
		{mcpserver.ApproveTool, map[string]any{"id": "x"}, `missing properties: ["approve"]`},
		{mcpserver.ApproveTool, map[string]any{"id": "x", "approve": true, "reason": "r"}, "a reason goes with a refusal"},
		{mcpserver.ApproveTool, map[string]any{"id": "x", "approve": false, "always": true}, "always goes with an approval"},
	} {
		out, isErr := r.call(t, c.tool, c.args)
		if !isErr || !strings.Contains(out, c.want) {
			t.Errorf("%s %v: %v %s", c.tool, c.args, isErr, out)
		}
	}
	list, _ := r.call(t, mcpserver.ListTool, nil)
	if list != "No subagents yet." {
		t.Errorf("a refused spawn recorded something:\n%s", list)
	}
	// An instance that fails is an error result with its relay.
	out, isErr := r.call(t, mcpserver.SpawnTool, map[string]any{"subagent_type": "broken", "task": "x"})
	if !isErr || !strings.Contains(out, "(broken): failed") || !strings.Contains(out, "\nerror: ") {
		t.Errorf("failed instance: %v\n%s", isErr, out)
	}
	// A timeout too large for a Duration is the longest wait, not a
	// negative one that has passed already.
	waited, _ := r.call(t, mcpserver.WaitTool, map[string]any{"id": idOf(t, out), "timeout_seconds": 1e300})
	if !strings.Contains(waited, "(broken): failed") {
		t.Errorf("wait with a huge timeout: %s", waited)
	}
}

// A foreground spawn whose call the client cancels cancels its instance,
// as a parent's cancelled spawn call cancels its child.
func TestMcpHTTPCancelledForegroundSpawnCancelsItsInstance(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.session.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.SpawnTool,
			Arguments: map[string]any{"subagent_type": "waiter", "task": "wait"}})
		done <- err
	}()
	var id string
	waitFor(t, func() bool {
		all, err := r.rt.List(context.Background(), deputy.Filter{OnlyRoots: true})
		if err != nil || len(all) == 0 {
			return false
		}
		id = all[0].ID
		return true
	})
	atGate(t, r.rt, id)
	cancel()
	if err := <-done; err == nil {
		t.Error("the cancelled call returned no error")
	}
	waitFor(t, func() bool {
		in, err := r.rt.Get(context.Background(), id)
		return err == nil && in.State == deputy.Cancelled
	})
}

// waitFor polls a condition (not a duration) on a short ticker, for at most
// twenty seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 20 s")
		}
		<-tick.C
	}
}

// atGate waits until instance id runs and has called the gate: its
// transcript holds the task and the call.
func atGate(t *testing.T, rt *deputy.Runtime, id string) {
	t.Helper()
	waitFor(t, func() bool {
		in, err := rt.Get(context.Background(), id)
		if err != nil || in.State != store.Running {
			return false
		}
		msgs, err := rt.Transcript(context.Background(), id)
		return err == nil && len(msgs) >= 2
	})
}
