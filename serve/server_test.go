package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/mcpserver"
	"github.com/deputy-run/deputy/serve"
	"github.com/deputy-run/deputy/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "test-token-0123456789abcdef"

// A root that spawns two explorers in parallel, asks its person which
// branch, and finishes with the answer.
const scenario = `
rules:
  - match: {system: "read-only explorer"}
    text: "found {{.Task}}"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "part one"}}
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "part two"}}
  - match: {turn: 2}
    tool_calls: [{name: ask_parent, input: {question: "Which branch?"}}]
  - match: {turn: 3}
    text: "merged into {{index .ToolResults 0}}"
`

type env struct {
	t     *testing.T
	rt    *deputy.Runtime
	srv   *serve.Server
	http  *httptest.Server
	clock *clock.Fake
	db    string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "deputy.db")
	rt, err := deputy.Open(context.Background(), deputy.Options{ModelSpec: "fake", Scenario: []byte(scenario), DB: db, Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	e := serveEnv(t, rt)
	e.db = db
	return e
}

// serveEnv serves rt's API (with MCP) over a test server; rt is the
// caller's to close, after the server (cleanups run last first).
func serveEnv(t *testing.T, rt *deputy.Runtime) *env {
	t.Helper()
	c := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	srv, err := serve.New(serve.Options{Runtime: rt, Token: token, Clock: c,
		MCP: mcpserver.Handler(rt, mcpserver.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return &env{t: t, rt: rt, srv: srv, http: hs, clock: c}
}

// do sends a request with the token (unless headers say otherwise) and
// returns the status and body.
func (e *env) do(method, path, body string, headers ...string) (int, []byte, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

// want checks a status and decodes the JSON body into v (if not nil).
func (e *env) want(status int, method, path, body string, v any, headers ...string) {
	e.t.Helper()
	got, b, _ := e.do(method, path, body, headers...)
	if got != status {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, got, b, status)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// wantError checks an error answer: its status, its JSON code, and that
// the message says something.
func (e *env) wantError(status int, code, method, path, body string, headers ...string) string {
	e.t.Helper()
	var er struct {
		Error struct{ Code, Message string }
	}
	got, b, h := e.do(method, path, body, headers...)
	if got != status || json.Unmarshal(b, &er) != nil || er.Error.Code != code || er.Error.Message == "" {
		e.t.Fatalf("%s %s: %d %s (%s), want %d %s", method, path, got, b, h.Get("Content-Type"), status, code)
	}
	return er.Error.Message
}

type instance struct {
	ID, Parent, Root, Type, State, Question, Report string
	Turns                                           int
	Usage                                           struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	}
}

// settle waits, through the library, for an instance to settle: the test
// drives the run, it does not sleep.
func (e *env) settle(id string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.rt.Wait(ctx, id); err != nil {
		e.t.Fatal(err)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.wantError(401, "unauthorized", "GET", "/api/instances", "", "Authorization", "")
	e.wantError(401, "unauthorized", "GET", "/api/instances", "", "Authorization", "Bearer nope")
	e.wantError(401, "unauthorized", "GET", "/api/instances", "", "Authorization", "Basic "+token)
	e.wantError(401, "unauthorized", "GET", "/mcp", "", "Authorization", "")
	e.wantError(401, "unauthorized", "GET", "/api/events", "", "Authorization", "")
	e.want(200, "GET", "/api/instances", "", nil)
	e.want(200, "GET", "/api/instances", "", nil, "Authorization", "bearer  "+token) // the scheme's case is free
	if _, _, h := e.do("GET", "/api/instances", ""); h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", h.Get("X-Content-Type-Options"))
	}
	// A wrong token never comes back in the answer.
	if _, b, _ := e.do("GET", "/api/instances", "", "Authorization", "Bearer guess-"+token); bytes.Contains(b, []byte(token)) {
		t.Fatalf("the answer echoes the token: %s", b)
	}

	// The browser's way: the token once, then a cookie.
	e.wantError(401, "unauthorized", "POST", "/api/session", `{"token":"nope"}`, "Authorization", "")
	e.wantError(415, "unsupported_media_type", "POST", "/api/session", "token="+token,
		"Authorization", "", "Content-Type", "application/x-www-form-urlencoded")
	code, _, h := e.do("POST", "/api/session", `{"token":"`+token+`"}`, "Authorization", "")
	if code != 200 {
		t.Fatalf("sign in: %d", code)
	}
	c := (&http.Response{Header: h}).Cookies()
	if len(c) != 1 || c[0].Name != serve.CookieName || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode ||
		c[0].Path != "/" || strings.Contains(c[0].Value, token) {
		t.Fatalf("session cookie %+v", c)
	}
	if c[0].Secure {
		t.Errorf("a Secure cookie over plain http would never come back")
	}
	cookie := c[0].Name + "=" + c[0].Value
	// Behind a TLS proxy, the cookie is Secure.
	_, _, h = e.do("POST", "/api/session", `{"token":"`+token+`"}`, "Authorization", "", "X-Forwarded-Proto", "https")
	if c := (&http.Response{Header: h}).Cookies(); len(c) != 1 || !c[0].Secure {
		t.Errorf("behind a TLS proxy: cookie %+v", c)
	}
	e.want(200, "GET", "/api/instances", "", nil, "Authorization", "", "Cookie", cookie)
	e.want(200, "GET", "/api/session", "", nil, "Authorization", "", "Cookie", cookie)
	e.wantError(401, "unauthorized", "GET", "/api/instances", "", "Authorization", "", "Cookie", serve.CookieName+"=forged")
	// A cross-site request is refused before the cookie counts.
	e.wantError(403, "forbidden", "POST", "/api/instances", `{"task":"x"}`, "Authorization", "", "Cookie", cookie,
		"Sec-Fetch-Site", "cross-site")
	// Sessions end: by time (the clock moves, no sleep), and by signing out.
	e.clock.Advance(25 * time.Hour)
	e.wantError(401, "unauthorized", "GET", "/api/instances", "", "Authorization", "", "Cookie", cookie)
	_, _, h = e.do("POST", "/api/session", `{"token":"`+token+`"}`, "Authorization", "")
	cookie = serve.CookieName + "=" + (&http.Response{Header: h}).Cookies()[0].Value
	e.want(200, "DELETE", "/api/session", "", nil, "Authorization", "", "Cookie", cookie)
	e.wantError(401, "unauthorized", "GET", "/api/instances", "", "Authorization", "", "Cookie", cookie)
}

func TestInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var in instance
	e.want(201, "POST", "/api/instances", `{"task":"merge the work"}`, &in)
	if in.ID == "" || in.Root != in.ID || in.Parent != "" {
		t.Fatalf("started %+v", in)
	}
	e.settle(in.ID)
	e.want(200, "GET", "/api/instances/"+in.ID, "", &in)
	if in.State != "asking" || in.Question != "Which branch?" {
		t.Fatalf("after settling: %+v", in)
	}

	// The tree: the root and its two explorers, rolled up.
	var tree struct {
		Root struct {
			instance
			Children []instance
			Subtree  struct{ Instances, Turns int }
		}
		Totals struct {
			Instances, Turns int
			Usage            struct {
				OutputTokens int64 `json:"output_tokens"`
			}
		}
	}
	e.want(200, "GET", "/api/instances/"+in.ID+"/tree", "", &tree)
	kids := tree.Root.Children
	// Children list in the order they were created; the two spawn calls
	// of one turn run at once, so either may be first.
	slices.SortFunc(kids, func(a, b instance) int { return strings.Compare(a.Report, b.Report) })
	if tree.Root.ID != in.ID || len(kids) != 2 || kids[0].Type != "explorer" || kids[0].State != "completed" ||
		kids[0].Report != "found part one" || tree.Totals.Instances != 3 || tree.Root.Subtree.Instances != 3 {
		t.Fatalf("tree %+v", tree)
	}
	if tree.Totals.Turns != tree.Root.Turns+kids[0].Turns+kids[1].Turns || tree.Totals.Turns < 4 {
		t.Fatalf("totals' turns %d, nodes %d+%d+%d", tree.Totals.Turns, tree.Root.Turns, kids[0].Turns, kids[1].Turns)
	}
	var sub struct{ Root struct{ ID string } }
	e.want(200, "GET", "/api/instances/"+kids[1].ID+"/tree", "", &sub)
	if sub.Root.ID != kids[1].ID {
		t.Fatalf("the tree under a child: %+v", sub)
	}

	// Lists and their filters.
	var list struct{ Instances []instance }
	e.want(200, "GET", "/api/instances", "", &list)
	if len(list.Instances) != 3 || list.Instances[2].ID != in.ID || list.Instances[0].Parent != in.ID { // newest first
		t.Fatalf("list %+v", list)
	}
	e.want(200, "GET", "/api/instances?roots=true", "", &list)
	if len(list.Instances) != 1 || list.Instances[0].Question != "Which branch?" {
		t.Fatalf("roots %+v", list)
	}
	for q, n := range map[string]int{"state=completed": 2, "state=asking,completed": 3, "type=explorer": 2,
		"parent=" + in.ID: 2, "root=" + in.ID + "&limit=1": 1, "state=running": 0} {
		e.want(200, "GET", "/api/instances?"+q, "", &list)
		if len(list.Instances) != n {
			t.Errorf("?%s: %d instances, want %d", q, len(list.Instances), n)
		}
	}
	e.wantError(400, "bad_request", "GET", "/api/instances?state=sleeping", "")
	e.wantError(400, "bad_request", "GET", "/api/instances?limit=-1", "")
	e.wantError(400, "bad_request", "GET", "/api/instances?roots=maybe", "")

	// The transcript, paged.
	var tr struct {
		Messages      []struct{ Role string }
		Offset, Total int
	}
	e.want(200, "GET", "/api/instances/"+in.ID+"/transcript", "", &tr)
	if tr.Total < 4 || len(tr.Messages) != tr.Total || tr.Messages[0].Role != "user" {
		t.Fatalf("transcript %+v", tr)
	}
	total := tr.Total
	e.want(200, "GET", "/api/instances/"+in.ID+"/transcript?offset=1&limit=2", "", &tr)
	if len(tr.Messages) != 2 || tr.Offset != 1 || tr.Total != total || tr.Messages[0].Role != "assistant" {
		t.Fatalf("page %+v", tr)
	}
	e.want(200, "GET", "/api/instances/"+in.ID+"/transcript?offset=1000", "", &tr)
	if len(tr.Messages) != 0 || tr.Total != total {
		t.Fatalf("past the end %+v", tr)
	}

	// Relays: a child's, and none yet for the asking root.
	var relay struct {
		ID, State, Text, Report string
		Failed                  bool
	}
	e.want(200, "GET", "/api/instances/"+kids[0].ID+"/relay", "", &relay)
	if relay.State != "completed" || relay.Failed || relay.Report != "found part one" ||
		!strings.Contains(relay.Text, "subagent "+kids[0].ID+" (explorer): completed") || !strings.HasSuffix(relay.Text, "found part one") {
		t.Fatalf("relay %+v", relay)
	}
	e.wantError(409, "conflict", "GET", "/api/instances/"+in.ID+"/relay", "")

	// Only a root's person answers or steers it; its children are its own.
	e.wantError(409, "conflict", "POST", "/api/instances/"+kids[0].ID+"/send", `{"text":"hi"}`)
	e.wantError(409, "conflict", "POST", "/api/instances/"+kids[0].ID+"/answer", `{"text":"hi"}`)
	e.wantError(400, "bad_request", "POST", "/api/instances/"+in.ID+"/answer", `{"text":"  "}`)
	e.wantError(400, "bad_request", "POST", "/api/instances/"+in.ID+"/answer", `{"text":`)
	e.wantError(400, "bad_request", "POST", "/api/instances/"+in.ID+"/answer", `{"txt":"main"}`)

	// Pause the asking root, resume it, answer: it finishes.
	e.want(200, "POST", "/api/instances/"+in.ID+"/pause", "", &in)
	if in.State != "paused" {
		t.Fatalf("paused: %s", in.State)
	}
	e.wantError(409, "conflict", "POST", "/api/instances/"+in.ID+"/pause", "")
	e.want(200, "POST", "/api/instances/"+in.ID+"/answer", `{"text":"main"}`, &in)
	e.want(200, "POST", "/api/instances/"+in.ID+"/resume", "", nil)
	e.settle(in.ID)
	e.want(200, "GET", "/api/instances/"+in.ID, "", &in)
	if in.State != "completed" || in.Report != "merged into main" {
		t.Fatalf("after the answer: %+v", in)
	}
	e.want(200, "GET", "/api/instances/"+in.ID+"/relay", "", &relay)
	if !strings.HasSuffix(relay.Text, "merged into main") {
		t.Fatalf("root's relay %q", relay.Text)
	}
	// An ended instance cannot move again, or be answered.
	for _, op := range []string{"pause", "resume", "cancel"} {
		e.wantError(409, "conflict", "POST", "/api/instances/"+in.ID+"/"+op, "")
	}
	e.wantError(409, "conflict", "POST", "/api/instances/"+in.ID+"/answer", `{"text":"again"}`)

	// A second run, cancelled while it asks, with its children kept.
	var two instance
	e.want(201, "POST", "/api/instances", `{"task":"again"}`, &two)
	e.settle(two.ID)
	e.want(202, "POST", "/api/instances/"+two.ID+"/send", `{"text":"note"}`, nil)
	e.want(200, "POST", "/api/instances/"+two.ID+"/cancel", "", &two)
	if two.State != "cancelled" {
		t.Fatalf("cancelled: %+v", two)
	}
	e.wantError(409, "conflict", "POST", "/api/instances/"+two.ID+"/send", `{"text":"late"}`)
}

func TestStartOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// wait: the answer comes when it settles. type: the task runs as that
	// type would as a child.
	var in instance
	e.want(200, "POST", "/api/instances", `{"task":"the config loader","type":"explorer","wait":true}`, &in)
	if in.State != "completed" || in.Type != "explorer" || in.Report != "found the config loader" {
		t.Fatalf("typed root: %+v", in)
	}
	e.wantError(400, "bad_request", "POST", "/api/instances", `{"task":"x","type":"nope"}`)
	e.wantError(400, "bad_request", "POST", "/api/instances", `{"task":""}`)
	e.wantError(400, "bad_request", "POST", "/api/instances", `{"task":"x","max_turns":-1}`)
	e.wantError(400, "bad_request", "POST", "/api/instances", `{"task":"x"} {"task":"y"}`)
	e.wantError(400, "bad_request", "POST", "/api/instances", `{"task":"x","model":"nope:thing"}`)
	e.wantError(415, "unsupported_media_type", "POST", "/api/instances", `{"task":"x"}`, "Content-Type", "text/plain")
	big := `{"task":"` + strings.Repeat("a", 2<<20) + `"}`
	e.wantError(413, "too_large", "POST", "/api/instances", big)
}

func TestNotFoundAndMethods(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, p := range []string{"/api/instances/nope", "/api/instances/nope/tree", "/api/instances/nope/transcript",
		"/api/instances/nope/relay", "/api/instances/nope/events", "/api/trees/nope/events", "/api/nope",
		"/api/definitions/nope"} {
		e.wantError(404, "not_found", "GET", p, "")
	}
	for _, op := range []string{"pause", "resume", "cancel"} {
		e.wantError(404, "not_found", "POST", "/api/instances/nope/"+op, "")
	}
	e.wantError(404, "not_found", "POST", "/api/instances/nope/answer", `{"text":"x"}`)
	e.wantError(404, "not_found", "POST", "/api/instances/nope/send", `{"text":"x"}`)
	e.wantError(405, "method_not_allowed", "DELETE", "/api/instances", "")
	e.wantError(405, "method_not_allowed", "PUT", "/api/instances/x/pause", "")
	e.wantError(400, "bad_request", "GET", "/api/events?after=x", "")
	// Without a dashboard, / is a JSON 404 too.
	e.wantError(404, "not_found", "GET", "/", "")
}

const goodDef = `---
name: summarizer
description: Summarizes a file in three lines.
tools: read_file
---
You summarize.
`

func TestDefinitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var list struct {
		Definitions []struct{ Name, Description string }
	}
	e.want(200, "GET", "/api/definitions", "", &list)
	names := map[string]bool{}
	for _, d := range list.Definitions {
		names[d.Name] = true
	}
	if !names["explorer"] || names["summarizer"] {
		t.Fatalf("definitions %v", names)
	}
	var d struct{ Name, Description string }
	e.want(200, "GET", "/api/definitions/explorer", "", &d)
	if d.Name != "explorer" || d.Description == "" {
		t.Fatalf("explorer %+v", d)
	}
	md := []string{"Content-Type", "text/markdown"}
	var v struct {
		OK       bool
		Problems []string
	}
	e.want(200, "POST", "/api/definitions/validate", goodDef, &v, md...)
	if !v.OK {
		t.Fatalf("validate good: %+v", v)
	}
	e.want(200, "POST", "/api/definitions/validate?name=bad", "---\nname: bad\ndescription: x\nmaxTurns: many\n---\nx\n", &v, md...)
	if v.OK || len(v.Problems) == 0 || !strings.Contains(v.Problems[0], "bad.md:4") {
		t.Fatalf("validate bad: %+v", v)
	}
	e.wantError(415, "unsupported_media_type", "POST", "/api/definitions/validate", goodDef)
	msg := e.wantError(400, "bad_request", "PUT", "/api/definitions/summarizer", "---\nname: summarizer\ndescription: x\nmaxTurns: many\n---\nx\n", md...)
	if !strings.Contains(msg, "summarizer.md:4") {
		t.Errorf("a bad definition's error does not name file:line: %s", msg)
	}
	e.wantError(400, "bad_request", "PUT", "/api/definitions/other", goodDef, md...)
	e.wantError(413, "too_large", "PUT", "/api/definitions/summarizer", goodDef+strings.Repeat("x", 300<<10), md...)
	e.want(200, "PUT", "/api/definitions/summarizer", goodDef, &d, md...)
	e.want(200, "GET", "/api/definitions/summarizer", "", &d)
	if d.Description != "Summarizes a file in three lines." {
		t.Fatalf("stored definition %+v", d)
	}
}

// sse is a minimal server-sent events client: it reads frames and keeps
// the last id, as EventSource does.
type sse struct {
	t    *testing.T
	resp *http.Response
	r    *bufio.Reader
	last string
}

type sseEvent struct {
	ID, Kind string
	Data     struct {
		ID       int64  `json:"id"`
		Instance string `json:"instance"`
		Root     string `json:"root"`
		Kind     string `json:"kind"`
		Data     struct{ From, To string }
	}
}

func (e *env) stream(path, lastID string) *sse {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.http.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		e.t.Fatalf("stream %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return &sse{t: e.t, resp: resp, r: bufio.NewReader(resp.Body), last: lastID}
}

// next reads the next event (skipping comments).
func (s *sse) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.Kind != "" {
				if ev.ID != "" {
					s.last = ev.ID
				}
				return ev
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.Kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &ev.Data); err != nil {
				s.t.Fatalf("data %s: %v", line, err)
			}
		default:
			s.t.Fatalf("not SSE: %q", line)
		}
	}
}

// until reads events until one satisfies stop, returning all it read but
// the ready frame.
func (s *sse) until(stop func(sseEvent) bool) []sseEvent {
	s.t.Helper()
	var out []sseEvent
	for {
		ev := s.next()
		if ev.Kind == "ready" {
			continue
		}
		out = append(out, ev)
		if stop(ev) {
			return out
		}
	}
}

func (s *sse) close() { s.resp.Body.Close() }

// A tree's stream shows its instances' events as they happen; a client
// that reconnects with Last-Event-ID gets everything it missed, then what
// comes, with nothing skipped or repeated.
func TestEventsResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	all := e.stream("/api/events", "")
	var in instance
	e.want(201, "POST", "/api/instances", `{"task":"merge the work"}`, &in)
	tree := e.stream("/api/trees/"+in.ID+"/events?after=0", "")
	asking := func(ev sseEvent) bool {
		return ev.Kind == "state" && ev.Data.Instance == in.ID && ev.Data.Data.To == "asking"
	}
	first := tree.until(asking)
	seenAll := all.until(asking)
	tree.close()
	// While the client is away: the answer, and the run's end.
	e.want(200, "POST", "/api/instances/"+in.ID+"/answer", `{"text":"main"}`, nil)
	e.settle(in.ID)
	again := e.stream("/api/trees/"+in.ID+"/events", tree.last)
	rest := again.until(func(ev sseEvent) bool {
		return ev.Kind == "state" && ev.Data.Instance == in.ID && ev.Data.Data.To == "completed"
	})
	got := append(first, rest...)
	stored, err := e.rt.Events(context.Background(), deputy.EventFilter{Root: in.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(stored) {
		t.Fatalf("the client got %d events, the store has %d", len(got), len(stored))
	}
	kinds := map[string]int{}
	instances := map[string]bool{}
	for i, ev := range got {
		if ev.ID != strconv.FormatInt(stored[i].ID, 10) || ev.Kind != stored[i].Kind || ev.Data.Root != in.ID {
			t.Fatalf("event %d: %+v, stored %+v", i, ev, stored[i])
		}
		kinds[ev.Kind]++
		instances[ev.Data.Instance] = true
	}
	if len(instances) != 3 || kinds["state"] < 9 || kinds["progress"] < 4 || kinds["tool_call"] < 3 ||
		kinds["tool_result"] < 2 || kinds["mail"] < 2 { // the question's result arrives as the answer's mail
		t.Fatalf("events by kind %v over %d instances", kinds, len(instances))
	}
	// The all-events stream, opened before the run, saw the same start.
	if len(seenAll) != len(first) {
		t.Fatalf("the all-events stream saw %d events to the question, the tree's %d", len(seenAll), len(first))
	}
	// An instance's stream holds that instance's events only.
	one := e.stream("/api/instances/"+in.ID+"/events?after=0", "")
	for _, ev := range one.until(func(ev sseEvent) bool { return ev.Data.Data.To == "completed" }) {
		if ev.Data.Instance != in.ID {
			t.Fatalf("instance stream carries %s's event", ev.Data.Instance)
		}
	}
	// A child is no tree's root.
	var kids struct{ Instances []instance }
	e.want(200, "GET", "/api/instances?parent="+in.ID, "", &kids)
	e.wantError(400, "bad_request", "GET", "/api/trees/"+kids.Instances[0].ID+"/events", "")
}

// Events another process writes reach the streams at the next poll (the
// clock moves, nobody sleeps); a client that stops reading while
// thousands of events go by is cut loose from the live feed, reads the
// store instead, and misses none.
func TestEventsFromAnotherProcessAndSlowClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var in instance
	e.want(200, "POST", "/api/instances", `{"task":"x","type":"explorer","wait":true}`, &in)
	other, err := store.Open(context.Background(), e.db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s := e.stream("/api/instances/"+in.ID+"/events", "")
	ready := s.next()
	if ready.Kind != "ready" || ready.ID == "" {
		t.Fatalf("first frame %+v", ready)
	}
	// Large events, more than the live buffer and the sockets hold, while
	// the client reads nothing.
	const n = 2000
	pad := strings.Repeat("x", 2000)
	for i := range n {
		if _, err := other.AppendEvent(context.Background(), in.ID, "note", json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))); err != nil {
			t.Fatal(err)
		}
	}
	// Another process's writes wake nobody: the poll finds them.
	e.clock.Advance(2 * time.Second)
	var prev int64
	for i := range n {
		ev := s.next()
		if ev.Kind != "note" {
			t.Fatalf("event %d: %+v", i, ev)
		}
		id, _ := strconv.ParseInt(ev.ID, 10, 64)
		if id <= prev {
			t.Fatalf("event %d: id %d after %d", i, id, prev)
		}
		prev = id
	}
}

// bearer adds the token to every request of an MCP client.
type bearer struct{ rt http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return b.rt.RoundTrip(r)
}

// /mcp under the server: the token guards it, and with it an MCP client
// lists the tools, spawns a background subagent, waits and reads its
// relay, which is the instance's report.
func TestMCPOverServe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	noToken := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	if _, err := noToken.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.http.URL + "/mcp"}, nil); err == nil {
		t.Fatal("an MCP client without the token connected")
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.http.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{e.http.Client().Transport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "spawn_subagent") || !slices.Contains(names, "subagent_wait") {
		t.Fatalf("tools %v", names)
	}
	call := func(name string, args map[string]any) string {
		t.Helper()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("%s: tool error %v", name, res.Content)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	out := call("spawn_subagent", map[string]any{"type": "explorer", "task": "the parser", "background": true})
	var id string
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "i-") {
			id = strings.Trim(f, ".,:;()")
			break
		}
	}
	if id == "" {
		t.Fatalf("no instance id in %q", out)
	}
	relay := call("subagent_wait", map[string]any{"id": id})
	in, err := e.rt.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if in.State != deputy.Completed || in.Report != "found the parser" || !strings.HasSuffix(relay, in.Report) {
		t.Fatalf("relay %q for %+v", relay, in)
	}
}
