// Package mcptool is deputy's MCP client: it starts one MCP server (a
// command spoken to over stdio, or a URL over streamable HTTP or SSE),
// lists its tools and offers each as a tool.Tool named
// mcp__<server>__<tool>, the naming Claude Code uses, so allowlists written
// for it mean the same here.
//
// What the caller gives is final: ${VAR} references in a definition are
// expanded by package agent before a Server reaches Connect. Values that
// came from the environment (tokens, mostly) are listed in Server.Secrets
// and replaced by [redacted] in everything this package returns: errors,
// tool output, a server's stderr quoted in a start error.
//
// Built on github.com/modelcontextprotocol/go-sdk (mcp.CommandTransport,
// mcp.StreamableClientTransport, mcp.SSEClientTransport).
package mcptool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deputy-run/deputy/tool/shell/tether"
)

// Transports a Server may use.
const (
	Stdio = "stdio"
	HTTP  = "http" // streamable HTTP
	SSE   = "sse"  // the older HTTP+SSE transport
)

// DefaultTerminateWait is how long Close waits for a stdio server to exit
// once its stdin is closed (the MCP spec's first step), before SIGTERM and,
// as long again later, SIGKILL.
const DefaultTerminateWait = 2 * time.Second

// Server says how to reach one MCP server.
type Server struct {
	// Name is the server's name in tool names (mcp__NAME__tool).
	Name string
	// Transport is Stdio, HTTP or SSE.
	Transport string

	// Command and Args start a stdio server; Env is its whole environment
	// (KEY=VALUE), nothing inherited; Dir its working directory ("" for
	// deputy's).
	Command string
	Args    []string
	Env     []string
	Dir     string

	// URL and Headers reach an HTTP or SSE server.
	URL     string
	Headers map[string]string

	// Secrets never appear in what the session returns: each is replaced
	// by [redacted] (values shorter than 4 bytes are left alone, so a "1"
	// does not garble every number).
	Secrets []string
	// TerminateWait overrides DefaultTerminateWait.
	TerminateWait time.Duration
}

// Session is a connection to one running server. Its methods are safe for
// concurrent use.
type Session struct {
	srv    Server
	cs     *mcp.ClientSession
	cmd    *exec.Cmd       // stdio only
	untie  func()          // stdio only: releases the thread the server is tethered to (package tether)
	stderr *tail           // stdio only: the end of what the server wrote to stderr
	http   *http.Transport // HTTP and SSE: its own, so Close can drop its connections
	end    context.CancelFunc
	once   sync.Once
	closed error
}

// Connect starts the server and opens an initialized session. ctx bounds
// the start (process, connection and handshake), not the session, which
// lasts until Close. On error nothing is left running, and the error says
// what failed in the server's name.
func Connect(ctx context.Context, srv Server) (*Session, error) {
	s := &Session{srv: srv}
	client := mcp.NewClient(&mcp.Implementation{Name: "deputy", Version: "1"}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: a child's tools are all a
		// server gets from deputy.
		Capabilities: &mcp.ClientCapabilities{},
	})
	var t mcp.Transport
	switch srv.Transport {
	case Stdio, "":
		if srv.Command == "" {
			return nil, s.errorf("no command to start")
		}
		s.stderr = &tail{max: 4 << 10}
		wait := srv.TerminateWait
		if wait <= 0 {
			wait = DefaultTerminateWait
		}
		t = &tetheredTransport{s: s, wait: wait}
	case HTTP, SSE:
		if srv.URL == "" {
			return nil, s.errorf("no url to connect to")
		}
		s.http = http.DefaultTransport.(*http.Transport).Clone()
		hc := &http.Client{Transport: headerTransport{base: s.http, headers: srv.Headers}}
		if srv.Transport == HTTP {
			// No standalone SSE stream: deputy reads a server's tools once
			// per run and needs nothing the server would push.
			t = &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: 2}
		} else {
			t = &mcp.SSEClientTransport{Endpoint: srv.URL, HTTPClient: hc}
		}
	default:
		return nil, s.errorf("transport %q does not exist (stdio, http or sse)", srv.Transport)
	}
	// The session outlives ctx, which bounds only the start: the SSE
	// transport would tie its stream to the context it connects with.
	life, end := context.WithCancel(context.WithoutCancel(ctx))
	s.end = end
	stop := context.AfterFunc(ctx, end)
	cs, err := client.Connect(life, t, nil)
	if !stop() && err == nil {
		_ = cs.Close() // ctx ended as it connected: the start was cut short all the same
		err = context.Cause(ctx)
	}
	if err != nil {
		s.release()
		return nil, s.startError(ctx, err)
	}
	s.cs = cs
	return s, nil
}

// startError explains a failed start: the cause, the deadline if that was
// it, and for a stdio server the end of its stderr, where servers say why
// they quit.
func (s *Session) startError(ctx context.Context, err error) error {
	msg := err.Error()
	if ctx.Err() != nil {
		msg = "cut short before the server answered the MCP handshake: " + context.Cause(ctx).Error()
	}
	if s.stderr != nil {
		if e := strings.TrimSpace(s.stderr.String()); e != "" {
			msg += "; its stderr ends: " + lastLines(e, 5, 600)
		}
	}
	return s.errorf("start failed: %s", msg)
}

// errorf is an error naming the server, with its secrets redacted.
func (s *Session) errorf(format string, args ...any) error {
	return errors.New(s.redact(fmt.Sprintf("mcp server %q: "+format, append([]any{s.srv.Name}, args...)...)))
}

// redact replaces the server's secrets in text.
func (s *Session) redact(text string) string {
	for _, v := range s.srv.Secrets {
		if len(v) >= 4 {
			text = strings.ReplaceAll(text, v, "[redacted]")
		}
	}
	return text
}

// Name is the server's name.
func (s *Session) Name() string { return s.srv.Name }

// PID is a stdio server's process id, 0 for an HTTP or SSE server.
func (s *Session) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Close ends the session: a stdio server's stdin is closed and it is
// waited for (then SIGTERM, then SIGKILL, then whatever is left of its
// process group is killed); an HTTP session is ended with DELETE and its
// connections dropped. Close is idempotent and safe to call from several
// goroutines; it returns the first call's error.
func (s *Session) Close() error {
	s.once.Do(func() {
		if s.cs != nil {
			err := s.cs.Close()
			if err != nil && s.cmd != nil && isExitAfterClose(err) {
				err = nil // a server ended by its closed stdin or our signal
			}
			if err != nil {
				s.closed = s.errorf("close: %v", err)
			}
		}
		s.release()
	})
	return s.closed
}

// release frees what a session holds apart from the MCP session itself.
func (s *Session) release() {
	if s.end != nil {
		s.end()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		killGroup(s.cmd)
	}
	if s.untie != nil {
		// After the session's Close has reaped the server, or after a start
		// that failed: nothing of it is left to tie to deputy. A session
		// dropped without Close keeps its thread, and the server, until
		// deputy exits.
		s.untie()
	}
	if s.http != nil {
		s.http.CloseIdleConnections()
	}
}

// isExitAfterClose reports whether err is only how a stdio server ended
// after Close asked it to: a non-zero exit or a signal.
func isExitAfterClose(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}

// tetheredTransport is mcp.CommandTransport with the server started by
// package tether: pid 1 of a PID namespace of its own with a parent-death
// signal, so that when deputy dies, even by SIGKILL, the server and all it
// started die too (npx's node, a tool's subprocesses), instead of working
// on for no one.
type tetheredTransport struct {
	s    *Session
	wait time.Duration
}

func (t *tetheredTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	srv := t.s.srv
	var conn mcp.Connection
	build := func() *exec.Cmd {
		cmd := exec.Command(srv.Command, srv.Args...)
		cmd.Env = srv.Env
		if cmd.Env == nil {
			cmd.Env = []string{} // nil would inherit deputy's environment, API keys included
		}
		cmd.Dir = srv.Dir
		cmd.Stderr = t.s.stderr
		ownGroup(cmd)
		return cmd
	}
	cmd, untie, err := tether.Start(build, func(cmd *exec.Cmd) (err error) {
		conn, err = (&mcp.CommandTransport{Command: cmd, TerminateDuration: t.wait}).Connect(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	t.s.cmd, t.s.untie = cmd, untie
	return conn, nil
}

// headerTransport adds a server's configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range h.headers {
			req.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(req)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// lastLines is the last n lines of s, at most max bytes, on one line.
func lastLines(s string, n, max int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := strings.Join(lines, " | ")
	if len(out) > max {
		out = "…" + strings.ToValidUTF8(out[len(out)-max:], "")
	}
	return out
}
