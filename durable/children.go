package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
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

// launch is a child's work, with its configuration from the parent's run
// (in memory: model, tools, its place in the tree's budget, slots and write
// turns), handed by the spawn call of this process to the workflow it
// starts; launches are keyed by workflow id, so only the run the spawn call
// starts (run 1) takes it. Any other run builds itself again from the store
// (continueChild).
type launch struct {
	parent     context.Context
	work       func(context.Context, agent.ChildEnv) agent.ChildEnd
	foreground bool                           // a spawn call waits for the end
	end        atomic.Pointer[agent.ChildEnd] // what work returned, once recorded
}

type launches struct{ m sync.Map } // workflow id → *launch

func (l *launches) put(wf string, x *launch) { l.m.Store(wf, x) }

// take removes and returns wf's launch, nil if none waits.
func (l *launches) take(wf string) *launch {
	x, _ := l.m.LoadAndDelete(wf)
	taken, _ := x.(*launch)
	return taken
}

// drop removes x unless taken, reporting whether it was still there.
func (l *launches) drop(wf string, x *launch) bool { return l.m.CompareAndDelete(wf, x) }

// RunChild implements agent.ChildRunner: it starts (or finds) the child's
// workflow, hands it the work, and waits for its end.
func (e *Engine) RunChild(ctx context.Context, id string, work func(context.Context, agent.ChildEnv) agent.ChildEnd) (agent.ChildEnd, error) {
	x := &launch{parent: ctx, work: work, foreground: true}
	h, err := e.launchChild(id, x)
	if err != nil {
		return agent.ChildEnd{}, err
	}
	defer e.launches.drop(workflowID(id), x)
	resume := e.slots.yield(ctx) // the parent's place goes while it waits (slots)
	// No select on ctx: a cancelled parent cancels the child's work too
	// (its context follows ours), and the child's end must be waited for,
	// or the parent would record an end of its own beside the child's.
	end, err := h.GetResult(dbos.WithHandlePollingInterval(e.opts.PollInterval))
	resume()
	if end := x.end.Load(); end != nil {
		return *end, nil // it ran here: what it returned, first hand
	}
	if err != nil {
		return agent.ChildEnd{}, fmt.Errorf("child %s: %w", id, err)
	}
	// It ran in an earlier execution, or was built again after a crash:
	// this call delivers its relay, so the copy in the mailbox is done.
	if err := consumeFrom(context.WithoutCancel(ctx), e.st, id); err != nil {
		return agent.ChildEnd{}, err
	}
	return end, nil
}

// StartChild implements agent.ChildRunner for a background child. When
// the child's workflow exists already (a replayed spawn), nothing takes
// the work (its first execution began already, or, on a fleet, takes it
// only if it has recorded no step yet: see takeLaunch): once that
// workflow ends, the work is called on a cancelled context, so what it
// holds in its parent's tree (its slot, its turn to write) is let go.
func (e *Engine) StartChild(ctx context.Context, id string, work func(context.Context, agent.ChildEnv) agent.ChildEnd) error {
	x := &launch{parent: ctx, work: work}
	var opts []dbos.WorkflowOption
	if e.lease != nil {
		// On a fleet a background child goes through the queue, to
		// whichever worker has room: here it takes its launch, elsewhere
		// it is built from the store, as after a crash.
		opts = append(opts, dbos.WithQueue(e.queue))
	}
	h, err := e.launchChild(id, x, opts...)
	if err != nil {
		return err
	}
	go func() {
		_, err := h.GetResult(dbos.WithHandlePollingInterval(e.opts.PollInterval))
		if e.launches.drop(workflowID(id), x) {
			x.skip()
		}
		e.backgroundEnded(id, err)
	}()
	return nil
}

// launchChild starts (or finds) child id's workflow, x waiting for it
// among the launches.
func (e *Engine) launchChild(id string, x *launch, opts ...dbos.WorkflowOption) (dbos.WorkflowHandle[agent.ChildEnd], error) {
	wf := workflowID(id)
	e.launches.put(wf, x)
	h, err := dbos.RunWorkflow(e.dbos, e.runChild, id, append(opts, dbos.WithWorkflowID(wf))...)
	if err != nil {
		e.launches.drop(wf, x)
		return nil, fmt.Errorf("start child %s: %w", id, err)
	}
	return h, nil
}

// backgroundEnded hears how a background child's workflow ended. Its end
// reaches its parent as a relay, but for an error: recording it failed too
// (failRun), so the child is left active and its parent may hold for it.
// The operator hears of that through the engine's log; a shutdown, or a
// run another execution owns now, is no such end.
func (e *Engine) backgroundEnded(id string, err error) {
	if err != nil && !ownedElsewhere(err) && !e.closed.Load() {
		e.log("a background child's run failed and its end could not be recorded; it is left active",
			"child", id, "err", err)
	}
}

// skip lets a launch's work go without running (agent.ChildEnv.Skip); with
// no launch there is nothing to let go.
func (x *launch) skip() {
	if x != nil {
		x.work(context.Background(), agent.ChildEnv{Skip: true})
	}
}

// runChild is a child's run. Steps: load, start, then the loop's, then
// end; or, when a step of deputy's own failed, fail (failRun).
func (e *Engine) runChild(ctx dbos.Context, id string) (agent.ChildEnd, error) {
	end, waited, err := e.carryChild(ctx, id)
	if err == nil || ctx.Err() != nil || ownedElsewhere(err) {
		return end, err // ended, shut down (a later execution resumes it), or not this execution's
	}
	return e.failRun(ctx, id, "child:", err, waited)
}

// failRun ends a run that a step of deputy's own failed (the store, or a
// replay that no longer matches its steps): it cannot go on, and its
// workflow ending in error would leave the instance active with nothing to
// carry it, and a parent or a Settle waiting for it for ever. The instance
// ends failed with cause, with the children it leaves and its open run; a
// child's relay goes to its parent unless a spawn call waits for it here
// (waited: the spawn call gets the end itself). Through a step if the
// workflow still can take one, else straight in the store (each write is
// idempotent), so an error recording the first is not the last word.
func (e *Engine) failRun(ctx dbos.Context, id, label string, cause error, waited bool) (agent.ChildEnd, error) {
	write := func(c context.Context) (agent.ChildEnd, error) {
		in, err := e.finishFailed(c, id, loop.StopStepError, cause, waited)
		if err != nil {
			return agent.ChildEnd{}, err
		}
		if err := e.endChildren(c, id); err != nil {
			return agent.ChildEnd{}, err
		}
		end := recordedEnd(in)
		run, err := openRun(c, e.st, id)
		if err != nil {
			return agent.ChildEnd{}, err
		}
		return end, relayAndEndRun(c, e.st, id, in.Parent, end.Relay, waited, run)
	}
	end, err := runStep(e, ctx, label, "fail", write)
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
func unstepped[R any](e *Engine, ctx context.Context, write func(context.Context) (R, error)) (r R, err error) {
	if err := e.gate.admit(ctx); err != nil {
		return r, err
	}
	defer e.gate.stepDone()
	return write(context.WithoutCancel(ctx))
}

// finishFailed ends instance id failed with cause unless it has ended
// already, and returns it as it then stands. Its run may never have
// started: the end is written with its relay (endRelayed) unless a spawn
// call waits for it (waited).
func (e *Engine) finishFailed(ctx context.Context, id string, stop loop.StopReason, cause error, waited bool) (*instance.Record, error) {
	in, err := e.st.GetInstance(ctx, id)
	if err != nil || in.State.Terminal() {
		return in, err
	}
	if err := e.control().endRelayed(ctx, in, failedResult(in, stop, cause), waited); err != nil &&
		!errors.Is(err, instance.ErrTerminal) {
		return nil, err
	}
	return e.st.GetInstance(ctx, id)
}

// failedResult ends in failed with cause, keeping the totals its record
// holds (its earlier runs' and this run's live progress).
func failedResult(in *instance.Record, stop loop.StopReason, cause error) store.Result {
	return store.Result{State: instance.Failed, StopReason: string(stop), Error: cause.Error(), Usage: in.Usage,
		Cost: in.Cost, Turns: in.Turns, ToolCalls: in.ToolCalls}
}

// carryChild carries a child's run to its end; waited says whether a spawn
// call of this process waits for that end.
func (e *Engine) carryChild(ctx dbos.Context, id string) (_ agent.ChildEnd, waited bool, _ error) {
	wf, err := dbos.GetWorkflowID(ctx)
	if err != nil {
		return agent.ChildEnd{}, false, err
	}
	x, err := e.takeLaunch(id, wf)
	if err != nil {
		return agent.ChildEnd{}, false, err
	}
	waited = x != nil && x.foreground
	// Its first run's first messages come with the work; what came for it
	// since it was listed reaches it at its first turn boundary.
	ld, err := e.startRun(ctx, id, wf, "child:", x == nil)
	if err != nil || ld.Instance.State.Terminal() {
		x.skip()
		if err != nil {
			return agent.ChildEnd{}, waited, err
		}
		// Ended before it started (cancelled, or by its tree's end):
		// nothing to run.
		e.changed()
		return recordedEnd(ld.Instance), waited, nil
	}
	end, err := e.childTurns(ctx, ld, x)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		// failRun ends it; or it was shut down: nothing ended, and the
		// next execution resumes it.
		return end, waited, err
	}
	end, err = e.childEnded(ctx, ld, end, waited)
	if x != nil && err == nil {
		x.end.Store(&end)
	}
	return end, waited, err
}

// takeLaunch takes the work a spawn call of this process hands to child
// id's workflow wf, nil when none does.
func (e *Engine) takeLaunch(id, wf string) (*launch, error) {
	x := e.launches.take(wf)
	if x == nil || e.lease == nil {
		return x, nil
	}
	// On a fleet the launch may be stale: the child's workflow ran part of
	// the way on another worker, which died, and a takeover queued it
	// again, to be dequeued here (where its spawner, or the spawner's
	// replay, left a launch). A workflow with any step recorded continues
	// from the store, as after a crash: the launch's work is a first run,
	// and its steps would not replay what the other worker recorded (DBOS
	// fails a workflow whose steps come in another order).
	steps, err := e.dbos.GetWorkflowSteps(e.dbos, wf, dbos.WithStepsLoadOutput(false), dbos.WithStepsLimit(1))
	if err == nil && len(steps) == 0 {
		return x, nil
	}
	x.skip()
	if err != nil {
		return nil, fmt.Errorf("child %s: its recorded steps: %w", id, err)
	}
	return nil, nil
}

// childTurns runs a started child: the work its spawn call handed over
// (x), or, without one, the child built again from the store. The run is
// cancellable from here on, slot waits included: a cancel that comes while
// it waits ends it before its first step.
func (e *Engine) childTurns(ctx dbos.Context, ld loaded, x *launch) (agent.ChildEnd, error) {
	id := ld.Instance.ID
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
	cancelled := func() bool { return ctx.Err() == nil && runCtx.Err() != nil }
	if leave, err := e.takeParentSlot(runCtx, ld); err == nil {
		defer leave()
	} else if !cancelled() {
		x.skip()
		return agent.ChildEnd{}, err
	}
	if slotCtx, release, err := e.takeSlot(runCtx, id); err == nil {
		defer release()
		runCtx = slotCtx
	} else if !cancelled() {
		x.skip()
		return agent.ChildEnd{}, err
	}
	// The run's own steps are named like a root's; their failpoints carry
	// "child:" so a test can tell them apart.
	env := agent.ChildEnv{Steps: &steps{wf: ctx, e: e, nonce: agent.NewID(), label: "child:", id: id},
		Inbox: e.inbox(ctx, id, "child:"), Hold: e.hold(ctx, id, "child:"),
		Closing: func() bool { return ctx.Err() != nil || e.closed.Load() }}
	if x != nil {
		return x.work(runCtx, env), nil
	}
	return e.continueChild(ctx, runCtx, ld, env)
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
		err := moveTo(c, e.st, id, instance.Running, "run started")
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
	at := ld.Instance
	if at.Parent == "" {
		return agent.ChildEnd{}, fmt.Errorf("instance %s is a root, not a child", at.ID)
	}
	var lineage []agent.Lineage
	for at.Parent != "" {
		def := &agentdef.Definition{}
		if err := json.Unmarshal(at.Definition, def); err != nil {
			return agent.ChildEnd{}, fmt.Errorf("instance %s: its recorded definition does not decode: %w", at.ID, err)
		}
		lineage = append([]agent.Lineage{{ID: at.ID, Definition: def, Mode: agentdef.Mode(at.Mode), Task: at.Task}}, lineage...)
		var err error
		if at, err = e.st.GetInstance(ctx, at.Parent); err != nil {
			return agent.ChildEnd{}, err
		}
	}
	rec := newRecorder(e, at.ID, ld.Instance, len(ld.Messages))
	defer rec.forget(ld.Instance.ID)
	runner, task, _, err := e.setup(ctx, at, rec, "", ld.Spent)
	if err != nil {
		return agent.ChildEnd{}, err
	}
	env.Spent, env.Resume = ld.Active, ld.Resume
	rec.resuming(ld.Instance.ID, ld.ResumeMail)
	end, err := runner.Continue(runCtx, task, lineage, ld.Messages, env)
	if err == nil {
		err = rec.failed()
	}
	return end, err
}

// childEnded records how a child's run ended: a suspended one waits
// (asking or paused, its pending results kept); an ended one's relay goes
// to its parent's mailbox unless a spawn call waits for it.
func (e *Engine) childEnded(ctx dbos.Context, ld loaded, end agent.ChildEnd, waited bool) (agent.ChildEnd, error) {
	id := ld.Instance.ID
	r := endResult(ld.Instance, &end.Instance, end.Relay.Report) // its totals over its runs
	finished := end.Instance.State.Terminal()
	if end.Instance.State.Waiting() {
		s := stop{run: ld.Run.ID, pending: end.Pending, totals: r}
		if !waited {
			s.notify = ld.Instance.Parent
		}
		state, err := e.suspend(ctx, id, s)
		if err != nil {
			return end, err
		}
		// The store settles where it waits (or that a cancel ended it),
		// whatever the run's own account said.
		end.Relay.State, end.Instance.State = state, state
		if state != instance.Cancelled {
			q, err := question(ctx, e.st, id)
			if err != nil {
				// It asks all the same (its state is recorded): its
				// parent can read the question again (subagent_status).
				q = fmt.Sprintf("[deputy] its question could not be read (%v); subagent_status shows it", err)
			}
			end.Relay.Question = q
			e.changed()
			return end, nil
		}
		// A cancel came as it stopped to wait: it ends here, with what it
		// did (recorded by the end step).
		end.Instance.StopReason, end.Instance.Incomplete = string(loop.StopCancelled), true
		end.Relay.Incomplete, end.Relay.StopReason = true, string(loop.StopCancelled)
		r.State, r.StopReason, r.Incomplete, r.Error = instance.Cancelled, string(loop.StopCancelled), true, errCancelled.Error()
		finished = true
	}
	if err := e.endChildren(ctx, id); err != nil {
		return end, err
	}
	// The end step records the end itself, whoever recorded it first: the
	// recorder writes it as the run ends, but a write of the recorder that
	// failed only fails the tree's root, at the root's end (a launched
	// child records through its spawner's recorder), and an instance left
	// running after its run ended would keep its parent holding for ever.
	_, err := runStep(e, ctx, "child:", "end", func(c context.Context) (bool, error) {
		if finished {
			if err := e.st.Finish(c, id, r); err != nil && !errors.Is(err, instance.ErrTerminal) {
				return false, err
			}
		}
		return true, relayAndEndRun(c, e.st, id, ld.Instance.Parent, end.Relay, waited, ld.Run.ID)
	})
	if err == nil {
		e.changed()
	}
	return end, err
}

// relayAndEndRun leaves child's relay in parent's mailbox, unless a spawn
// call waits for it here (waited), then ends its run (0: none is open).
// The relay first: a parent holding for its children takes an ended run as
// a relay posted. A relay posted already stands (ErrConflict: its text
// differs): an end recorded again, after a step that posted it failed, or
// by another path (a cancel, a failure), tells the parent nothing new.
func relayAndEndRun(ctx context.Context, st *store.Store, child, parent string, rl agent.Relay, waited bool, run int64) error {
	if !waited && parent != "" {
		_, err := st.Post(ctx, relayMail(child, parent, rl))
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	if run == 0 {
		return nil
	}
	if err := st.EndRun(ctx, run, string(rl.State)); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// relayMail is child's relay rl as mail for parent's mailbox; its key
// makes it one mail per child, however often an end is recorded.
func relayMail(child, parent string, rl agent.Relay) store.Mail {
	text, _ := rl.ToolResult()
	return store.Mail{InstanceID: parent, Sender: child, Kind: mailRelay, Body: text, Key: "relay-" + child}
}

// endChildren cancels the children an ended instance leaves waiting
// (asking or paused: nobody will answer or resume them now) or running.
func (e *Engine) endChildren(ctx context.Context, id string) error {
	kids, err := e.st.ListInstances(ctx, store.Filter{Parent: id, Active: true})
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := e.control().Cancel(ctx, k.ID); err != nil && !errors.Is(err, instance.ErrIllegalTransition) {
			return err
		}
	}
	return nil
}

// consumeFrom marks the mail child id left in its parent's mailbox (its
// relay, notice of its question) delivered.
func consumeFrom(ctx context.Context, st *store.Store, id string) error {
	in, err := st.GetInstance(ctx, id)
	if err != nil || in.Parent == "" {
		return err
	}
	mail, err := st.Pending(ctx, in.Parent)
	if err != nil {
		return err
	}
	var ids []int64
	for _, m := range mail {
		if m.Sender == id {
			ids = append(ids, m.ID)
		}
	}
	return consume(ctx, st, ids)
}

// consume marks mail delivered, whatever becomes of ctx: whoever took it
// (a checkpointed step, a wait that reports it) holds it from then on.
func consume(ctx context.Context, st *store.Store, ids []int64) error {
	for _, m := range ids {
		if err := st.Consume(context.WithoutCancel(ctx), m); err != nil && !errors.Is(err, store.ErrAlreadyConsumed) {
			return err
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

// recordedEnd is a child's end as its stored record tells it: the record
// (as shown: its definition snapshot is no part of an end) and the relay
// made from it, which says so when the record is damaged (agent.RelayOf),
// since the end must still reach the parent, which may hold for it.
func recordedEnd(in *instance.Record) agent.ChildEnd {
	return agent.ChildEnd{Instance: in.View(), Relay: agent.RelayOf(in)}
}
