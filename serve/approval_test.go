package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/permission"
)

// POST /api/instances/{id}/approval refuses what does not say one thing:
// approve missing, a reason with an approval, always with a denial,
// unknown fields, broken JSON. An instance asking a question (not an
// approval) shows no approval.
func TestApprovalBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var in instance
	e.want(201, "POST", "/api/instances", `{"task":"merge the work"}`, &in)
	e.settle(in.ID)
	path := "/api/instances/" + in.ID + "/approval"
	for body, want := range map[string]string{
		`{}`:                                 `"approve": true or false`,
		`{"always": true}`:                   `"approve": true or false`,
		`{"approve": true, "reason": "x"}`:   "a reason goes with a denial",
		`{"approve": false, "always": true}`: "always goes with an approval",
		`{"approve": true, "alwyas": true}`:  "alwyas",
		`{"approve": tru`:                    "",
		`{"approve": "yes"}`:                 "",
	} {
		msg := e.wantError(400, "bad_request", "POST", path, body)
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q, want it to say %q", body, msg, want)
		}
	}
	_, b, _ := e.do("GET", "/api/instances/"+in.ID, "")
	if strings.Contains(string(b), `"approval"`) {
		t.Errorf("an instance asking a question shows an approval: %s", b)
	}
}

const approveScenario = `
rules:
  - match: {turn: 1}
    text: "counting"
    tool_calls: [{name: count, input: {n: 1}}]
  - match: {turn: 2}
    text: "done: {{index .ToolResults 0}}"
`

// count is a side-effecting tool (it is not read-only), so the default
// mode holds its calls for approval; ran counts its runs.
type count struct{ ran *atomic.Int64 }

func (count) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "count", Description: "Counts.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}
}
func (count) ReadOnly() bool { return false }
func (c count) Run(context.Context, json.RawMessage) (string, error) {
	return fmt.Sprintf("count %d", c.ran.Add(1)), nil
}

// A root whose call its permissions hold shows the call in its JSON (and
// its tree's); POST .../approval with approve true runs it once, and with
// approve false and a reason refuses it, the model reading the reason.
func TestApprovalOverHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var ran atomic.Int64
	rt, err := deputy.Open(context.Background(), deputy.Options{ModelSpec: "fake", Scenario: []byte(approveScenario),
		DB: filepath.Join(dir, "deputy.db"), Workspace: dir, Tools: []deputy.Tool{count{&ran}},
		Permissions: &deputy.Permissions{Policy: permission.Policy{Mode: permission.ModeDefault}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	e := serveEnv(t, rt)
	var in struct {
		instance
		Approval *struct {
			InstanceID string          `json:"instance_id"`
			CallID     string          `json:"call_id"`
			Tool       string          `json:"tool"`
			Input      json.RawMessage `json:"input"`
			Reason     string          `json:"reason"`
		} `json:"approval"`
	}
	for _, approve := range []bool{true, false} {
		e.want(201, "POST", "/api/instances", `{"task":"count once"}`, &in)
		id := in.ID
		e.settle(id)
		e.want(200, "GET", "/api/instances/"+id, "", &in)
		a := in.Approval
		if in.State != "asking" || a == nil || a.InstanceID != id || a.Tool != "count" || a.CallID == "" ||
			string(a.Input) != `{"n":1}` || a.Reason == "" {
			t.Fatalf("held: %+v %+v", in.instance, a)
		}
		before := ran.Load()
		if approve {
			e.want(200, "POST", "/api/instances/"+id+"/approval", `{"approve": true}`, nil)
		} else {
			e.want(200, "POST", "/api/instances/"+id+"/approval", `{"approve": false, "reason": "not today"}`, nil)
		}
		e.settle(id)
		in.Approval = nil
		e.want(200, "GET", "/api/instances/"+id, "", &in)
		switch {
		case in.State != "completed" || in.Approval != nil:
			t.Fatalf("after the decision: %+v %+v", in.instance, in.Approval)
		case approve && (ran.Load() != before+1 || in.Report != fmt.Sprintf("done: count %d", before+1)):
			t.Fatalf("approved: ran %d (was %d), report %q", ran.Load(), before, in.Report)
		case !approve && (ran.Load() != before || !strings.Contains(in.Report, "not today")):
			t.Fatalf("denied: ran %d (was %d), report %q", ran.Load(), before, in.Report)
		}
		// Decided once: nothing waits now.
		e.wantError(409, "conflict", "POST", "/api/instances/"+id+"/approval", `{"approve": true}`)
	}
	e.wantError(404, "not_found", "POST", "/api/instances/nope/approval", `{"approve": true}`)
}
