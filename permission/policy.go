package permission

import "fmt"

// Policy is one agent's permissions: a mode and its rules, plus (for a
// subagent) the chain of its ancestors' policies.
type Policy struct {
	Mode Mode
	Set  Set

	// ancestors are the policies above this one, root first. They are
	// kept whole, not merged, so that Decide can ask each of them.
	ancestors []Policy
}

// Depth is the number of ancestors the policy answers to.
func (p Policy) Depth() int { return len(p.ancestors) }

// Decide gives the final answer for a call: every policy in the chain,
// from the root down to p, decides it with its own mode and rules
// (Effective), and the strictest answer wins (Deny over Ask over Allow).
// On a tie the policy nearest the root is reported, since it is the one
// the child could not have changed. Because a child's answer is combined
// with its parent's, it can never be more permissive than the parent's.
func (p Policy) Decide(call Call) Decision {
	ci := readCall(&call)
	best := effective(p.Mode, &p.Set, &ci)
	level := len(p.ancestors)
	for i := range p.ancestors {
		a := &p.ancestors[i]
		d := effective(a.Mode, &a.Set, &ci)
		if d.Outcome > best.Outcome || d.Outcome == best.Outcome && i < level {
			best, level = d, i
		}
	}
	if level < len(p.ancestors) && best.Outcome != Allow {
		best.Reason = fmt.Sprintf("ancestor %d (%s mode): %s", level, modeName(p.ancestors[level].Mode), cmpOr(best.Reason, "rule "+best.Rule))
	}
	return best
}

func modeName(m Mode) string { return string(cmpOrMode(m)) }

func cmpOrMode(m Mode) Mode {
	if m == "" {
		return ModeDefault
	}
	return m
}

// Child gives the policy of a subagent defined with def, under p. The
// child answers to p and all of p's ancestors (and to any chain def itself
// carries), so its effective permissions are the intersection of theirs:
// allowed only if all allow, denied if any denies, asked otherwise.
//
// A def whose mode is wider than p's (bypassPermissions under default,
// acceptEdits under plan) is refused: the chain would narrow it anyway,
// and a definition that asks for more than its parent has is a mistake
// worth reporting.
func (p Policy) Child(def Policy) (Policy, error) {
	chain := make([]Policy, 0, len(p.ancestors)+1+len(def.ancestors))
	chain = append(chain, p.ancestors...)
	chain = append(chain, Policy{Mode: p.Mode, Set: p.Set.indexed()})
	chain = append(chain, def.ancestors...)
	for _, a := range chain {
		if def.Mode.Wider(a.Mode) {
			return Policy{}, fmt.Errorf("permission mode %s of the child is wider than its parent's %s", modeName(def.Mode), modeName(a.Mode))
		}
	}
	return Policy{Mode: cmpOrMode(def.Mode), Set: def.Set.indexed(), ancestors: chain}, nil
}
