package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
)

// ChildWorkflowName is the workflow each child instance runs as.
const ChildWorkflowName = "deputy.child"

// A child runs as a workflow of its own, started with the child's id as
// its workflow id by its parent's spawn call. Its steps (its model and
// tool calls) are checkpointed like a root's, so after a crash the child
// resumes from its last step, and the parent's replayed spawn call, which
// derives the same child id from the call, finds the running or finished
// workflow instead of starting a second child.
//
// The child's configuration (model, tools, prompt, budgets, its place in
// the tree's shared budget and write turns) lives in its parent's run, in
// memory. So the workflow does not rebuild it: it waits for its parent's
// spawn call (first run, or replay) to hand it the work. With one engine
// per database, parent and child are always recovered by the same
// process. A child whose parent will never come back for it (the parent
// ended and swept it up as orphaned) is recognised from the store and
// returns its recorded end.

// launch is a child's work, handed by its parent's spawn call to the
// child's workflow (whichever reaches the rendezvous first creates it).
type launch struct {
	ready  chan struct{} // closed once parent and work are set
	parent context.Context
	work   func(context.Context, loop.Steps) agent.ChildEnd

	mu  sync.Mutex
	end *agent.ChildEnd // what work returned, once it has
}

type launches struct {
	mu sync.Mutex
	m  map[string]*launch
}

// get returns id's rendezvous, creating it.
func (l *launches) get(id string) *launch {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*launch{}
	}
	x, ok := l.m[id]
	if !ok {
		x = &launch{ready: make(chan struct{})}
		l.m[id] = x
	}
	return x
}

func (l *launches) drop(id string, x *launch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m[id] == x {
		delete(l.m, id)
	}
}

// RunChild implements agent.ChildRunner: it starts (or finds) the child's
// workflow, hands it the work, and waits for its end.
func (e *Engine) RunChild(ctx context.Context, id string, work func(context.Context, loop.Steps) agent.ChildEnd) (agent.ChildEnd, error) {
	x := e.launches.get(id)
	defer e.launches.drop(id, x)
	x.parent, x.work = ctx, work
	close(x.ready)

	h, err := dbos.RunWorkflow(e.dbos, e.runChild, id, dbos.WithWorkflowID(workflowID(id)))
	if err != nil {
		return agent.ChildEnd{}, fmt.Errorf("start child %s: %w", id, err)
	}
	// No select on ctx: a cancelled parent cancels the child's work too
	// (its context follows ours), and the child's end must be waited for,
	// or the parent would record an end of its own beside the child's.
	end, err := h.GetResult(dbos.WithHandlePollingInterval(e.opts.PollInterval))
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.end != nil {
		return *x.end, nil // it ran here: what it returned, first hand
	}
	if err != nil {
		return agent.ChildEnd{}, fmt.Errorf("child %s: %w", id, err)
	}
	return end, nil
}

// runChild is the child's workflow: it waits for the work its parent's
// spawn call hands over, then does it with checkpointed steps.
func (e *Engine) runChild(ctx dbos.Context, id string) (agent.ChildEnd, error) {
	x := e.launches.get(id)
	select {
	case <-x.ready:
	default:
		// Not handed over (yet): a recovered child waiting for its
		// parent's replay, unless the parent already ended it.
		if in, err := e.st.GetInstance(ctx, id); err == nil && in.State.Terminal() {
			e.launches.drop(id, x)
			return recordedEnd(in), nil
		}
		select {
		case <-x.ready:
		case <-ctx.Done():
			return agent.ChildEnd{}, context.Cause(ctx)
		}
	}
	// The child stops with its parent's spawn call (the parent was
	// cancelled or timed out) as well as with its own workflow.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(x.parent, func() { cancel(context.Cause(x.parent)) })
	defer stop()
	end := x.work(runCtx, &steps{wf: ctx, e: e, nonce: agent.NewID(), label: "child:"})
	x.mu.Lock()
	x.end = &end
	x.mu.Unlock()
	if err := ctx.Err(); err != nil {
		// Shut down: nothing ended; the next execution resumes it.
		return end, err
	}
	return end, nil
}

// recordedEnd rebuilds a child's end from its stored record.
func recordedEnd(in *store.Instance) agent.ChildEnd {
	var arts []string
	_ = json.Unmarshal(in.Artifacts, &arts)
	inst := agent.Instance{ID: in.ID, Parent: in.Parent, Depth: in.Depth, Type: in.Type, Mode: agent.Mode(in.Mode),
		Model: in.Model, State: string(in.State), StopReason: in.StopReason, Incomplete: in.Incomplete,
		Turns: in.Turns, ToolCalls: in.ToolCalls, Usage: in.Usage, Cost: in.Cost, Artifacts: arts, Error: in.Error}
	return agent.ChildEnd{Instance: inst, Relay: agent.Relay{ID: in.ID, Type: in.Type, State: string(in.State),
		Report: in.Report, Incomplete: in.Incomplete, StopReason: in.StopReason, Artifacts: arts, Usage: in.Usage,
		ToolCalls: in.ToolCalls, Turns: in.Turns, Error: in.Error, Cost: in.Cost}}
}
