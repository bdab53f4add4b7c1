package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deputy-run/deputy/store"
)

// mcpScenario answers each type's system prompt only.
const mcpScenario = `
rules:
  - match: {system: "read-only explorer"}
    text: "Conclusion: three files.\nSources: glob.\nNot verified: nothing."
  - match: {system: "^You ask", turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "Which colour?"}}]
  - match: {system: "^You ask", turn: 2}
    text: "Painted it {{index .ToolResults 0}}."
  - text: "WRONG: unscripted"
`

const askerAgent = `---
name: asker
description: Asks which colour, then paints.
tools: Read, ask_parent
---
You ask before you paint.
`

// lockedBuffer is a bytes.Buffer safe to read while the process writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// deputy mcp as a real process, driven by the go-sdk client over its
// stdin and stdout: the tools are listed, a background child is spawned,
// waited for and its relay read (it is the recorded instance's report); an
// asking one is answered; an unknown id is a tool error; closing stdin
// ends the process cleanly, and nothing but the protocol was on stdout.
func TestMcpStdioSpawnWaitRelay(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	agents := filepath.Join(ws, ".deputy", "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{filepath.Join(ws, "scenario.yaml"): mcpScenario,
		filepath.Join(agents, "asker.md"): askerAgent} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(t.TempDir(), "deputy.db")
	cmd := exec.Command(bin, "mcp", "--model", "fake", "--scenario", "scenario.yaml", "--db", db)
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEPUTY_FAKE_LATENCY=off"}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "deputy-test", Version: "1"}, nil)
	// A long TerminateDuration: Close must not need the SIGTERM it sends
	// after it, the process ends when its stdin closes.
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Minute}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
	}
	closed := false
	defer func() {
		if !closed {
			session.Close()
		}
	}()
	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v\nstderr: %s", name, err, stderr.String())
		}
		tc, ok := res.Content[0].(*mcp.TextContent)
		if !ok || len(res.Content) != 1 {
			t.Fatalf("%s: content %v", name, res.Content)
		}
		return tc.Text, res.IsError
	}

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "spawn_subagent" && (!strings.Contains(tl.Description, "\n- asker: Asks which colour, then paints.\n") ||
			!strings.Contains(tl.Description, "\n- explorer: Fast read-only search")) {
			t.Errorf("spawn_subagent's description does not list the catalog:\n%s", tl.Description)
		}
	}
	if got := strings.Join(names, ","); len(names) != 11 || !strings.Contains(got, "spawn_subagent") || !strings.Contains(got, "subagent_wait") ||
		!strings.Contains(got, "subagent_approve") {
		t.Fatalf("tools %s", got)
	}

	idRE := regexp.MustCompile(`^subagent (i-[0-9a-f]{12}) \(`)
	out, isErr := call("spawn_subagent", map[string]any{"type": "explorer", "task": "count the files", "background": true})
	m := idRE.FindStringSubmatch(out)
	if isErr || m == nil || !strings.Contains(out, "started in the background") {
		t.Fatalf("background spawn: %v %s", isErr, out)
	}
	bg := m[1]
	relay, isErr := call("subagent_wait", map[string]any{"id": bg, "timeout_seconds": 60})
	if isErr || !strings.HasPrefix(relay, "subagent "+bg+" (explorer): completed") ||
		!strings.HasSuffix(relay, "\n\nConclusion: three files.\nSources: glob.\nNot verified: nothing.") {
		t.Fatalf("relay: %v\n%s", isErr, relay)
	}

	asked, isErr := call("spawn_subagent", map[string]any{"type": "asker", "task": "paint the shed"})
	m = idRE.FindStringSubmatch(asked)
	if isErr || m == nil || !strings.Contains(asked, "(asker): asking") || !strings.Contains(asked, "question: Which colour?") {
		t.Fatalf("asking: %v %s", isErr, asked)
	}
	if out, isErr := call("subagent_answer", map[string]any{"id": m[1], "text": "green"}); isErr {
		t.Fatalf("answer: %s", out)
	}
	if out, isErr := call("subagent_wait", map[string]any{"id": m[1]}); isErr || !strings.HasSuffix(out, "\n\nPainted it green.") {
		t.Fatalf("after the answer: %v %s", isErr, out)
	}
	if out, isErr := call("subagent_status", map[string]any{"id": "i-ffffffffffff"}); !isErr || !strings.Contains(out, `no subagent "i-ffffffffffff"`) {
		t.Errorf("unknown id: %v %s", isErr, out)
	}

	// Closing stdin ends the server; the process exits 0 on its own.
	start := time.Now()
	if err := session.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	closed = true
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the process took %s to exit after its stdin closed", d)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d\nstderr: %s", code, stderr.String())
	}

	// The relay read over MCP is the recorded instance's report.
	st, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	in, err := st.GetInstance(context.Background(), bg)
	if err != nil {
		t.Fatal(err)
	}
	if in.Type != "explorer" || in.State != store.Completed || in.Parent != "" || !strings.HasSuffix(relay, "\n\n"+in.Report) {
		t.Errorf("recorded %s %s %q", in.Type, in.State, in.Report)
	}
}

// Without a model, deputy mcp says how to configure one and exits 2
// before speaking the protocol.
func TestMcpWithoutModelIsAUsageError(t *testing.T) {
	t.Parallel()
	out, errOut, code := deputy(t, t.TempDir(), nil, "mcp")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "no model configured") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
