package deputy

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/instance"
)

// Approval is a call that waits to be approved (Options.Permissions): the
// instance that made it, the call, and the rule (or the mode, in Reason)
// that holds it.
type Approval struct {
	InstanceID string          `json:"instance_id"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	Input      json.RawMessage `json:"input"`
	Rule       string          `json:"rule,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	AskedAt    time.Time       `json:"asked_at"`
}

func approvalOf(a *agent.Approval) *Approval {
	if a == nil {
		return nil
	}
	return &Approval{InstanceID: a.InstanceID, CallID: a.CallID, Tool: a.Tool, Input: a.Input, Rule: a.Rule,
		Reason: a.Reason, AskedAt: a.AskedAt}
}

// agentPermissions are o's permissions as the runner enforces them.
func agentPermissions(o Options) *agent.Permissions {
	if o.Permissions == nil {
		return nil
	}
	return &agent.Permissions{Policy: o.Permissions.Policy, ProjectDir: o.Workspace, Home: o.Home}
}

// Approval returns the call instance id waits to have approved, or, when
// it has none, the first one a descendant waits on (its parent may not
// grant it, so it is the person's): the whole tree's approvals reach
// whoever holds the root. nil when none waits.
func (rt *Runtime) Approval(ctx context.Context, id string) (*Approval, error) {
	a, err := rt.control.Waiting(ctx, id)
	return approvalOf(a), err
}

// Approve grants the call Approval(id) returns: the instance that made it
// runs it (once, whatever crashes come between) and goes on. always also
// allows its rule for the rest of the root's session.
func (rt *Runtime) Approve(ctx context.Context, id string, always bool) error {
	a, err := rt.control.Waiting(ctx, id)
	if err != nil || a == nil {
		return cmpErr(err, rt.noApproval(ctx, id))
	}
	return rt.control.Approve(ctx, a.InstanceID, always)
}

// Deny refuses the call Approval(id) returns: the model that made it reads
// reason as the call's error.
func (rt *Runtime) Deny(ctx context.Context, id, reason string) error {
	a, err := rt.control.Waiting(ctx, id)
	if err != nil || a == nil {
		return cmpErr(err, rt.noApproval(ctx, id))
	}
	return rt.control.Deny(ctx, a.InstanceID, reason)
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

func (rt *Runtime) noApproval(ctx context.Context, id string) error {
	in, err := rt.st.GetInstance(ctx, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("deputy: %w: instance %s is %s, and no call of it or below it waits for approval",
		instance.ErrIllegalTransition, id, in.State)
}
