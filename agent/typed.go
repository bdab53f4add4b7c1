package agent

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/loop"
)

// A root run as a type (Task.Type): a program, a person or an MCP client
// starts an instance of a subagent type directly, and it must run exactly
// as a parent agent's spawn of that type would. So its node is built by the
// very function that builds an isolated child (build), as the child of the
// task itself: a parent that is never listed, whose model is what an
// inheriting type runs on, whose tools are what the type's allowlist
// filters, and which sits at depth -1 so the root is at depth 0 and spawns
// only when its type names spawn_subagent and MaxDepth allows, as a child
// would. What differs from a child is only what makes it a root: it is
// listed first with no parent, it writes (its writing children take turns
// under it), and the task's own limits, compaction, steps, inbox and hold
// apply.

// rootType is the definition t's root runs as, or nil for a plain root.
func (tr *tree) rootType(t Task) (*agentdef.Definition, error) {
	if t.Definition != nil {
		def := t.Definition.Clone()
		if err := def.Validate(); err != nil {
			return nil, fmt.Errorf("agent: root type: %w", err)
		}
		return def, nil
	}
	if t.Type == "" || t.Type == "root" {
		return nil, nil
	}
	def, ok := tr.catalog.Lookup(t.Type)
	if !ok {
		return nil, UnknownType(t.Type, tr.catalog.List())
	}
	return def, nil
}

// UnknownType is the error for a type that is not among defs (the
// catalog's); it lists those that are.
func UnknownType(name string, defs []*agentdef.Definition) error {
	return fmt.Errorf("unknown subagent type %q; the types are: %s", name, typeNames(defs))
}

// typeNames lists defs' names, for the errors that refuse an unknown type.
func typeNames(defs []*agentdef.Definition) string {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	return strings.Join(names, ", ")
}

// CheckRoot refuses a type that cannot run as a root: one asking for a
// fence (sandbox, container, worktree). A root's fence is not built (its
// tools are the workspace's own), and a fenced type must never run
// unfenced, so such a type runs only as a spawned child.
func CheckRoot(def *agentdef.Definition) error {
	if !fenced(def) {
		return nil
	}
	what := "isolation " + string(def.Isolation)
	switch {
	case def.Worktree && (def.Isolation == "" || def.Isolation == agentdef.IsolationNone):
		what = "a git worktree"
	case def.Worktree:
		what += " and a git worktree"
	}
	return fmt.Errorf("subagent type %s asks for %s, which deputy builds only for a spawned child, never for a "+
		"root: it is refused rather than run unfenced (start it from an agent that can spawn it, or use a type "+
		"without isolation)", def.Name, what)
}

// typedRoot builds the root of t as an isolated child of type def (see
// above), and lists it.
func (tr *tree) typedRoot(t Task, def *agentdef.Definition) (*node, error) {
	if err := CheckRoot(def); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	origin := &node{inst: instance.Record{Depth: -1, Model: t.ModelSpec}, avail: t.Tools,
		cfg: loop.Config{Model: t.Model, ModelName: t.ModelName}}
	c, err := tr.build(origin, def, agentdef.ModeIsolated, t.Task)
	if err != nil {
		return nil, fmt.Errorf("agent: root of type %s: %w", def.Name, err)
	}
	if !tr.budget.priced(c.inst.Model) {
		return nil, fmt.Errorf("agent: a USD tree budget needs a price for %s (deputy.yaml prices)", c.inst.Model)
	}
	// A fork type has no conversation to fork here: it runs isolated, as
	// under Task.Inherited. The root has no mode of its own.
	c.inst.ID, c.inst.Mode, c.heir, c.writes = t.ID, "", t.Inherited, true
	if c.policy, err = tr.rootPolicy(def); err != nil {
		return nil, fmt.Errorf("agent: root of type %s: %w", def.Name, err)
	}
	root := tr.add(nil, c)
	cfg := &root.cfg
	cfg.Limits = TypeLimits(def, t.Limits)
	cfg.Compaction, cfg.Steps, cfg.Inbox, cfg.Hold, cfg.Resume = t.Compaction, tr.r.Steps, t.Inbox, t.Hold, t.Resume
	if tr.r.Questions != nil && tr.asks(def) {
		// Its parent is whoever started it: a root may ask them even
		// without a Manager (a child needs one, to be answered).
		if _, ok := cfg.Tools.Lookup(agentdef.AskTool); !ok {
			if cfg.Tools, err = cfg.Tools.Join(tr.pick([]string{agentdef.AskTool})); err != nil {
				return nil, fmt.Errorf("root tools: %w", err)
			}
		}
	}
	if t.Offer != nil {
		if cfg.Tools, err = tr.narrow(t.Offer, cfg.Tools, t.Tools, def); err != nil {
			return nil, err
		}
		if c := cfg.ToolChoice; c.Type == "tool" {
			if _, ok := cfg.Tools.Lookup(c.Name); !ok {
				return nil, fmt.Errorf("agent: subagent type %s must call %s (its tool choice), which Task.Offer leaves out", def.Name, c.Name)
			}
		}
		// Its prompt lists its skills and ends with the delegation
		// guidance only when it is offered what they are about.
		if _, ok := cfg.Tools.Lookup(agentdef.SkillTool); !ok {
			root.skills = nil
		}
		cfg.System = withGuidance(def.SubagentSystem(root.skills), cfg.Tools)
	}
	return root, nil
}

// TypeLimits is the limits of a root run as def: each limit l leaves at
// zero is the type's, as a child of it gets (limitsOf), and the soft
// timeout is SoftTimeoutShare of the wall time, as a child's.
func TypeLimits(def *agentdef.Definition, l loop.Limits) loop.Limits {
	d := limitsOf(def)
	l.MaxTurns = cmp.Or(l.MaxTurns, d.MaxTurns)
	l.MaxTotalTokens = cmp.Or(l.MaxTotalTokens, d.MaxTotalTokens)
	l.MaxToolCalls = cmp.Or(l.MaxToolCalls, d.MaxToolCalls)
	l.MaxOutputTokens = cmp.Or(l.MaxOutputTokens, d.MaxOutputTokens)
	l.WallTime = cmp.Or(l.WallTime, d.WallTime)
	if l.SoftWallTime == 0 && l.WallTime > 0 {
		l.SoftWallTime = time.Duration(float64(l.WallTime) * SoftTimeoutShare)
	}
	return l
}
