package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/tool"
)

// What an instance is offered. An instance HOLDS tools (node.avail: a
// root's Task.Tools, a child's share of its parent's, as its allowlist
// filters them), which its children draw from, and is OFFERED the held
// tools plus its share of deputy's own (tree.own): spawning while the
// depth allows, the subagent_* tools under a managed runtime, skill with
// granted skills, ask_parent where someone can answer. A definition's
// allowlist grants deputy's tools by name like any other
// (agentdef.Definition.Tools); a root's Task.Offer narrows what it is
// offered without changing what it holds.

// taskAlias is the name spawn_subagent also answers to (a tool.Set alias:
// not offered, so it costs no prompt tokens), for models trained on Claude
// Code's Task tool.
const taskAlias = "task"

// pick is the share of deputy's tools named in names, nil for none (Join
// takes nil as nothing; Filter would take it as everything).
func (tr *tree) pick(names []string) *tool.Set {
	if len(names) == 0 {
		return nil
	}
	return tr.own.Filter(names, nil)
}

// spawning is the spawn tools a parent at depth with a grant for each
// gets, in RuntimeTools' order: spawn_subagent with the subagent_* tools
// (under a managed runtime), fan_out; none once the depth is reached,
// where a call to one is an unknown-tool error the model reads, never a
// silent drop.
func (tr *tree) spawning(depth int, grants func(string) bool) []string {
	var out []string
	if depth >= tr.maxDepth {
		return nil
	}
	if grants(agentdef.SpawnTool) {
		out = append(out, agentdef.SpawnTool)
	}
	if grants(agentdef.FanOutTool) {
		out = append(out, agentdef.FanOutTool)
	}
	if tr.managed && grants(agentdef.SpawnTool) {
		for _, n := range agentdef.ManageTools() {
			// Approving is offered only where permissions are enforced:
			// elsewhere nothing is ever held for approval.
			if n != agentdef.ApproveTool || tr.perms != nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// asks reports whether an instance of def may be offered ask_parent, when
// someone can answer it: its allowlist grants it, or the runner offers it
// to all (AskParent) and its deny list does not refuse it.
func (tr *tree) asks(def *agentdef.Definition) bool {
	return def.Allows(agentdef.AskTool) || tr.r.AskParent && !slices.Contains(def.DisallowedTools, agentdef.AskTool)
}

// childOwn is the share of deputy's tools a child of def at depth is
// offered (isolated) or may call (fork). A child asks only under a
// Manager, through which its parent answers (subagent_answer).
func (tr *tree) childOwn(def *agentdef.Definition, depth int, skills bool) []string {
	out := tr.spawning(depth, def.Allows)
	if skills {
		out = append(out, agentdef.SkillTool)
	}
	if tr.r.Questions != nil && tr.r.Manager != nil && tr.asks(def) {
		out = append(out, agentdef.AskTool)
	}
	return out
}

// rootTools is what a plain root is offered: with no Task.Offer, all it
// holds and every one of deputy's tools whose condition holds (spawning
// and the task alias while MaxDepth allows, ask_parent with Questions);
// else exactly what Offer names.
func (tr *tree) rootTools(t Task) (*tool.Set, error) {
	own := tr.spawning(0, func(string) bool { return true })
	if tr.r.Questions != nil {
		own = append(own, agentdef.AskTool)
	}
	full, err := t.Tools.Join(tr.pick(own))
	if err != nil {
		return nil, fmt.Errorf("root tools: %w", err)
	}
	if t.Offer != nil {
		return tr.narrow(t.Offer, full, t.Tools, nil)
	}
	if _, ok := full.Lookup(agentdef.SpawnTool); ok {
		if full, err = full.Alias(taskAlias, agentdef.SpawnTool); err != nil {
			return nil, fmt.Errorf("root tools: %w", err)
		}
	}
	return full, nil
}

// narrow is full (all a root may be offered) narrowed to offer's names,
// in full's order. A name full lacks is an error saying why (whyNot); all
// of them are named at once. held is what the root holds; def its type,
// nil for a plain root.
func (tr *tree) narrow(offer []string, full, held *tool.Set, def *agentdef.Definition) (*tool.Set, error) {
	var bad []string
	alias := false
	for _, name := range offer {
		if _, ok := full.Lookup(name); ok {
			continue
		}
		if name == taskAlias {
			alias = true
			if _, ok := full.Lookup(agentdef.SpawnTool); !ok || !slices.Contains(offer, agentdef.SpawnTool) {
				bad = append(bad, fmt.Sprintf("%s is spawn_subagent's other name: it comes only with spawn_subagent, "+
					"which must be listed and offerable", taskAlias))
			}
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: %s", name, tr.whyNot(name, held, def)))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("agent: Task.Offer names tools the root cannot be offered: %s", strings.Join(bad, "; "))
	}
	out := full.Filter(offer, nil) // offer is not nil: exactly its names
	if alias {
		var err error
		if out, err = out.Alias(taskAlias, agentdef.SpawnTool); err != nil {
			return nil, fmt.Errorf("root tools: %w", err)
		}
	}
	return out, nil
}

// whyNot says why the root cannot be offered name.
func (tr *tree) whyNot(name string, held *tool.Set, def *agentdef.Definition) string {
	_, isHeld := held.Lookup(name)
	manage := slices.Contains(agentdef.ManageTools(), name)
	switch {
	case !isHeld && !slices.Contains(agentdef.RuntimeTools(), name):
		return fmt.Sprintf("it is neither a tool of Task.Tools nor one of deputy's own (%s)",
			strings.Join(agentdef.RuntimeTools(), ", "))
	case manage && !tr.managed:
		return "the subagent_* tools need a managed runtime (Runner.Manager and Runner.Children)"
	case name == agentdef.ApproveTool && tr.perms == nil:
		return "subagent_approve needs permissions (Runner.Permissions): without them nothing waits for approval"
	case (manage || name == agentdef.SpawnTool || name == agentdef.FanOutTool) && tr.maxDepth == 0:
		return "Runner.MaxDepth allows no spawning"
	case name == agentdef.AskTool && tr.r.Questions == nil:
		return "ask_parent needs Runner.Questions, to take the question"
	case name == agentdef.SkillTool && def == nil:
		return "a plain root has no skills to load (a root of a type has its type's)"
	case name == agentdef.SkillTool:
		return fmt.Sprintf("subagent type %s grants no skills", def.Name)
	case manage && def != nil:
		return fmt.Sprintf("subagent type %s does not grant spawn_subagent, which the subagent_* tools come with", def.Name)
	case def != nil:
		return fmt.Sprintf("subagent type %s does not grant it", def.Name)
	}
	return "it cannot be offered here" // everything else a plain root may be offered is in full
}

// withGuidance is system with the delegation guidance after it when tools
// offers spawn_subagent.
func withGuidance(system string, tools *tool.Set) string {
	if _, ok := tools.Lookup(agentdef.SpawnTool); ok {
		return system + "\n\n" + DelegationGuidance
	}
	return system
}
