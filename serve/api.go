package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

// instanceView is an instance as the API shows it: its record, and the
// call it waits on an approval for, if it does.
type instanceView struct {
	instance.Record
	Approval *approvalJSON `json:"approval,omitempty"`
}

// approvalJSON is a pending approval: the instance whose call is held (this
// one, or for a parent the nearest descendant waiting, whose approval is
// the person's), the call with its arguments as the model wrote them, and
// the rule that asked.
type approvalJSON struct {
	InstanceID string          `json:"instance_id"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	Input      json.RawMessage `json:"input"`
	Rule       string          `json:"rule,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	AskedAt    time.Time       `json:"asked_at"`
}

// view is in as the API shows it, as the CLI's --json does too: its
// record's View (without the definition snapshot, which the definitions
// endpoints show), with its open question while it waits (asking, or
// paused while asking), and the call it waits on an approval for.
func (s *Server) view(r *http.Request, in *instance.Record) (instanceView, error) {
	v := instanceView{Record: in.View()}
	if in.State.Waiting() {
		q, err := s.rt.Question(r.Context(), in.ID)
		if err != nil {
			return v, err
		}
		v.Question = q
		a, err := s.rt.Approval(r.Context(), in.ID)
		if err != nil {
			return v, err
		}
		if a != nil {
			v.Approval = &approvalJSON{InstanceID: a.InstanceID, CallID: a.CallID, Tool: a.Tool, Input: a.Input, Rule: a.Rule, Reason: a.Reason, AskedAt: a.AskedAt}
		}
	}
	return v, nil
}

func (s *Server) writeInstance(w http.ResponseWriter, r *http.Request, status int, id string) {
	in, err := s.rt.Get(r.Context(), id)
	if err != nil {
		fail(w, err)
		return
	}
	v, err := s.view(r, in)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, status, v)
}

func (s *Server) startInstance(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Task     string `json:"task"`
		Type     string `json:"type"`
		Model    string `json:"model"`
		System   string `json:"system"`
		MaxTurns int    `json:"max_turns"`
		MaxDepth int    `json:"max_depth"`
		Wait     bool   `json:"wait"`
	}
	if !decode(w, r, &in) {
		return
	}
	if strings.TrimSpace(in.Task) == "" {
		fail(w, badRequest("task is empty"))
		return
	}
	if in.MaxTurns < 0 {
		fail(w, badRequest("max_turns is negative"))
		return
	}
	if in.Type != "" {
		if _, ok := s.rt.Definition(in.Type); !ok {
			fail(w, badRequest("no subagent type %q (GET /api/definitions lists them)", in.Type))
			return
		}
	}
	id, err := s.rt.Start(r.Context(), deputy.Task{Text: in.Task, Type: in.Type, Model: in.Model, System: in.System,
		MaxTurns: in.MaxTurns, MaxDepth: in.MaxDepth})
	if err != nil {
		fail(w, err) // 400 when refused for what it asked, 500 when the store failed
		return
	}
	if !in.Wait {
		s.writeInstance(w, r, http.StatusCreated, id)
		return
	}
	if _, err := s.rt.Wait(r.Context(), id); err != nil {
		fail(w, err)
		return
	}
	s.writeInstance(w, r, http.StatusOK, id)
}

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := deputy.Filter{Root: q.Get("root"), Parent: q.Get("parent")}
	switch q.Get("roots") {
	case "", "false", "0":
	case "true", "1":
		f.OnlyRoots = true
	default:
		fail(w, badRequest("roots=%q: say true or false", q.Get("roots")))
		return
	}
	if v := q.Get("state"); v != "" {
		for name := range strings.SplitSeq(v, ",") {
			st, err := instance.ParseState(name)
			if err != nil {
				fail(w, badRequest("%v", err))
				return
			}
			f.States = append(f.States, st)
		}
	}
	limit, err := intParam(r, "limit", 100, 1000)
	if err != nil {
		fail(w, err)
		return
	}
	typ := q.Get("type")
	all, err := s.rt.List(r.Context(), f)
	if err != nil {
		fail(w, err)
		return
	}
	// Newest first: a dashboard shows the latest runs; the store lists
	// oldest first.
	out := make([]instanceView, 0, min(len(all), limit))
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
		if typ != "" && all[i].Type != typ {
			continue
		}
		v, err := s.view(r, all[i])
		if err != nil {
			fail(w, err)
			return
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"instances": out})
}

func (s *Server) getInstance(w http.ResponseWriter, r *http.Request) {
	s.writeInstance(w, r, http.StatusOK, r.PathValue("id"))
}

// totals roll a subtree up: what it used and cost, and how many turns and
// instances it took.
type totals struct {
	Usage     llm.Usage `json:"usage"`
	Cost      *float64  `json:"cost,omitempty"` // nil: nothing priced
	Unpriced  int       `json:"unpriced,omitempty"`
	Turns     int       `json:"turns"`
	ToolCalls int       `json:"tool_calls"`
	Instances int       `json:"instances"`
}

func (t *totals) add(u totals) {
	t.Usage.Add(u.Usage)
	if u.Cost != nil {
		c := *u.Cost
		if t.Cost != nil {
			c += *t.Cost
		}
		t.Cost = &c
	}
	t.Unpriced += u.Unpriced
	t.Turns += u.Turns
	t.ToolCalls += u.ToolCalls
	t.Instances += u.Instances
}

type node struct {
	instanceView
	Subtree  totals  `json:"subtree"`
	Children []*node `json:"children"`
}

func (s *Server) getTree(w http.ResponseWriter, r *http.Request) {
	top, err := s.rt.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	all, err := s.rt.List(r.Context(), deputy.Filter{Root: top.Root})
	if err != nil {
		fail(w, err)
		return
	}
	nodes := make(map[string]*node, len(all))
	for _, in := range all {
		v, err := s.view(r, in)
		if err != nil {
			fail(w, err)
			return
		}
		nodes[in.ID] = &node{instanceView: v, Children: []*node{}}
	}
	// Spawn order is the store's: it lists instances in the order they
	// were created (created_seq), which children spawned in one turn keep
	// although they share a timestamp and their ids are random.
	for _, in := range all {
		if p := nodes[in.Parent]; p != nil {
			p.Children = append(p.Children, nodes[in.ID])
		}
	}
	root := nodes[top.ID]
	if root == nil { // created between the two reads: it is in the list now
		fail(w, store.ErrNotFound)
		return
	}
	var sum func(n *node) totals
	sum = func(n *node) totals {
		t := totals{Usage: n.Usage, Cost: n.Cost, Turns: n.Turns, ToolCalls: n.ToolCalls, Instances: 1}
		if n.Cost == nil && n.Turns > 0 {
			t.Unpriced = 1
		}
		for _, c := range n.Children {
			t.add(sum(c))
		}
		n.Subtree = t
		return t
	}
	writeJSON(w, http.StatusOK, map[string]any{"root": root, "totals": sum(root)})
}

func (s *Server) getTranscript(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := pageParams(r, 100, 1000)
	if err != nil {
		fail(w, err)
		return
	}
	msgs, err := s.rt.Transcript(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": pageOf(msgs, offset, limit), "offset": offset, "total": len(msgs)})
}

// pageParams reads a list's ?offset= (default 0) and ?limit= (default
// def, at most max).
func pageParams(r *http.Request, def, max int) (offset, limit int, err error) {
	if offset, err = intParam(r, "offset", 0, 1<<31-1); err != nil {
		return 0, 0, err
	}
	if limit, err = intParam(r, "limit", def, max); err != nil {
		return 0, 0, err
	}
	return offset, limit, nil
}

// pageOf is all's items from offset, at most limit of them: never nil, so
// a page past the end is [] on the wire, not null.
func pageOf[T any](all []T, offset, limit int) []T {
	page := all[min(offset, len(all)):min(offset+limit, len(all))]
	if page == nil {
		page = []T{}
	}
	return page
}

func (s *Server) getRelay(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rel, err := s.rt.Relay(r.Context(), id)
	if err != nil {
		fail(w, err)
		return
	}
	if !rel.State.Terminal() {
		writeError(w, http.StatusConflict, "conflict", "instance "+id+" is "+string(rel.State)+": it relays when it ends")
		return
	}
	text, failed := rel.ToolResult()
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "state": rel.State, "text": text, "failed": failed,
		"report": rel.Report, "incomplete": rel.Incomplete, "error": rel.Error, "usage": rel.Usage, "cost": rel.Cost,
		"artifacts": rel.Artifacts, "duration_ms": rel.Duration / time.Millisecond})
}

// control answers a pause, resume or cancel with the instance after it.
func (s *Server) control(do func(ctx context.Context, id string) error) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := do(r.Context(), id); err != nil {
			fail(w, err)
			return
		}
		s.writeInstance(w, r, http.StatusOK, id)
	}
}

type textBody struct {
	Text string `json:"text"`
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	var in textBody
	if !decode(w, r, &in) {
		return
	}
	if strings.TrimSpace(in.Text) == "" {
		fail(w, badRequest("text is empty"))
		return
	}
	if err := s.rt.Send(r.Context(), r.PathValue("id"), in.Text); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, struct{}{})
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	var in textBody
	if !decode(w, r, &in) {
		return
	}
	if strings.TrimSpace(in.Text) == "" {
		fail(w, badRequest("text is empty"))
		return
	}
	id := r.PathValue("id")
	if err := s.rt.Answer(r.Context(), id, in.Text); err != nil {
		fail(w, err)
		return
	}
	s.writeInstance(w, r, http.StatusOK, id)
}

// approval decides the call an instance waits on an approval for:
// {"approve": true, "always": false} runs it (always: the rule that asked
// allows such calls for the rest of the root's session), {"approve":
// false, "reason": "..."} refuses it, the model reading the reason as the
// call's error.
func (s *Server) approval(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Approve *bool  `json:"approve"`
		Always  bool   `json:"always"`
		Reason  string `json:"reason"`
	}
	if !decode(w, r, &in) {
		return
	}
	id := r.PathValue("id")
	var err error
	switch {
	case in.Approve == nil:
		err = badRequest(`say "approve": true or false`)
	case *in.Approve && in.Reason != "":
		err = badRequest("a reason goes with a denial (approve: false)")
	case *in.Approve:
		err = s.rt.Approve(r.Context(), id, in.Always)
	case in.Always:
		err = badRequest("always goes with an approval (approve: true)")
	default:
		err = s.rt.Deny(r.Context(), id, in.Reason)
	}
	if err != nil {
		fail(w, err)
		return
	}
	s.writeInstance(w, r, http.StatusOK, id)
}

func (s *Server) listDefinitions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"definitions": s.rt.Definitions()})
}

func (s *Server) getDefinition(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d, ok := s.rt.Definition(name)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no subagent type "+name)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) putDefinition(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	data, ok := readBody(w, r, "text/markdown", maxDefinitionBody)
	if !ok {
		return
	}
	p := agentdef.ParseDefinition(name+".md", data)
	if len(p.Errors) == 0 && p.Def != nil && p.Def.Name != name {
		fail(w, badRequest("%s.md: the file names %q, not %q", name, p.Def.Name, name))
		return
	}
	d, err := s.rt.PutDefinition(r.Context(), name+".md", data)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) validateDefinition(w http.ResponseWriter, r *http.Request) {
	data, ok := readBody(w, r, "text/markdown", maxDefinitionBody)
	if !ok {
		return
	}
	file := "definition.md"
	if n := r.URL.Query().Get("name"); n != "" {
		file = n + ".md"
	}
	p := agentdef.ParseDefinition(file, data)
	issues := func(is []agentdef.Issue) []string {
		out := make([]string, len(is))
		for i, e := range is {
			out[i] = e.Error()
		}
		return out
	}
	if len(p.Errors) > 0 || p.Def == nil {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "problems": issues(p.Errors), "warnings": issues(p.Warnings)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "definition": p.Def, "warnings": issues(p.Warnings)})
}
