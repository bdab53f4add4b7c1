package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/mcptool"
	"github.com/deputy-run/deputy/tool/mcptool/mcptest"
)

func stdio(t *testing.T, mode, notify string, secrets ...string) mcptool.Server {
	t.Helper()
	cmd, args := mcptest.Command(mode, t.TempDir(), notify)
	return mcptool.Server{Name: "calc", Transport: mcptool.Stdio, Command: cmd, Args: args,
		Env: []string{"MCPTEST_TOKEN=tok-3f9a-very-secret"}, Secrets: secrets}
}

func connect(t *testing.T, srv mcptool.Server) *mcptool.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mcptool.Connect(ctx, srv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tools(t *testing.T, s *mcptool.Session) map[string]*mcptool.Tool {
	t.Helper()
	list, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcptool.Tool{}
	for _, x := range list {
		out[x.Spec().Name] = x
	}
	return out
}

// gone reports whether no process has pid (it was waited for: not even a
// zombie is left).
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// A stdio server's tools become deputy tools: named mcp__server__tool,
// the schema the server gave, read-only only where the server says so;
// calls return the content as text, an isError result is a tool error,
// and closing the session ends the process.
func TestStdioServerTools(t *testing.T) {
	t.Parallel()
	srv := stdio(t, mcptest.ModeServe, "")
	s := connect(t, srv)
	ts := tools(t, s)
	var names []string
	for n := range ts {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"mcp__calc__add", "mcp__calc__block", "mcp__calc__env", "mcp__calc__fail", "mcp__calc__picture",
		"mcp__calc__pid", "mcp__calc__secret_write"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	add, write := ts["mcp__calc__add"], ts["mcp__calc__secret_write"]
	if !add.ReadOnly() || write.ReadOnly() {
		t.Errorf("read-only: add %v (want true), secret_write %v (want false)", add.ReadOnly(), write.ReadOnly())
	}
	var schema map[string]any
	if err := json.Unmarshal(add.Spec().InputSchema, &schema); err != nil || schema["type"] != "object" ||
		schema["properties"].(map[string]any)["a"] == nil {
		t.Errorf("add's schema %s (%v)", add.Spec().InputSchema, err)
	}
	if add.Spec().Description != "Add two numbers." || add.MCPName() != "add" || add.Server() != "calc" {
		t.Errorf("add: %+v %s %s", add.Spec(), add.MCPName(), add.Server())
	}

	// Through a tool.Set, as the loop calls them.
	list, _ := s.Tools(context.Background())
	var tt []tool.Tool
	for _, x := range list {
		tt = append(tt, x)
	}
	set, err := tool.NewSet(tt...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if out, isErr := set.Call(ctx, "mcp__calc__add", json.RawMessage(`{"a":2,"b":3.5}`)); isErr || out != "5.5" {
		t.Errorf("add: %q %v", out, isErr)
	}
	for i := 1; i <= 2; i++ {
		out, isErr := set.Call(ctx, "mcp__calc__secret_write", json.RawMessage(`{"text":"x"}`))
		if isErr || !strings.Contains(out, "calls so far") {
			t.Errorf("secret_write %d: %q %v", i, out, isErr)
		}
	}
	if n := mcptest.Calls(srv.Args[2]); n != 2 {
		t.Errorf("the server recorded %d calls, want 2", n)
	}
	if out, isErr := set.Call(ctx, "mcp__calc__fail", nil); !isErr || out != "it failed on purpose" {
		t.Errorf("fail: %q %v", out, isErr)
	}
	if out, isErr := set.Call(ctx, "mcp__calc__picture", nil); isErr || out != "[image image/png, 9 bytes, not shown]\na caption" {
		t.Errorf("picture: %q %v", out, isErr)
	}
	if out, isErr := set.Call(ctx, "mcp__calc__add", json.RawMessage(`{"a":"two"}`)); !isErr || !strings.Contains(out, "invalid arguments") {
		t.Errorf("bad arguments are refused before the call: %q %v", out, isErr)
	}

	pid := s.PID()
	if pid == 0 || gone(pid) {
		t.Fatalf("pid %d not running", pid)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if !gone(pid) {
		t.Errorf("server %d still running after Close", pid)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second close: %v", err)
	}
	if out, isErr := set.Call(ctx, "mcp__calc__add", json.RawMessage(`{"a":1,"b":1}`)); !isErr || !strings.Contains(out, `mcp server "calc"`) {
		t.Errorf("a call after close is a tool error naming the server: %q %v", out, isErr)
	}
}

// Secrets a server was given never come back: not in its output, not in
// the stderr a start error quotes.
func TestSecretsAreRedacted(t *testing.T) {
	t.Parallel()
	const secret = "tok-3f9a-very-secret"
	s := connect(t, stdio(t, mcptest.ModeServe, "", secret))
	defer s.Close()
	out, err := tools(t, s)["mcp__calc__env"].Run(context.Background(), json.RawMessage(`{"name":"MCPTEST_TOKEN"}`))
	if err != nil || out != "MCPTEST_TOKEN=[redacted]" {
		t.Errorf("env: %q %v", out, err)
	}

	_, err = mcptool.Connect(context.Background(), stdio(t, mcptest.ModeDie, "", secret))
	if err == nil {
		t.Fatal("a server that exits at once started")
	}
	msg := err.Error()
	if strings.Contains(msg, secret) || !strings.Contains(msg, `fatal: token "[redacted]" refused`) ||
		!strings.HasPrefix(msg, `mcp server "calc": start failed:`) {
		t.Errorf("start error %q: want the server's name, its stderr, and no secret", msg)
	}
}

// A server that cannot start says why in its name, promptly; one that
// never answers the handshake is given up when the start's context ends,
// and nothing is left running.
func TestStartFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := mcptool.Connect(ctx, mcptool.Server{Name: "gh", Command: "/nonexistent/deputy-mcp-server"})
	if err == nil || !strings.Contains(err.Error(), `mcp server "gh": start failed:`) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing command: %v", err)
	}
	_, err = mcptool.Connect(ctx, mcptool.Server{Name: "gh", Transport: "websocket", URL: "ws://x"})
	if err == nil || !strings.Contains(err.Error(), `transport "websocket" does not exist`) {
		t.Errorf("unknown transport: %v", err)
	}
	_, err = mcptool.Connect(ctx, mcptool.Server{Name: "gh", Transport: mcptool.HTTP})
	if err == nil || !strings.Contains(err.Error(), "no url") {
		t.Errorf("no url: %v", err)
	}

	srv := stdio(t, mcptest.ModeHang, "")
	srv.TerminateWait = 50 * time.Millisecond
	hctx, cancel := context.WithCancelCause(ctx)
	// The server never answers, so the start waits until its context
	// ends (a timeout, in deputy): here it has ended already.
	cancel(errors.New("start timeout of 30s"))
	start := time.Now()
	_, err = mcptool.Connect(hctx, srv)
	if err == nil || !strings.Contains(err.Error(), "cut short before the server answered the MCP handshake: start timeout of 30s") {
		t.Errorf("hanging server: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("giving up took %v", d)
	}
}

// A call cut short by its context returns at once with the cause; the
// session stays usable. A server that died makes calls fail, not hang.
func TestCallCancelledAndServerGone(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := connect(t, stdio(t, mcptest.ModeServe, ln.Addr().String()))
	defer s.Close()
	ts := tools(t, s)

	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := ts["mcp__calc__block"].Run(ctx, nil)
		done <- err
	}()
	c, err := ln.Accept() // the call has reached the server
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	cancel(errors.New("wall-time limit reached"))
	if err := <-done; err == nil || !strings.Contains(err.Error(), "wall-time limit reached") {
		t.Errorf("cancelled call: %v", err)
	}
	if out, err := ts["mcp__calc__add"].Run(context.Background(), json.RawMessage(`{"a":1,"b":2}`)); err != nil || out != "3" {
		t.Errorf("after a cancelled call: %q %v", out, err)
	}

	if err := syscall.Kill(s.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if _, err := ts["mcp__calc__add"].Run(cctx, json.RawMessage(`{"a":1,"b":2}`)); err == nil ||
		!strings.Contains(err.Error(), `mcp server "calc": tool add:`) || cctx.Err() != nil {
		t.Errorf("a call to a dead server: %v (context: %v)", err, cctx.Err())
	}
}

// An HTTP server gets the configured headers on every request; without
// them it refuses, and the start error says so without the header's
// value. Closing the session deletes it on the server.
func TestHTTPServer(t *testing.T) {
	t.Parallel()
	const token = "Bearer hdr-51c2-secret"
	entered, left := make(chan struct{}, 1), make(chan struct{}, 1)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		return mcptest.NewServer(mcptest.Options{Dir: t.TempDir(), Entered: entered, Left: left})
	}, nil)
	var mu sync.Mutex
	var methods []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != token {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		methods = append(methods, r.Method)
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()

	srv := mcptool.Server{Name: "remote", Transport: mcptool.HTTP, URL: ts.URL + "/mcp",
		Headers: map[string]string{"Authorization": token}, Secrets: []string{token}}
	s := connect(t, srv)
	list := tools(t, s)
	if out, err := list["mcp__remote__add"].Run(context.Background(), json.RawMessage(`{"a":40,"b":2}`)); err != nil || out != "42" {
		t.Errorf("add over http: %q %v", out, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := list["mcp__remote__block"].Run(ctx, nil); done <- err }()
	<-entered
	cancel()
	if err := <-done; err == nil {
		t.Error("a cancelled call over http returned no error")
	}
	<-left // the server heard of the cancel (notifications/cancelled)
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	mu.Lock()
	if !slices.Contains(methods, http.MethodDelete) {
		t.Errorf("no DELETE ended the session: %v", methods)
	}
	mu.Unlock()

	srv.Headers = nil
	_, err := mcptool.Connect(context.Background(), srv)
	if err == nil || !strings.Contains(err.Error(), `mcp server "remote": start failed`) ||
		!strings.Contains(err.Error(), "Unauthorized") || strings.Contains(err.Error(), "hdr-51c2") {
		t.Errorf("refused start: %v", err)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	if n := mcptool.Name("github", "create_issue"); n != "mcp__github__create_issue" {
		t.Errorf("plain: %s", n)
	}
	if n := mcptool.Name("docs", "search.v2/all"); n != "mcp__docs__search_v2_all" {
		t.Errorf("sanitized: %s", n)
	}
	a := mcptool.Name("server", strings.Repeat("x", 80)+"a")
	b := mcptool.Name("server", strings.Repeat("x", 80)+"b")
	if len(a) != 64 || len(b) != 64 || a == b || !strings.HasPrefix(a, "mcp__server__xxx") {
		t.Errorf("long names: %s %s", a, b)
	}
	if f := mcptool.FullName("server", strings.Repeat("x", 80)); len(f) != len("mcp__server__")+80 {
		t.Errorf("full name %s", f)
	}
}

// An SSE server's session outlives the context its start was bounded by
// (the transport would tie its stream to it).
func TestSSEServerOutlivesTheStartContext(t *testing.T) {
	t.Parallel()
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer(mcptest.Options{}) }, nil)
	ts := httptest.NewServer(h)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	s, err := mcptool.Connect(ctx, mcptool.Server{Name: "old", Transport: mcptool.SSE, URL: ts.URL})
	cancel() // the start is over
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out, err := tools(t, s)["mcp__old__add"].Run(context.Background(), json.RawMessage(`{"a":1,"b":2}`)); err != nil || out != "3" {
		t.Errorf("add over sse after the start's context ended: %q %v", out, err)
	}
}
