package durable_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/permission"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

const approveScenario = `
rules:
  - match: {turn: 1}
    text: "counting"
    tool_calls: [{name: count, input: {}}]
  - match: {turn: 2}
    text: "done: {{index .ToolResults 0}}"
`

// askAll is a policy under which every side-effecting call asks.
func askAll() *agent.Permissions {
	return &agent.Permissions{Policy: permission.Policy{Mode: permission.ModeDefault}, ProjectDir: "/work"}
}

// A call the root's permissions hold leaves the root asking with the call
// recorded and not run; approved, the next run makes it once and goes on
// from its result; every mail of it is consumed.
func TestApprovalRoundTrip(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	r := newRigWith(t, &rig{scenario: approveScenario, tools: []tool.Tool{counter{&n}}, perms: askAll()})
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root"})
	in := r.wait(id)
	if in.State != instance.Asking || n.Load() != 0 {
		t.Fatalf("after the held call: %+v, ran %d times", in, n.Load())
	}
	a, err := r.ctl.Approval(ctx, id)
	if err != nil || a == nil || a.Tool != "count" || a.InstanceID != id || a.CallID == "" || a.Holder != "" {
		t.Fatalf("approval %+v %v", a, err)
	}
	if q, _ := r.ctl.Question(ctx, id); q != nil {
		t.Errorf("an approval is no question: %+v", q)
	}
	if err := r.ctl.Approve(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	in = r.wait(id)
	if in.State != instance.Completed || in.Report != "done: count 1" || n.Load() != 1 {
		t.Fatalf("after approval: %+v, ran %d times", in, n.Load())
	}
	msgs, _ := r.st.Transcript(ctx, id)
	if len(msgs) != 4 || msgs[2].Content[0].Text != "count 1" || msgs[2].Content[0].ToolUseID != a.CallID {
		t.Fatalf("transcript %+v", msgs)
	}
	noMailLeft(t, r.st, id)
	if err := r.ctl.Approve(ctx, id, false); !errors.Is(err, instance.ErrIllegalTransition) {
		t.Errorf("approve a completed instance: %v", err)
	}
}

// A denied call is not run: the model reads the reason as its error.
func TestApprovalDenied(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	r := newRigWith(t, &rig{scenario: approveScenario, tools: []tool.Tool{counter{&n}}, perms: askAll()})
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root"})
	if in := r.wait(id); in.State != instance.Asking {
		t.Fatalf("%+v", in)
	}
	if err := r.ctl.Deny(ctx, id, "not today"); err != nil {
		t.Fatal(err)
	}
	in := r.wait(id)
	if in.State != instance.Completed || n.Load() != 0 || !strings.Contains(in.Report, "denied: not today") {
		t.Fatalf("after the deny: %+v, ran %d times", in, n.Load())
	}
	if err := r.ctl.Deny(ctx, id, "again"); !errors.Is(err, instance.ErrIllegalTransition) {
		t.Errorf("deny twice: %v", err)
	}
	noMailLeft(t, r.st, id)
}

// approve --always allows the call's rule for the rest of the session:
// the same call later runs without asking.
func TestApproveAlways(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	r := newRigWith(t, &rig{scenario: `
rules:
  - match: {turn: 1}
    tool_calls: [{name: count, input: {}}]
  - match: {turn: 2}
    tool_calls: [{name: count, input: {}}]
  - match: {turn: 3}
    text: "done: {{index .ToolResults 0}}"
`, tools: []tool.Tool{counter{&n}}, perms: askAll()})
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root"})
	if in := r.wait(id); in.State != instance.Asking {
		t.Fatalf("%+v", in)
	}
	if err := r.ctl.Approve(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	in := r.wait(id)
	if in.State != instance.Completed || in.Report != "done: count 2" || n.Load() != 2 {
		t.Fatalf("after approve --always: %+v, ran %d times", in, n.Load())
	}
	if err := r.ctl.Approve(ctx, "i-nosuch", false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("approve an unknown id: %v", err)
	}
}

const parentApprovesScenario = `
rules:
  - match: {system: "You are a counter", turn: 1}
    tool_calls: [{name: count, input: {}}]
  - match: {system: "You are a counter"}
    text: "counted {{index .ToolResults 0}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: counter, task: "count once"}}]
  - match: {turn: 2, tool_result: "waits for approval"}
    tool_calls: [{name: subagent_approve, input: {id: "{{find \"i-[0-9a-f]+\" (index .ToolResults 0)}}", approve: true}}]
  - match: {turn: 3}
    tool_calls: [{name: subagent_wait, input: {ids: ["{{find \"i-[0-9a-f]+\" (index .ToolResults 0)}}"]}}]
  - match: {turn: 4}
    text: "{{index .ToolResults 0}}"
`

// A child's call that its own permissions hold but its parent's allow is
// the parent's to grant: its spawn call returns saying so, the parent
// approves with subagent_approve (nobody else is asked), the child's next
// run makes the call once, and subagent_wait collects its report.
func TestParentApprovesItsChildsCall(t *testing.T) {
	t.Parallel()
	base, _ := agentdef.Load(agentdef.LoadOptions{})
	cat, err := base.With(&agentdef.Definition{Name: "counter", Description: "counts", SystemPrompt: "You are a counter.",
		Tools: []string{"count"}, PermissionMode: permission.ModeDefault})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	r := newRigWith(t, &rig{scenario: parentApprovesScenario, tools: []tool.Tool{counter{&n}}, catalog: cat,
		perms: &agent.Permissions{Policy: permission.Policy{Mode: permission.ModeBypassPermissions}}})
	id := r.start(durable.Spec{System: "root"})
	in := r.wait(id)
	if in.State != instance.Completed || !strings.Contains(in.Report, "counted count 1") || n.Load() != 1 {
		t.Fatalf("root %s %q, counted %d times\n%s", in.State, in.Report, n.Load(), transcriptText(t, r.st, id))
	}
}
