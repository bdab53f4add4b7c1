package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
)

// Approvals are questions of their own kind (issue 20): a call an
// instance's permissions hold is posted to its own mailbox as
// MailApproval (keyed by the call, so a replayed run posts it once), its
// run suspends after the turn and the instance waits asking, as for a
// question. The decision (MailDecision) comes from whoever may grant it:
// its parent within its own permissions (subagent_approve), else the
// operator. The next run does not deliver the pending results as they
// are: it resumes (loop.Config.Resume) with the decision, so an approved
// call runs in that run's first batch, checkpointed like any, exactly
// once; the mail is consumed when that batch's results are recorded.
const (
	MailApproval = "approval" // the instance's pending approval (agent.Approval, JSON)
	MailDecision = "decision" // the decision on it (decision, JSON)
	// mailAlways is a rule the operator allowed for the rest of a root's
	// session (approve --always); it stays in the root's mailbox, never
	// consumed, for the gates of every later run of the tree to read.
	mailAlways = "always"
)

// decision is MailDecision's body.
type decision struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
	CallID   string `json:"call_id"`
}

// Hold implements agent.Approvals: the approval goes into the instance's
// own mailbox, where a decision's poster finds it.
func (e *Engine) Hold(ctx context.Context, a agent.Approval) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = e.st.Post(context.WithoutCancel(ctx), store.Mail{InstanceID: a.InstanceID, Sender: a.InstanceID,
		Kind: MailApproval, Body: string(b), Key: "approval-" + a.CallID})
	if errors.Is(err, store.ErrConflict) {
		return nil // posted by an earlier execution of the same call (its time differs)
	}
	return err
}

// Always implements agent.Approvals: the rules approve --always added to
// root's session.
func (e *Engine) Always(ctx context.Context, root string) ([]string, error) {
	mail, err := e.st.Pending(ctx, root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mail {
		if m.Kind == mailAlways {
			out = append(out, m.Body)
		}
	}
	return out, nil
}

// openApproval is instance id's pending approval and its mail id, nil when
// it has none.
func openApproval(ctx context.Context, st *store.Store, id string) (*agent.Approval, int64, error) {
	mail, err := st.Pending(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	return approvalIn(mail)
}

func approvalIn(mail []store.Mail) (*agent.Approval, int64, error) {
	for i := len(mail) - 1; i >= 0; i-- {
		if mail[i].Kind != MailApproval {
			continue
		}
		a := &agent.Approval{}
		if err := json.Unmarshal([]byte(mail[i].Body), a); err != nil {
			return nil, 0, fmt.Errorf("approval %d of %s does not decode: %w", mail[i].ID, mail[i].InstanceID, err)
		}
		return a, mail[i].ID, nil
	}
	return nil, 0, nil
}

// Approval returns an instance's pending approval, nil when it has none
// (or is not waiting on it).
func (c Control) Approval(ctx context.Context, id string) (*agent.Approval, error) {
	in, err := c.Store.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	if in.State != instance.Asking && in.State != instance.Paused {
		return nil, nil
	}
	a, _, err := openApproval(ctx, c.Store, id)
	return a, err
}

// Approve grants an instance's pending approval: its next run makes the
// call. always also allows the approval's rule (agent.AlwaysRule) for the
// rest of its root's session.
func (c Control) Approve(ctx context.Context, id string, always bool) error {
	return c.decide(ctx, id, Operator, decision{Approved: true}, always)
}

// Deny refuses an instance's pending approval: its next run answers the
// call with reason as its error, and the model goes on from there.
func (c Control) Deny(ctx context.Context, id, reason string) error {
	return c.decide(ctx, id, Operator, decision{Reason: reason}, false)
}

// decide posts d on instance id's pending approval for sender (the
// operator, or the parent) and starts its next run, as an answer does.
func (c Control) decide(ctx context.Context, id, sender string, d decision, always bool) error {
	in, err := c.Store.GetInstance(ctx, id)
	if err != nil {
		return err
	}
	a, mid, err := openApproval(ctx, c.Store, id)
	if err != nil {
		return err
	}
	if a == nil || (in.State != instance.Asking && in.State != instance.Paused) {
		return refused(in, "approved or denied (it has no call waiting for approval)")
	}
	d.CallID = a.CallID
	body, _ := json.Marshal(d)
	if _, err := c.Store.Post(ctx, store.Mail{InstanceID: id, Sender: sender, Kind: MailDecision, Body: string(body),
		Key: fmt.Sprintf("decision-%d", mid)}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("%w: instance %s: its approval was decided already", store.ErrConflict, id)
		}
		return err
	}
	if always && d.Approved {
		rule := agent.AlwaysRule(*a)
		if _, err := c.Store.Post(ctx, store.Mail{InstanceID: in.Root, Sender: sender, Kind: mailAlways, Body: rule,
			Key: "always-" + rule}); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	if err := consumeFrom(ctx, c.Store, id); err != nil { // the parent's notice is done with
		return err
	}
	if in.State == instance.Paused {
		return nil
	}
	return c.restart(ctx, in, "approval decided")
}

// resumption is how a run continues a transcript whose last turn held
// calls, once they are decided: the loop's Resume, and the mail it takes
// (consumed when the turn's results are recorded). ok is false when mail
// holds no decision on such a turn: the run starts as any other.
func resumption(msgs []llm.Message, mail []store.Mail) (_ *loop.Resume, ids []int64, ok bool) {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != llm.Assistant {
		return nil, nil, false
	}
	var pending *llm.Message
	var d *decision
	var a *agent.Approval
	for _, m := range mail {
		switch m.Kind {
		case mailPending:
			var p llm.Message
			if json.Unmarshal([]byte(m.Body), &p) != nil {
				continue
			}
			pending = &p
		case MailDecision:
			var got decision
			if json.Unmarshal([]byte(m.Body), &got) != nil {
				continue
			}
			d = &got
		case MailApproval:
			var got agent.Approval
			if json.Unmarshal([]byte(m.Body), &got) != nil {
				continue
			}
			a = &got
		default:
			continue
		}
		ids = append(ids, m.ID)
	}
	if pending == nil || d == nil || !slices.ContainsFunc(pending.Content, loop.IsHeld) {
		return nil, nil, false
	}
	r := &loop.Resume{Pending: pending, Denied: map[string]string{}}
	if a != nil {
		r.Turn = a.Turn
	}
	for _, u := range loop.HeldCalls(msgs[len(msgs)-1], pending) {
		switch {
		case u.ID == d.CallID && d.Approved:
			r.Approved = append(r.Approved, u.ID)
		case u.ID == d.CallID:
			r.Denied[u.ID] = deniedWhy(d.Reason)
		}
	}
	return r, ids, true
}

func deniedWhy(reason string) string {
	if reason == "" {
		return "the call was denied"
	}
	return "the call was denied: " + reason
}

// approvalNotice is what instance id's parent reads of its pending
// approval ("" when it has none).
func approvalNotice(ctx context.Context, st *store.Store, id string) (string, *agent.Approval, error) {
	in, err := st.GetInstance(ctx, id)
	if err != nil {
		return "", nil, err
	}
	a, _, err := openApproval(ctx, st, id)
	if err != nil || a == nil {
		return "", nil, err
	}
	return agent.ApprovalNotice(a, in.Parent), a, nil
}

// Approval implements agent.Approving: parent's child id's pending
// approval.
func (m manager) Approval(ctx context.Context, parent, id string) (*agent.Approval, error) {
	if _, err := m.e.child(ctx, parent, id); err != nil {
		return nil, err
	}
	return m.e.control().Approval(ctx, id)
}

// Decide implements agent.Approving (the agent has checked that parent's
// own permissions allow the call).
func (m manager) Decide(ctx context.Context, parent, id string, granted bool, reason string) error {
	return m.act(ctx, parent, id, func(c Control) error {
		return c.decide(ctx, id, parent, decision{Approved: granted, Reason: reason}, false)
	})
}

// Waiting returns the call instance id waits to have approved, or, when it
// has none, the first one a descendant waits on, nearest first (a call
// its parent may not grant is the person's): the whole tree's approvals
// reach whoever holds the root. nil when none waits.
func (c Control) Waiting(ctx context.Context, id string) (*agent.Approval, error) {
	in, err := c.Store.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	if a, err := c.Approval(ctx, id); err != nil || a != nil {
		return a, err
	}
	tree, err := c.Store.ListInstances(ctx, store.Filter{Root: in.Root, Active: true})
	if err != nil {
		return nil, err
	}
	// Each round takes the next generation below id.
	level := map[string]bool{id: true}
	for len(level) > 0 {
		next := map[string]bool{}
		for _, t := range tree {
			if !level[t.Parent] {
				continue
			}
			next[t.ID] = true
			if t.State != instance.Asking {
				continue
			}
			if a, err := c.Approval(ctx, t.ID); err != nil || a != nil {
				return a, err
			}
		}
		level = next
	}
	return nil, nil
}
