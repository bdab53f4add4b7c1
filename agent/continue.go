package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/llm"
)

// Lineage is one generation on the way from a root to a descendant, as it
// was recorded when spawned: enough to build its node again.
type Lineage struct {
	ID         string
	Definition *agentdef.Definition
	Mode       agentdef.Mode
	Task       string
}

// Continue runs a later run of a descendant of the root t describes: a
// child that asked and was answered, was paused and resumed, or whose run
// a crash cut while nobody waited for it. The nodes along lineage (the
// root's child first, the instance to run last) are built again from
// their recorded definitions, as spawn built them; only the last runs,
// from msgs (its stored transcript and what came for it since), in env.
// The end is its relay, or asking or paused if it stopped to wait again.
func (r *Runner) Continue(ctx context.Context, t Task, lineage []Lineage, msgs []llm.Message, env ChildEnv) (ChildEnd, error) {
	if len(lineage) == 0 {
		return ChildEnd{}, errors.New("agent: Continue needs the lineage of the instance to run")
	}
	if len(msgs) == 0 || msgs[0].Role != llm.User {
		return ChildEnd{}, errors.New("agent: Continue needs the instance's transcript")
	}
	tr, n, err := r.rootNode(t)
	if err != nil {
		return ChildEnd{}, err
	}
	for _, l := range lineage {
		if l.Definition == nil {
			return ChildEnd{}, fmt.Errorf("agent: instance %s has no recorded definition", l.ID)
		}
		c, err := tr.build(n, l.Definition, l.Mode, l.Task)
		if err != nil {
			return ChildEnd{}, fmt.Errorf("instance %s: %w", l.ID, err)
		}
		c.inst.ID = l.ID
		n = tr.add(n, c)
	}
	return tr.work(ctx, n, msgs, env), nil
}
