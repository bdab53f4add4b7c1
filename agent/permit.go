package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/permission"
)

// Permissions is what a tree's calls are decided by (issue 20): the root's
// policy (its settings files' rules and mode, deputy.yaml's permissions,
// its type's permissionMode) and the directories rules are read against.
// Every child's policy is its parent's narrowed by its definition
// (permission.Policy.Child), so no node of the tree, at any depth, may do
// what its parent may not.
type Permissions struct {
	Policy permission.Policy
	// ProjectDir anchors `/` rules and is where acceptEdits may edit;
	// Cwd anchors `./` and relative ones (ProjectDir when empty); Home
	// anchors `~/` ones.
	ProjectDir, Cwd, Home string
}

// Approval is a call a node's permissions hold until someone approves it.
type Approval struct {
	InstanceID string          `json:"instance_id"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	Input      json.RawMessage `json:"input"`
	Rule       string          `json:"rule,omitempty"`   // the ask rule that matched, if one did
	Reason     string          `json:"reason,omitempty"` // why it asks, in words
	// Turn is the call's turn in its run (loop.Call.Turn): the resumed
	// run makes the call again as that turn's.
	Turn int `json:"turn"`
	// Holder is the nearest ancestor whose own permissions allow the call,
	// which may grant it (subagent_approve); "" when none does: the
	// approval is the person's at the root.
	Holder  string    `json:"holder,omitempty"`
	AskedAt time.Time `json:"asked_at"`
}

// Approver answers approvals inline, for a program that runs a tree in
// memory and has someone (or something) to ask: granted, the call runs;
// refused, the model reads reason as the call's error. An error refuses
// the call with it.
type Approver interface {
	Approve(ctx context.Context, a Approval) (granted bool, reason string, err error)
}

// Approvals records pending approvals durably (the durable engine): Hold
// records a (idempotent for one call: a replayed run holds it once) and
// the run suspends after its turn, the instance asking. Always gives the
// rules the person allowed for the rest of root's session (approve
// --always), which turn later asks into allows.
type Approvals interface {
	Hold(ctx context.Context, a Approval) error
	Always(ctx context.Context, root string) ([]string, error)
}

// Approving is a Manager that also lets a parent decide its child's
// pending approval (subagent_approve); the agent checks first that the
// parent's own permissions allow the call.
type Approving interface {
	Approval(ctx context.Context, parent, id string) (*Approval, error)
	Decide(ctx context.Context, parent, id string, granted bool, reason string) error
}

// PermissionMode is a definition's permissionMode front matter ("" when it
// has none): its typed field, or, for a definition made in code or stored
// before the field existed, Extra's permissionMode.
func PermissionMode(def *agentdef.Definition) (permission.Mode, error) {
	if def != nil && def.PermissionMode != "" {
		return permission.ParseMode(string(def.PermissionMode))
	}
	if def == nil || def.Extra == nil {
		return "", nil
	}
	v, ok := def.Extra["permissionMode"]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("subagent type %s: permissionMode must be a string, not %T", def.Name, v)
	}
	return permission.ParseMode(s)
}

// PermissionRules are a definition's own rules, deputy's extension to
// Claude Code's front matter (`permissions: {allow: [...], ask: [...],
// deny: [...]}`, read from Extra like permissionMode): they can only
// narrow, since the child still answers to its parent's policy.
func PermissionRules(def *agentdef.Definition) (permission.Set, error) {
	var set permission.Set
	if def == nil || def.Extra == nil {
		return set, nil
	}
	v, ok := def.Extra["permissions"]
	if !ok {
		return set, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return set, fmt.Errorf("subagent type %s: permissions must be a mapping of allow, ask and deny lists", def.Name)
	}
	for key, list := range m {
		var to *[]permission.Rule
		switch key {
		case "allow":
			to = &set.Allow
		case "ask":
			to = &set.Ask
		case "deny":
			to = &set.Deny
		default:
			return set, fmt.Errorf("subagent type %s: permissions.%s: want allow, ask or deny", def.Name, key)
		}
		items, ok := list.([]any)
		if !ok {
			return set, fmt.Errorf("subagent type %s: permissions.%s must be a list of rules", def.Name, key)
		}
		for _, it := range items {
			text, ok := it.(string)
			if !ok {
				return set, fmt.Errorf("subagent type %s: permissions.%s: a rule must be a string, not %T", def.Name, key, it)
			}
			r, err := permission.ParseRule(text)
			if err != nil {
				// Refused whatever the list: a rule its author wrote and
				// deputy cannot read is not silently dropped.
				return set, fmt.Errorf("subagent type %s: permissions.%s: %w", def.Name, key, err)
			}
			*to = append(*to, r)
		}
	}
	return set, nil
}

// childPolicy is the policy of a child of type def under parent: nil when
// the tree enforces none. A definition names only a mode (Claude Code's
// subagents have no rules of their own): the child keeps its parent's
// rules under that mode, and answers to the whole chain above it; a mode
// wider than its parent's is refused, so the spawn fails with the reason.
func childPolicy(parent *node, def *agentdef.Definition) (*permission.Policy, error) {
	if parent.policy == nil {
		return nil, nil
	}
	mode, err := PermissionMode(def)
	if err != nil {
		return nil, err
	}
	if mode == "" {
		mode = parent.policy.Mode
	}
	own, err := PermissionRules(def)
	if err != nil {
		return nil, err
	}
	set := parent.policy.Set
	set.Allow = append(slices.Clip(set.Allow), own.Allow...)
	set.Ask = append(slices.Clip(set.Ask), own.Ask...)
	set.Deny = append(slices.Clip(set.Deny), own.Deny...)
	p, err := parent.policy.Child(permission.Policy{Mode: mode, Set: set})
	if err != nil {
		return nil, fmt.Errorf("subagent type %s: %w", def.Name, err)
	}
	return &p, nil
}

// ungated are deputy's own tools the gate does not ask about: they act
// only inside the tree (waiting for, steering, answering children; asking
// the parent; reading a skill), and what a child may do is its own
// policy's. Spawning and fan-out are decided like any call (a rule may
// deny Task), and the children they start are held to narrower policies.
var ungated = func() map[string]bool {
	m := map[string]bool{agentdef.SkillTool: true, agentdef.AskTool: true}
	for _, n := range agentdef.ManageTools() {
		m[n] = true
	}
	return m
}()

// permCall is a call of n's as its policy reads it.
func (tr *tree) permCall(name string, input json.RawMessage) permission.Call {
	p := tr.perms
	return permission.Call{Tool: name, Input: input, Cwd: cmpOr(p.Cwd, p.ProjectDir), ProjectDir: p.ProjectDir, Home: p.Home}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// gate is n's loop.Config.Gate: its policy decides each call; an ask is
// turned into an allow by the session's --always rules, answered by the
// Approver when there is one, and otherwise held (recorded through
// Approvals when durable), which suspends the run with n asking.
func (tr *tree) gate(n *node) loop.GateFunc {
	return func(ctx context.Context, c *loop.Call, name string, input json.RawMessage) loop.GateResult {
		if ungated[name] {
			return loop.GateResult{}
		}
		call := tr.permCall(name, input)
		d := hookDecision(ctx, n.policy.Decide(call)) // a PreToolUse hook's say, in hooks.go
		switch d.Outcome {
		case permission.Allow:
			return loop.GateResult{Rule: d.Rule, Reason: d.Reason}
		case permission.Deny:
			return loop.GateResult{Verdict: loop.GateDeny, Rule: d.Rule, Reason: cmpOr(d.Reason, "a deny rule matched")}
		}
		if ok, err := tr.always(ctx, n, call); err != nil {
			return loop.GateResult{Verdict: loop.GateDeny, Reason: "the session's approvals could not be read: " + err.Error()}
		} else if ok {
			return loop.GateResult{Rule: d.Rule, Reason: "approved for the session"}
		}
		a := Approval{InstanceID: n.id(tr), CallID: c.ID, Tool: name, Input: input, Rule: d.Rule,
			Reason: cmpOr(d.Reason, "rule "+d.Rule), Turn: c.Turn, Holder: holder(tr, n, call), AskedAt: tr.clock.Now()}
		switch {
		case tr.r.Approver != nil:
			granted, why, err := tr.r.Approver.Approve(ctx, a)
			switch {
			case err != nil:
				return loop.GateResult{Verdict: loop.GateDeny, Rule: d.Rule, Reason: "the approval failed: " + err.Error()}
			case !granted:
				return loop.GateResult{Verdict: loop.GateDeny, Rule: d.Rule, Reason: cmpOr(why, "the call was not approved")}
			}
			return loop.GateResult{Rule: d.Rule, Reason: "approved"}
		case tr.r.Approvals != nil:
			if err := tr.r.Approvals.Hold(ctx, a); err != nil {
				return loop.GateResult{Verdict: loop.GateDeny, Rule: d.Rule, Reason: "the approval could not be recorded: " + err.Error()}
			}
		}
		return loop.GateResult{Verdict: loop.GateAsk, Rule: d.Rule, Reason: a.Reason}
	}
}

// id is n's instance id, read under the tree's lock.
func (n *node) id(tr *tree) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return n.inst.ID
}

// holder is the nearest ancestor of n whose own policy allows call: the
// one who may grant it. "" when none does (the person decides).
func holder(tr *tree, n *node, call permission.Call) string {
	for a := n.parent; a != nil; a = a.parent {
		if a.policy != nil && a.policy.Decide(call).Outcome == permission.Allow {
			return a.id(tr)
		}
	}
	return ""
}

// always reports whether one of the session's --always rules allows call.
func (tr *tree) always(ctx context.Context, n *node, call permission.Call) (bool, error) {
	if tr.r.Approvals == nil {
		return false, nil
	}
	tr.mu.Lock()
	root := n.inst.Root
	tr.mu.Unlock()
	texts, err := tr.r.Approvals.Always(ctx, root)
	if err != nil || len(texts) == 0 {
		return false, err
	}
	var set permission.Set
	for _, t := range texts {
		if r, err := permission.ParseRule(t); err == nil {
			set.Allow = append(set.Allow, r)
		} else if t == call.Tool {
			return true, nil // a tool rules cannot name (a program's own): allowed by name
		}
	}
	return set.Decide(call).Outcome == permission.Allow, nil
}

// AlwaysRule is the rule approve --always adds for a: the ask rule that
// matched, or, when the mode asked with no rule, one naming exactly this
// call (its command, for bash), or the tool's name (a program's own tool,
// which no rule syntax names, is then allowed by name).
func AlwaysRule(a Approval) string {
	if a.Rule != "" && !strings.Contains(a.Rule, ", ") {
		return a.Rule
	}
	if a.Tool == "bash" {
		var in struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(a.Input, &in) == nil && in.Command != "" && !strings.ContainsAny(in.Command, "()") {
			return "Bash(" + in.Command + ")"
		}
	}
	return a.Tool
}

// mayGrant reports whether parent's own policy allows a's call, so it may
// approve it for its child; why says otherwise.
func (tr *tree) mayGrant(parent *node, a *Approval) (ok bool, why string) {
	if parent.policy == nil {
		return true, ""
	}
	d := parent.policy.Decide(tr.permCall(a.Tool, a.Input))
	if d.Outcome == permission.Allow {
		return true, ""
	}
	return false, fmt.Sprintf("your own permissions do not allow %s (%s: %s), so it is not yours to approve; "+
		"it waits for whoever may grant it", a.Tool, d.Outcome, cmpOr(d.Reason, "rule "+d.Rule))
}

// ApprovalNotice is what a parent reads of its child's pending approval.
func ApprovalNotice(a *Approval, parent string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "waits for approval to call %s %s", a.Tool, agentdef.OneLine(string(a.Input), 300))
	if a.Rule != "" {
		fmt.Fprintf(&b, " (rule %s)", a.Rule)
	}
	switch a.Holder {
	case parent:
		b.WriteString(". You may grant it: subagent_approve with approve true or false (and a reason), then subagent_wait for its report.")
	case "":
		b.WriteString(". Only the operator may grant it (deputy approve " + a.InstanceID + "); it waits for them.")
	default:
		b.WriteString(". Only " + a.Holder + ", above you, may grant it; it waits for them.")
	}
	return b.String()
}

// rootPolicy is the root's policy of t: the task's permissions or the
// runner's, narrowed by its type's permissionMode (def, nil for a plain
// root). nil when neither sets any: nothing is enforced.
func (tr *tree) rootPolicy(def *agentdef.Definition) (*permission.Policy, error) {
	if tr.perms == nil {
		return nil, nil
	}
	p := tr.perms.Policy
	if def == nil {
		return &p, nil
	}
	mode, err := PermissionMode(def)
	if err != nil || mode == "" {
		return &p, err
	}
	c, err := p.Child(permission.Policy{Mode: mode, Set: p.Set})
	if err != nil {
		return nil, fmt.Errorf("subagent type %s: %w", def.Name, err)
	}
	return &c, nil
}

// approveTool is subagent_approve: a parent decides its child's pending
// approval, granting only what its own permissions allow.
func approveTool(tr *tree) *manageTool {
	return &manageTool{tree: tr, name: agentdef.ApproveTool,
		desc: "Decide a call your subagent waits to have approved (subagent_status and subagent_wait show it): " +
			"approve true runs it, false refuses it and the subagent reads your reason. You may approve only " +
			"what your own permissions allow. Then subagent_wait for its report.",
		schema: `{"type":"object","properties":{` + idProp + `,"approve":{"type":"boolean"},` +
			`"reason":{"type":"string","description":"Why, when refusing: the subagent reads it."}},` +
			`"required":["id","approve"],"additionalProperties":false}`,
		run: func(ctx context.Context, m Manager, parent string, in manageInput) (string, error) {
			ap, ok := m.(Approving)
			if !ok {
				return "", fmt.Errorf("%s is not available here", agentdef.ApproveTool)
			}
			a, err := ap.Approval(ctx, parent, in.ID)
			if err != nil {
				return "", err
			}
			if a == nil {
				return "", fmt.Errorf("%s has no call waiting for approval", in.ID)
			}
			if in.Approve != nil && *in.Approve {
				if ok, why := tr.mayGrant(nodeFrom(ctx), a); !ok {
					return "", fmt.Errorf("not approved: %s", why)
				}
			}
			granted := in.Approve != nil && *in.Approve
			if err := ap.Decide(ctx, parent, in.ID, granted, in.Reason); err != nil {
				return "", err
			}
			if granted {
				return fmt.Sprintf("approved %s's %s call; it runs it and goes on", in.ID, a.Tool), nil
			}
			return fmt.Sprintf("refused %s's %s call; it reads your reason", in.ID, a.Tool), nil
		}}
}
