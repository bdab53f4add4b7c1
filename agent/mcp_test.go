package agent_test

// MCP servers of a definition, end to end: a child whose type names MCP
// servers gets their tools (those its allowlist leaves) and calls them on
// real servers — this test binary started again as a stdio server
// (mcptest), and an in-process streamable HTTP server — through the real
// runner, loop and scripted model. Each test checks that the servers are
// gone once the child's run ends, however it ends.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool/mcptool/mcptest"
)

// mcpToken is the secret the tests' definitions pass to their servers as
// ${DEPUTY_TEST_MCP_TOKEN}: set in this process's environment, where
// deputy expands references from.
var mcpToken = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	tok := "tok-" + hex.EncodeToString(b)
	if err := os.Setenv("DEPUTY_TEST_MCP_TOKEN", tok); err != nil {
		panic(err)
	}
	return tok
}()

// stdioServer is the mcpServers entry of a stdio test server called name.
func stdioServer(name, mode, dir, notify string) string {
	cmd, args := mcptest.Command(mode, dir, notify)
	c, _ := json.Marshal(cmd)
	a, _ := json.Marshal(args)
	return fmt.Sprintf("  %s:\n    command: %s\n    args: %s\n    env:\n      MCPTEST_TOKEN: ${DEPUTY_TEST_MCP_TOKEN}\n", name, c, a)
}

// mcpDefinition parses a definition file with the given tools line (may
// be "") and mcpServers block, failing on any error.
func mcpDefinition(t *testing.T, name, tools, servers string) *agentdef.Definition {
	t.Helper()
	src := "---\nname: " + name + "\ndescription: Computes with an MCP server.\n" + tools + "mcpServers:\n" + servers +
		"---\nYou compute with MCP tools.\n"
	p := agentdef.ParseDefinition(name+".md", []byte(src))
	if len(p.Errors) > 0 {
		t.Fatalf("%v\n%s", p.Errors, src)
	}
	return p.Def
}

type mcpWorld struct {
	model  *recording
	runner *agent.Runner
	task   agent.Task
}

func newMCPWorld(t *testing.T, scenario string, defs ...*agentdef.Definition) *mcpWorld {
	t.Helper()
	s, err := fake.ParseScenario([]byte(scenario), t.Name()+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := &mcpWorld{model: &recording{Model: fake.NewModel(s, fake.WithoutLatency())}, runner: &agent.Runner{
		Config: &agentdef.Config{MCP: agentdef.MCPConfig{Env: []string{"DEPUTY_TEST_MCP_TOKEN", "DEPUTY_TEST_SURELY_UNSET"}}}}}
	w.task = agent.Task{Task: "go", System: "root", Model: w.model, ModelName: "fake", Volatile: defs}
	return w
}

// gone reports whether no process has pid (it exited and was waited for).
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// pidIn finds the number after "pid=" in s.
func pidIn(t *testing.T, s string) int {
	t.Helper()
	_, rest, ok := strings.Cut(s, "pid=")
	if !ok {
		t.Fatalf("no pid in %q", s)
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	pid, err := strconv.Atoi(rest[:end])
	if err != nil || pid <= 0 {
		t.Fatalf("bad pid in %q", s)
	}
	return pid
}

// A child whose type names a stdio MCP server is offered the tools its
// allowlist names, under mcp__calc__*, and its calls reach the server: a
// result, a side effect the server counted, an isError result as a tool
// error. A tool of the server outside the allowlist is neither offered nor
// run. When the child ends its server has exited, and the server's token
// (an env ${VAR}) is nowhere in what deputy kept.
func TestMCPStdioServerOfAChild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	def := mcpDefinition(t, "calc", "tools: mcp__calc__add, mcp__calc__secret_write, mcp__calc__pid, mcp__calc__fail, Read\n",
		stdioServer("calc", mcptest.ModeServe, dir, ""))
	w := newMCPWorld(t, `
rules:
  - match: {system: "You compute", turn: 1}
    tool_calls:
      - {name: mcp__calc__add, input: {a: 2, b: 3}}
      - {name: mcp__calc__pid, input: {}}
      - {name: mcp__calc__env, input: {name: MCPTEST_TOKEN}}
  - match: {system: "You compute", turn: 2}
    tool_calls:
      - {name: mcp__calc__secret_write, input: {text: hello}}
      - {name: mcp__calc__fail, input: {}}
  - match: {system: "You compute", turn: 3}
    text: 'add={{.Result "mcp__calc__add"}} pid={{.Result "mcp__calc__pid"}} write={{.Result "mcp__calc__secret_write"}} fail={{.Result "mcp__calc__fail"}} env={{.Result "mcp__calc__env"}}'
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: calc, task: "add two and three"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`, def)
	var events []agent.Event
	var mu sync.Mutex
	w.runner.OnEvent = func(e agent.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
	o, err := w.runner.Run(context.Background(), w.task)
	if err != nil {
		t.Fatal(err)
	}
	answer := o.Result.Answer
	for _, want := range []string{"add=5 ", "write=written; 1 calls so far", "fail=it failed on purpose",
		`env=unknown tool "mcp__calc__env"`} {
		if !strings.Contains(answer, want) {
			t.Errorf("answer lacks %q:\n%s", want, answer)
		}
	}
	if n := mcptest.Calls(dir); n != 1 {
		t.Errorf("the server counted %d secret_write calls, want 1", n)
	}
	offered := w.model.toolsOffered("You compute")
	// In the server's order (the go-sdk server lists by name).
	want := []string{"read_file", "mcp__calc__add", "mcp__calc__fail", "mcp__calc__pid", "mcp__calc__secret_write"}
	if len(offered) != 3 {
		t.Fatalf("%d child requests, want 3", len(offered))
	}
	for i, got := range offered {
		// read_file is named but the root has no such tool to pass on.
		if !slices.Equal(got, want[1:]) {
			t.Errorf("request %d offered %v, want %v", i+1, got, want[1:])
		}
	}
	if pid := pidIn(t, answer); !gone(pid) {
		t.Errorf("the server (pid %d) still runs after its child ended", pid)
	}

	// The token reached the server (its env), yet nothing deputy keeps holds it.
	rec, _ := json.Marshal(events)
	if strings.Contains(answer, mcpToken) || strings.Contains(string(rec), mcpToken) {
		t.Error("the server's token leaked into the answer or the events")
	}
	for _, in := range o.Instances {
		m, _ := o.Transcript(in.ID)
		if b, _ := json.Marshal(m); strings.Contains(string(b), mcpToken) {
			t.Errorf("the token is in %s's transcript", in.ID)
		}
	}
	snap, _ := json.Marshal(def)
	if !strings.Contains(string(snap), `"MCPTEST_TOKEN":"${DEPUTY_TEST_MCP_TOKEN}"`) {
		t.Errorf("the stored definition should hold the reference, as written: %s", snap)
	}
}

// The server's own output is redacted too: a tool that prints the token
// it was given returns [redacted] in its place.
func TestMCPSecretsRedactedFromResults(t *testing.T) {
	t.Parallel()
	def := mcpDefinition(t, "calc", "tools: mcp__calc__env\n", stdioServer("calc", mcptest.ModeServe, t.TempDir(), ""))
	w := newMCPWorld(t, `
rules:
  - match: {system: "You compute", turn: 1}
    tool_calls: [{name: mcp__calc__env, input: {name: MCPTEST_TOKEN}}]
  - match: {system: "You compute", turn: 2}
    text: '{{.Result "mcp__calc__env"}}'
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: calc, task: "show the token"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`, def)
	o, err := w.runner.Run(context.Background(), w.task)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(o.Result.Answer, "MCPTEST_TOKEN=[redacted]") || strings.Contains(o.Result.Answer, mcpToken) {
		t.Errorf("answer %q", o.Result.Answer)
	}
}

// An HTTP MCP server (type http, written in Claude Code's list form) gets
// its headers, ${VAR} expanded; mcp__remote admits all its tools but the
// denied one; the session is deleted on the server when the child ends.
func TestMCPHTTPServerOfAChild(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var methods []string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		return mcptest.NewServer(mcptest.Options{Dir: t.TempDir()})
	}, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+mcpToken {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		methods = append(methods, r.Method)
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	def := mcpDefinition(t, "remote", "tools: [mcp__remote]\ndisallowedTools: mcp__remote__block\n", fmt.Sprintf(`
  - remote:
      type: http
      url: %s/mcp
      headers:
        Authorization: "Bearer ${DEPUTY_TEST_MCP_TOKEN}"
  - github
`, ts.URL))
	w := newMCPWorld(t, `
rules:
  - match: {system: "You compute", turn: 1}
    tool_calls: [{name: mcp__remote__add, input: {a: 40, b: 2}}]
  - match: {system: "You compute", turn: 2}
    text: 'add={{.Result "mcp__remote__add"}}'
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: remote, task: "add"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`, def)
	o, err := w.runner.Run(context.Background(), w.task)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(o.Result.Answer, "add=42") {
		t.Errorf("answer %q", o.Result.Answer)
	}
	offered := w.model.toolsOffered("You compute")
	want := []string{"mcp__remote__add", "mcp__remote__env", "mcp__remote__fail", "mcp__remote__picture",
		"mcp__remote__pid", "mcp__remote__secret_write"}
	if len(offered) == 0 || !slices.Equal(offered[0], want) {
		t.Errorf("offered %v, want %v", offered, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(methods, http.MethodDelete) {
		t.Errorf("the session was not ended (requests: %v)", methods)
	}
}

// A server that cannot start refuses the spawn, naming the server and the
// cause; nothing is listed. So does a ${VAR} deputy's environment lacks,
// and one deputy.yaml's mcp.env does not list.
func TestMCPServerThatCannotStartRefusesTheSpawn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, servers, want string
	}{
		{"missing command", "  calc:\n    command: /nonexistent/deputy-mcp-server\n",
			`spawn refused: calc cannot start its MCP servers: mcp server "calc": start failed: fork/exec /nonexistent/deputy-mcp-server: no such file or directory`},
		{"server exits", stdioServer("calc", mcptest.ModeDie, t.TempDir(), ""),
			`fatal: token "[redacted]" refused by upstream`},
		{"unset variable", "  calc:\n    command: x\n    env:\n      T: ${DEPUTY_TEST_SURELY_UNSET}\n",
			`spawn refused: calc cannot start its MCP servers: mcp server "calc": env T: ${DEPUTY_TEST_SURELY_UNSET} is not set in deputy's environment`},
		// A reference deputy.yaml does not allow is refused even when the
		// variable is set: a definition cannot read deputy's provider key.
		{"variable not allowed", "  calc:\n    url: http://127.0.0.1:9/x\n    headers:\n      X-Key: ${OPENAI_API_KEY}\n",
			`spawn refused: calc cannot start its MCP servers: mcp server "calc": headers X-Key: ${OPENAI_API_KEY} may not be read: deputy.yaml's mcp.env does not list OPENAI_API_KEY`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			def := mcpDefinition(t, "calc", "", c.servers)
			w := newMCPWorld(t, `
rules:
  - match: {system: "You compute"}
    text: "should never run"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: calc, task: "add"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`, def)
			o, err := w.runner.Run(context.Background(), w.task)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(o.Result.Answer, c.want) || strings.Contains(o.Result.Answer, mcpToken) {
				t.Errorf("answer %q\nwant it to contain %q", o.Result.Answer, c.want)
			}
			if len(o.Instances) != 1 {
				t.Errorf("%d instances; a refused spawn lists nothing", len(o.Instances))
			}
		})
	}
}

// A server that never answers the handshake is given up at its start
// timeout, on the runner's clock, and the spawn is refused.
func TestMCPStartTimeout(t *testing.T) {
	t.Parallel()
	def := mcpDefinition(t, "calc", "", stdioServer("calc", mcptest.ModeHang, t.TempDir(), "")+"    startTimeout: 5s\n")
	w := newMCPWorld(t, `
rules:
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: calc, task: "add"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`, def)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w.runner.Clock = clk
	done := make(chan *agent.Outcome, 1)
	go func() {
		o, err := w.runner.Run(context.Background(), w.task)
		if err != nil {
			t.Error(err)
		}
		done <- o
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := clk.WaitPending(ctx, 1); err != nil { // the start's timer, the only one
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second)
	o := <-done
	want := `spawn refused: calc cannot start its MCP servers: mcp server "calc": start failed: cut short before the server answered the MCP handshake: start timeout of 5s`
	if o == nil || !strings.Contains(o.Result.Answer, want) {
		t.Errorf("answer %v\nwant %q", o, want)
	}
}

// blockScenario: the child learns its server's pid, then calls block,
// which tells the test it was entered and waits until cancelled.
const blockScenario = `
rules:
  - match: {system: "You compute", turn: 1}
    tool_calls: [{name: mcp__calc__pid, input: {}}]
  - match: {system: "You compute", turn: 2}
    text: 'pid={{.Result "mcp__calc__pid"}}'
    tool_calls: [{name: mcp__calc__block, input: {}}]
  - match: {system: "You compute"}
    text: 'pid={{.Result "mcp__calc__pid"}} unblocked: {{.Result "mcp__calc__block"}}'
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: calc, task: "wait"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

// A child cut off in the middle of an MCP call, by a cancel or by its
// wall-time budget, ends as cancelled or timed out, and its server exits.
func TestMCPServerStopsWhenTheChildIsCutOff(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"cancel", "timeout"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			servers := stdioServer("calc", mcptest.ModeServe, t.TempDir(), ln.Addr().String())
			def := mcpDefinition(t, "calc", "budget: {wallTime: 60s}\n", servers)
			w := newMCPWorld(t, blockScenario, def)
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			w.runner.Clock = clk
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan *agent.Outcome, 1)
			go func() {
				o, _ := w.runner.Run(ctx, w.task)
				done <- o
			}()
			c, err := ln.Accept() // block was entered: the child waits on its server
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			if how == "cancel" {
				cancel()
			} else {
				clk.Advance(61 * time.Second)
			}
			o := <-done
			if o == nil || len(o.Instances) != 2 {
				t.Fatalf("outcome %+v", o)
			}
			child := o.Instances[1]
			wantState := map[string]instance.State{"cancel": instance.Cancelled, "timeout": instance.TimedOut}[how]
			if child.State != wantState {
				t.Errorf("child state %s, want %s", child.State, wantState)
			}
			m, _ := o.Transcript(child.ID)
			var text strings.Builder
			for _, msg := range m {
				for _, b := range msg.Content {
					text.WriteString(b.Text)
				}
			}
			if pid := pidIn(t, text.String()); !gone(pid) {
				t.Errorf("the server (pid %d) still runs after its child was cut off", pid)
			}
		})
	}
}

// A child's run that stops to wait (paused, here by its inbox) stops its
// servers; its next run starts them again, and they serve it.
func TestMCPServersRestartWithTheNextRun(t *testing.T) {
	t.Parallel()
	def := mcpDefinition(t, "calc", "", stdioServer("calc", mcptest.ModeServe, t.TempDir(), ""))
	w := newMCPWorld(t, `
rules:
  - match: {system: "You compute", last_user: "^second run$"}
    tool_calls: [{name: mcp__calc__pid, input: {}}]
  - match: {system: "You compute", tool_result: "^[0-9]+$"}
    text: 'pid={{.Result "mcp__calc__pid"}}'
  - match: {system: "You compute"}
    tool_calls: [{name: mcp__calc__pid, input: {}}]
`)
	lineage := []agent.Lineage{{ID: "i-calc", Definition: def, Mode: agentdef.ModeIsolated, Task: "first run"}}
	pause := func(context.Context, int) ([]string, loop.StopReason, error) { return nil, loop.StopSuspended, nil }
	end, err := w.runner.Continue(context.Background(), w.task, lineage, []llm.Message{llm.UserText("first run")},
		agent.ChildEnv{Inbox: pause})
	if err != nil {
		t.Fatal(err)
	}
	if end.Relay.State != instance.Paused || end.Instance.State != instance.Paused || end.Pending == nil {
		t.Fatalf("first run: %+v", end.Relay)
	}
	var first int
	for _, b := range end.Pending.Content {
		if b.Type == llm.TypeToolResult {
			first = pidIn(t, "pid="+b.Text)
		}
	}
	if !gone(first) {
		t.Errorf("the server (pid %d) still runs while its child waits", first)
	}

	end, err = w.runner.Continue(context.Background(), w.task, lineage, []llm.Message{llm.UserText("second run")}, agent.ChildEnv{})
	if err != nil {
		t.Fatal(err)
	}
	if end.Relay.State != instance.Completed {
		t.Fatalf("second run: %+v", end.Relay)
	}
	second := pidIn(t, end.Relay.Report)
	if second == first || !gone(second) {
		t.Errorf("second run's server: pid %d (first %d), gone %v", second, first, gone(second))
	}
}

// A fork child of a type with its own server gets the parent's tools,
// byte for byte, and its server's after them.
func TestMCPForkChildGetsItsServerTools(t *testing.T) {
	t.Parallel()
	def := mcpDefinition(t, "calc", "mode: fork\ntools: mcp__calc__add\n", stdioServer("calc", mcptest.ModeServe, t.TempDir(), ""))
	w := newMCPWorld(t, `
rules:
  - match: {last_user: "You are now a subagent of type calc", tools: [mcp__calc__add]}
    tool_calls: [{name: mcp__calc__add, input: {a: 1, b: 1}}]
  - match: {tool_result: "^2$"}
    text: "one and one make {{index .ToolResults 0}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: calc, task: "add"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`, def)
	o, err := w.runner.Run(context.Background(), w.task)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(o.Result.Answer, "one and one make 2") {
		t.Errorf("answer %q", o.Result.Answer)
	}
	reqs := w.model.toolsOffered("root")
	if len(reqs) < 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	parent, child := reqs[0], reqs[1]
	if !slices.Equal(child, append(slices.Clone(parent), "mcp__calc__add")) {
		t.Errorf("fork child offered %v; parent %v", child, parent)
	}
}

// A root run as a type gets its type's MCP servers for the run, as a
// spawned child of the type does, and they stop when the run ends.
func TestMCPServersOfATypedRoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	def := mcpDefinition(t, "calc", "tools: mcp__calc__add, mcp__calc__pid\n",
		stdioServer("calc", mcptest.ModeServe, dir, ""))
	w := newMCPWorld(t, `
rules:
  - match: {system: "You compute", turn: 1}
    tool_calls:
      - {name: mcp__calc__add, input: {a: 2, b: 3}}
      - {name: mcp__calc__pid, input: {}}
  - match: {system: "You compute", turn: 2}
    text: 'add={{.Result "mcp__calc__add"}} pid={{.Result "mcp__calc__pid"}}'
`, def)
	w.task.Type = "calc"
	o, err := w.runner.Run(context.Background(), w.task)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(o.Report, "add=5 ") {
		t.Fatalf("report %q", o.Report)
	}
	if pid := pidIn(t, o.Report); !gone(pid) {
		t.Errorf("the server (pid %d) still runs after the root's run ended", pid)
	}
}
