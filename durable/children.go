package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
)

// ChildWorkflowName is the workflow each run of a child instance is.
const ChildWorkflowName = "deputy.child"

// mailRelay is a child's relay, left in its parent's mailbox when it ends
// with no spawn call waiting for it: the parent reads it through
// subagent_wait, or at its next turn.
const mailRelay = "relay"

// mailAsked tells a parent that a child it is not waiting for asks it a
// question; like a relay, subagent_wait takes it, or the inbox.
const mailAsked = "asked"

// A child's run is a workflow of its own. Its first run is started by its
// parent's spawn call, with the child's id as its workflow id; the child's
// id derives from the spawn call, so the parent's replay after a crash
// names the same child and finds its workflow (DBOS returns the existing
// one for a known id) instead of starting a second child. Later runs (an
// answer, a resume) are numbered like a root's.
//
// The first run takes its configuration from the spawn call that starts
// it (the parent's run, in memory: model, tools, its place in the tree's
// budget, slots and write turns), handed over through launches. Any other
// run, or a first run recovered after a crash with nobody handing it
// over, builds its configuration again from the store: the root's spec
// and the definitions its ancestors were spawned with (agent.Continue).

// launch is a child's work, handed by the spawn call of this process to
// the workflow it starts; launches are keyed by workflow id, so only the
// run the spawn call starts (run 1) takes it.
type launch struct {
	parent     context.Context
	work       func(context.Context, agent.ChildEnv) agent.ChildEnd
	foreground bool // a spawn call waits for the end

	mu  sync.Mutex
	end *agent.ChildEnd // what work returned, once it has
}

type launches struct {
	mu sync.Mutex
	m  map[string]*launch
}

func (l *launches) put(wf string, x *launch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*launch{}
	}
	l.m[wf] = x
}

// take removes and returns wf's launch, nil if none waits.
func (l *launches) take(wf string) *launch {
	l.mu.Lock()
	defer l.mu.Unlock()
	x := l.m[wf]
	delete(l.m, wf)
	return x
}

// drop removes x unless taken, reporting whether it was still there.
func (l *launches) drop(wf string, x *launch) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m[wf] == x {
		delete(l.m, wf)
		return true
	}
	return false
}

// RunChild implements agent.ChildRunner: it starts (or finds) the child's
// workflow, hands it the work, and waits for its end.
func (e *Engine) RunChild(ctx context.Context, id string, work func(context.Context, agent.ChildEnv) agent.ChildEnd) (agent.ChildEnd, error) {
	wf := workflowID(id)
	x := &launch{parent: ctx, work: work, foreground: true}
	e.launches.put(wf, x)
	defer e.launches.drop(wf, x)
	h, err := dbos.RunWorkflow(e.dbos, e.runChild, id, dbos.WithWorkflowID(wf))
	if err != nil {
		return agent.ChildEnd{}, fmt.Errorf("start child %s: %w", id, err)
	}
	// While it waits, the parent gives up its place under the engine's
	// cap: a parent holding a place while its children wait for one
	// would deadlock.
	resume := e.slots.yield(ctx)
	// No select on ctx: a cancelled parent cancels the child's work too
	// (its context follows ours), and the child's end must be waited for,
	// or the parent would record an end of its own beside the child's.
	end, err := h.GetResult(dbos.WithHandlePollingInterval(e.opts.PollInterval))
	resume()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.end != nil {
		return *x.end, nil // it ran here: what it returned, first hand
	}
	if err != nil {
		return agent.ChildEnd{}, fmt.Errorf("child %s: %w", id, err)
	}
	// It ran in an earlier execution, or was built again after a crash:
	// this call delivers its relay, so the copy in the mailbox is done.
	if err := consumeFrom(context.WithoutCancel(ctx), e.st, id, mailRelay, mailAsked); err != nil {
		return agent.ChildEnd{}, err
	}
	return end, nil
}

// StartChild implements agent.ChildRunner for a background child. When
// the child's workflow exists already (a replayed spawn), nothing takes
// the work (its first execution began already, or, on a fleet, takes it
// only if it has recorded no step yet: see carryChild): once that
// workflow ends, the work is called on a cancelled context, so what it
// holds in its parent's tree (its slot, its turn to write) is let go.
func (e *Engine) StartChild(ctx context.Context, id string, work func(context.Context, agent.ChildEnv) agent.ChildEnd) error {
	wf := workflowID(id)
	x := &launch{parent: ctx, work: work}
	e.launches.put(wf, x)
	opts := []dbos.WorkflowOption{dbos.WithWorkflowID(wf)}
	if e.lease != nil {
		// On a fleet a background child goes through the queue, to
		// whichever worker has room: here it takes its launch, elsewhere
		// it is built from the store, as after a crash.
		opts = append(opts, dbos.WithQueue(e.queue))
	}
	h, err := dbos.RunWorkflow(e.dbos, e.runChild, id, opts...)
	if err != nil {
		e.launches.drop(wf, x)
		return fmt.Errorf("start child %s: %w", id, err)
	}
	go func() {
		_, _ = h.GetResult(dbos.WithHandlePollingInterval(e.opts.PollInterval))
		if e.launches.drop(wf, x) {
			x.skip()
		}
	}()
	return nil
}

// skip lets a launch's work go without running (agent.ChildEnv.Skip).
func (x *launch) skip() { x.work(context.Background(), agent.ChildEnv{Skip: true}) }

// runChild is a child's run. Steps: load, start, then the loop's, then
// end; or, when a step of deputy's own failed, fail.
func (e *Engine) runChild(ctx dbos.Context, id string) (agent.ChildEnd, error) {
	end, waited, err := e.carryChild(ctx, id)
	if err == nil || ctx.Err() != nil || ownedElsewhere(err) {
		return end, err // ended, shut down (a later execution resumes it), or not this execution's
	}
	// A step of deputy's own failed (the store, or a replay that no
	// longer matches its steps). The run cannot go on, and its workflow
	// ending in error would leave the instance active with nothing to
	// carry it, and its parent waiting for it for ever: it ends failed,
	// its relay saying why, as a root's run does (runInstance).
	return e.failChild(ctx, id, err, waited)
}

// failChild ends child id's run failed with cause: the instance, its
// open run, and its relay to its parent unless a spawn call waits for it
// here (waited; the spawn call gets the end itself). Through a step if the
// workflow still can take one, else straight in the store (each write is
// idempotent), so an error recording the first is not the last word.
func (e *Engine) failChild(ctx dbos.Context, id string, cause error, waited bool) (agent.ChildEnd, error) {
	write := func(c context.Context) (agent.ChildEnd, error) {
		in, err := e.finishFailed(c, id, loop.StopStepError, cause)
		if err != nil {
			return agent.ChildEnd{}, err
		}
		// What it leaves waiting or running, nothing carries on now.
		if err := e.endChildren(c, id); err != nil {
			return agent.ChildEnd{}, err
		}
		end := recordedEnd(in)
		// The relay before the run's end, as in the end step; a relay
		// that step posted already (and failed after) stands.
		if !waited && in.Parent != "" {
			text, _ := end.Relay.ToolResult()
			if _, err := e.st.Post(c, store.Mail{InstanceID: in.Parent, Sender: id, Kind: mailRelay, Body: text,
				Key: "relay-" + id}); err != nil && !errors.Is(err, store.ErrConflict) {
				return agent.ChildEnd{}, err
			}
		}
		runs, err := e.st.Runs(c, id)
		if err != nil {
			return agent.ChildEnd{}, err
		}
		if n := len(runs); n > 0 && runs[n-1].EndedAt.IsZero() {
			if err := e.st.EndRun(c, runs[n-1].ID, end.Relay.State); err != nil {
				return agent.ChildEnd{}, err
			}
		}
		return end, nil
	}
	end, err := runStep(e, ctx, "child:", "fail", write)
	if err != nil && ctx.Err() == nil && !ownedElsewhere(err) {
		end, err = unstepped(e, ctx, write)
	}
	if err != nil {
		return agent.ChildEnd{}, errors.Join(cause, err)
	}
	e.changed()
	return end, nil
}

// ownedElsewhere reports an error that says this execution of a workflow
// no longer owns it (another took it over, or it was cancelled through
// DBOS): its end is the owner's to record, and DBOS waits for that.
func ownedElsewhere(err error) bool {
	return errors.Is(err, dbos.ErrConflictingWorkflowID) || errors.Is(err, dbos.ErrWorkflowCancelled)
}

// unstepped runs write outside a step, when the step that should have
// made it failed: only while the engine's gate admits it, as a step.
func unstepped[R any](e *Engine, ctx context.Context, write func(context.Context) (R, error)) (R, error) {
	if err := e.gate.admit(ctx); err != nil {
		var zero R
		return zero, err
	}
	defer e.gate.stepDone()
	return write(context.WithoutCancel(ctx))
}

// finishFailed ends instance id failed with cause unless it has ended
// already, and returns it as it then stands.
func (e *Engine) finishFailed(ctx context.Context, id string, stop loop.StopReason, cause error) (*store.Instance, error) {
	in, err := e.st.GetInstance(ctx, id)
	if err != nil || in.State.Terminal() {
		return in, err
	}
	if err := e.st.Finish(ctx, id, failedResult(in, stop, cause)); err != nil && !errors.Is(err, store.ErrTerminal) {
		return nil, err
	}
	return e.st.GetInstance(ctx, id)
}

// failedResult ends in failed with cause, keeping the totals its record
// holds (its earlier runs' and this run's live progress).
func failedResult(in *store.Instance, stop loop.StopReason, cause error) store.Result {
	return store.Result{State: store.Failed, StopReason: string(stop), Error: cause.Error(), Usage: in.Usage,
		Cost: in.Cost, Turns: in.Turns, ToolCalls: in.ToolCalls}
}

// carryChild carries a child's run to its end; waited says whether a spawn
// call of this process waits for that end.
func (e *Engine) carryChild(ctx dbos.Context, id string) (_ agent.ChildEnd, waited bool, _ error) {
	wf, err := dbos.GetWorkflowID(ctx)
	if err != nil {
		return agent.ChildEnd{}, false, err
	}
	x := e.launches.take(wf)
	if x != nil && e.lease != nil {
		// On a fleet the launch may be stale: the child's workflow ran
		// part of the way on another worker, which died, and a takeover
		// queued it again, to be dequeued here (where its spawner, or
		// the spawner's replay, left a launch). A workflow with any step
		// recorded continues from the store, as after a crash: the
		// launch's work is a first run, and its steps would not replay
		// what the other worker recorded (DBOS fails a workflow whose
		// steps come in another order).
		steps, err := e.dbos.GetWorkflowSteps(e.dbos, wf, dbos.WithStepsLoadOutput(false), dbos.WithStepsLimit(1))
		if err != nil {
			x.skip()
			return agent.ChildEnd{}, false, fmt.Errorf("child %s: its recorded steps: %w", id, err)
		}
		if len(steps) > 0 {
			x.skip()
			x = nil
		}
	}
	waited = x != nil && x.foreground
	ran := false
	defer func() {
		if x != nil && !ran {
			x.skip() // what the work holds in its parent's tree is let go
		}
	}()
	// Its first run's first messages come with the work; what came for it
	// since it was listed reaches it at its first turn boundary.
	ld, err := e.startRun(ctx, id, wf, "child:", x == nil)
	if err != nil {
		return agent.ChildEnd{}, waited, err
	}
	if ld.Instance.State.Terminal() {
		// Ended before it started (cancelled, or by its tree's end):
		// nothing to run.
		e.changed()
		return recordedEnd(ld.Instance), waited, nil
	}
	// Cancellable from here on, slot waits included: a cancel that comes
	// while it waits ends it before its first step.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer e.register(ctx, id, cancel)()
	if x != nil {
		stop := context.AfterFunc(x.parent, func() { cancel(context.Cause(x.parent)) })
		defer stop()
	}
	// Its parent's cap first, then a place under the engine's: a run
	// waiting for its parent's cap holds no place others need. A wait
	// cut by a cancel goes on without a place: the run ends at once.
	if leave, err := e.takeParentSlot(runCtx, ld); err == nil {
		defer leave()
	} else if ctx.Err() != nil || runCtx.Err() == nil {
		return agent.ChildEnd{}, waited, err
	}
	if slotCtx, release, err := e.takeSlot(runCtx, id); err == nil {
		defer release()
		runCtx = slotCtx
	} else if ctx.Err() != nil || runCtx.Err() == nil {
		return agent.ChildEnd{}, waited, err
	}
	// The run's own steps are named like a root's; their failpoints carry
	// "child:" so a test can tell them apart.
	env := agent.ChildEnv{Steps: &steps{wf: ctx, e: e, nonce: agent.NewID(), label: "child:"},
		Inbox: e.inbox(ctx, id, "child:"), Hold: e.hold(ctx, id, "child:"),
		Closing: func() bool { return ctx.Err() != nil || e.closed.Load() }}
	var end agent.ChildEnd
	if x != nil {
		ran = true
		end = x.work(runCtx, env)
	} else {
		if end, err = e.continueChild(ctx, runCtx, ld, env); err != nil {
			return end, waited, err // failChild ends it
		}
	}
	if err := ctx.Err(); err != nil {
		// Shut down: nothing ended; the next execution resumes it.
		return end, waited, err
	}
	end, err = e.childEnded(ctx, ld, end, waited)
	if x != nil && err == nil {
		x.mu.Lock()
		x.end = &end
		x.mu.Unlock()
	}
	return end, waited, err
}

// startRun is a run's first steps: load (its record, and its transcript,
// with what came meanwhile when deliver: see load) and start (it is
// running, in this workflow, as run N).
func (e *Engine) startRun(ctx dbos.Context, id, wf, label string, deliver bool) (loaded, error) {
	ld, err := runStep(e, ctx, label, "load", func(c context.Context) (loaded, error) { return e.load(c, id, deliver) })
	if err != nil || ld.Instance.State.Terminal() {
		return ld, err
	}
	ld.Run, err = runStep(e, ctx, label, "start", func(c context.Context) (store.Run, error) {
		err := e.st.Transition(c, id, store.Running, "run started")
		var te *store.TransitionError
		if errors.As(err, &te) && te.From == store.Running {
			err = nil // the run is resuming after a crash
		}
		if err == nil {
			err = e.st.SetWorkflow(c, id, wf)
		}
		if err != nil {
			return store.Run{}, err
		}
		return e.st.StartRun(c, id, wf)
	})
	return ld, err
}

// continueChild runs a child whose configuration is built again from the
// store: the root's spec, the lineage of definitions down to the child.
func (e *Engine) continueChild(ctx dbos.Context, runCtx context.Context, ld loaded, env agent.ChildEnv) (agent.ChildEnd, error) {
	in := ld.Instance
	var lineage []agent.Lineage
	for at := in; at.Parent != ""; {
		def := &agentdef.Definition{}
		if err := json.Unmarshal(at.Definition, def); err != nil {
			return agent.ChildEnd{}, fmt.Errorf("instance %s: its recorded definition does not decode: %w", at.ID, err)
		}
		lineage = append([]agent.Lineage{{ID: at.ID, Definition: def, Mode: agentdef.Mode(at.Mode), Task: at.Task}}, lineage...)
		parent, err := e.st.GetInstance(ctx, at.Parent)
		if err != nil {
			return agent.ChildEnd{}, err
		}
		at = parent
		if at.Parent == "" {
			root := at
			rec := newRecorder(e, root.ID, ld.Instance, len(ld.Messages))
			runner, task, _, err := e.setup(ctx, root, rec, "", ld.Spent)
			if err != nil {
				return agent.ChildEnd{}, err
			}
			env.Spent = ld.Active
			end, err := runner.Continue(runCtx, task, lineage, ld.Messages, env)
			if err == nil {
				err = rec.failed()
			}
			return end, err
		}
	}
	return agent.ChildEnd{}, fmt.Errorf("instance %s is a root, not a child", in.ID)
}

// childEnded records how a child's run ended: a suspended one waits
// (asking or paused, its pending results kept); an ended one's relay goes
// to its parent's mailbox unless a spawn call waits for it.
func (e *Engine) childEnded(ctx dbos.Context, ld loaded, end agent.ChildEnd, waited bool) (agent.ChildEnd, error) {
	id := ld.Instance.ID
	var cancelled *store.Result // set when a cancel met the run stopping to wait
	if end.Instance.State == agent.StateSuspended {
		totals := ld.Instance.Usage
		totals.Add(end.Instance.Usage)
		s := stop{run: ld.Run.ID, pending: end.Pending, turns: ld.Instance.Turns + end.Instance.Turns,
			calls: ld.Instance.ToolCalls + end.Instance.ToolCalls, usage: totals,
			cost: addCost(ld.Instance.Cost, end.Instance.Cost)}
		if !waited {
			s.notify = ld.Instance.Parent
		}
		state, err := e.suspend(ctx, id, s)
		if err != nil {
			return end, err
		}
		end.Relay.State = state
		if state != string(store.Cancelled) {
			if q, err := openQuestion(ctx, e.st, id); err == nil && q != nil {
				end.Relay.Question = q.Body
			}
			e.changed()
			return end, nil
		}
		// A cancel came as it stopped to wait: it ends here, with what it
		// did (recorded by the end step).
		end.Instance.State, end.Instance.StopReason, end.Instance.Incomplete = agent.StateCancelled, string(loop.StopCancelled), true
		end.Relay.Incomplete, end.Relay.StopReason = true, string(loop.StopCancelled)
		cancelled = &store.Result{State: store.Cancelled, StopReason: string(loop.StopCancelled), Incomplete: true,
			Error: errCancelled.Error(), Usage: s.usage, Cost: s.cost, Turns: s.turns, ToolCalls: s.calls}
	}
	if err := e.endChildren(ctx, id); err != nil {
		return end, err
	}
	// The end step records the end itself, whoever recorded it first: the
	// recorder writes it as the run ends, but a write of the recorder that
	// failed only fails the tree's root, at the root's end (a launched
	// child records through its spawner's recorder), and an instance left
	// running after its run ended would keep its parent holding for ever.
	result := cancelled
	if result == nil && store.State(end.Instance.State).Terminal() {
		r := endResult(ld.Instance, &end.Instance, end.Relay.Report)
		result = &r
	}
	_, err := runStep(e, ctx, "child:", "end", func(c context.Context) (bool, error) {
		if result != nil {
			if err := e.st.Finish(c, id, *result); err != nil && !errors.Is(err, store.ErrTerminal) {
				return false, err
			}
		}
		// The relay before the run's end: a parent holding for its
		// children takes an ended run as a relay already posted.
		if !waited {
			text, _ := end.Relay.ToolResult()
			if _, err := e.st.Post(c, store.Mail{InstanceID: ld.Instance.Parent, Sender: id, Kind: mailRelay, Body: text,
				Key: "relay-" + id}); err != nil {
				return false, err
			}
		}
		if err := e.st.EndRun(c, ld.Run.ID, end.Relay.State); err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
		return true, nil
	})
	if err == nil {
		e.changed()
	}
	return end, err
}

// endChildren cancels the children an ended instance leaves waiting
// (asking or paused: nobody will answer or resume them now) or running.
func (e *Engine) endChildren(ctx context.Context, id string) error {
	kids, err := e.st.ListInstances(ctx, store.Filter{Parent: id, Active: true})
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := e.control().Cancel(ctx, k.ID); err != nil && !errors.Is(err, store.ErrIllegalTransition) {
			return err
		}
	}
	return nil
}

// consumeFrom marks the mail of the given kinds that child id left in its
// parent's mailbox delivered (its relay, notice of its question).
func consumeFrom(ctx context.Context, st *store.Store, id string, kinds ...string) error {
	in, err := st.GetInstance(ctx, id)
	if err != nil || in.Parent == "" {
		return err
	}
	mail, err := st.Pending(ctx, in.Parent)
	if err != nil {
		return err
	}
	for _, m := range mail {
		if m.Sender == id && slices.Contains(kinds, m.Kind) {
			if err := st.Consume(ctx, m.ID); err != nil && !errors.Is(err, store.ErrAlreadyConsumed) {
				return err
			}
		}
	}
	return nil
}

func addCost(a, b *float64) *float64 {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	c := *a + *b
	return &c
}

// recordedEnd rebuilds a child's end from its stored record.
func recordedEnd(in *store.Instance) agent.ChildEnd {
	var arts []string
	_ = json.Unmarshal(in.Artifacts, &arts)
	inst := agent.Instance{ID: in.ID, Parent: in.Parent, Depth: in.Depth, Type: in.Type, Mode: agentdef.Mode(in.Mode),
		Model: in.Model, State: string(in.State), StopReason: in.StopReason, Incomplete: in.Incomplete,
		Turns: in.Turns, ToolCalls: in.ToolCalls, Usage: in.Usage, Cost: in.Cost, Artifacts: arts, Error: in.Error}
	return agent.ChildEnd{Instance: inst, Relay: agent.Relay{ID: in.ID, Type: in.Type, State: string(in.State),
		Report: in.Report, Incomplete: in.Incomplete, StopReason: in.StopReason, Artifacts: arts, Usage: in.Usage,
		ToolCalls: in.ToolCalls, Turns: in.Turns, Error: in.Error, Cost: in.Cost}}
}

// relayNote is how a child's relay reaches its parent at a turn boundary.
func relayNote(m store.Mail) string {
	return "[deputy] A subagent you started in the background has ended; its report:\n\n" + m.Body
}
