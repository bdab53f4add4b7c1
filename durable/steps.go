package durable

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
)

// Interrupted is the result a side-effecting tool call gets when a crash
// stopped it after it had started: it is never run a second time, since
// running it again could do twice what it did once.
const Interrupted = "interrupted: this call had started when deputy's process stopped, and it was not run " +
	"again because it may have had effects. Check its effects before retrying it."

// steps makes every model call and every tool call of an instance's run (a
// root's or a child's, each in its own workflow) a named DBOS step, so a
// run resumed after a crash replays what was checkpointed and continues
// after it. Names are stable across executions (DBOS matches
// steps on replay by order and name):
//
//	turn-N/generate, turn-N/compact, turn-N/report   model calls
//	turn-N/call-I-NAME/start                         a side-effecting call's start marker
//	turn-N/call-I-NAME                               a tool call
type steps struct {
	wf    dbos.Context
	e     *Engine
	nonce string // this execution's
	label string // before step names in failpoints: "" for a root, "child:" for a child
}

func (s *steps) Model(ctx context.Context, turn int, purpose loop.StepPurpose, gen func(context.Context) (*llm.Response, error)) (*llm.Response, error) {
	return runStep(s.e, dbos.From(s.wf, ctx), s.label, fmt.Sprintf("turn-%d/%s", turn, purpose), gen)
}

// Tools runs a turn's calls. Resumable calls (read-only ones, and spawns,
// which reattach to the child they named) are plain steps: a crash before
// their result was checkpointed runs them again, harmlessly. A
// side-effecting call first checkpoints a start marker holding this
// execution's nonce, then runs; on replay, a marker from another execution
// without a checkpointed result means the call was cut mid-way, and it is
// answered Interrupted instead of being run again. A call whose result was
// checkpointed is never run again either way: its result is replayed.
func (s *steps) Tools(ctx context.Context, turn int, b *loop.Batch) error {
	dctx := dbos.From(s.wf, ctx)
	names := make([]string, len(b.Calls))
	for i := range b.Calls {
		names[i] = fmt.Sprintf("turn-%d/call-%d-%s", turn, i+1, b.Calls[i].Name)
	}
	cut := make([]bool, len(b.Calls)) // started by an execution that died
	mark := func(i int) error {
		if b.Resumable(i) {
			return nil
		}
		m, err := runStep(s.e, dctx, s.label, names[i]+"/start", func(context.Context) (string, error) { return s.nonce, nil })
		cut[i] = m != s.nonce
		return err
	}
	call := func(i int) func(context.Context) (llm.Block, error) {
		return func(sctx context.Context) (llm.Block, error) {
			if cut[i] {
				return llm.ToolResult(b.Calls[i].ID, Interrupted, true), nil
			}
			if sctx.Value(inStepKey{}) != nil && b.Resumable(i) && !b.ReadOnly(i) {
				// A call that coordinates (a spawn, a fan-out, a wait
				// for children, a question) waits on other runs, whose
				// steps a drain waits for on their own, and may run
				// again: a drain does not wait for it, since what it
				// waits for may not come while nothing starts.
				defer s.e.gate.park()()
			}
			// The loop's context, not the step's: it carries the calling
			// instance and the call, which the spawn tool needs.
			return b.Run(ctx, i), nil
		}
	}
	if !b.Parallel {
		// Each marker just before its own call: a crash between two calls
		// must not report the second one, which never started, as cut.
		for i := range b.Calls {
			if err := mark(i); err != nil {
				return err
			}
			r, err := runStep(s.e, dctx, s.label, names[i], call(i))
			if err != nil {
				return err
			}
			b.Results[i] = r
		}
		return nil
	}
	// Parallel calls all start together: their markers first, in order.
	for i := range b.Calls {
		if err := mark(i); err != nil {
			return err
		}
	}
	// dbos.Go numbers the steps in call order before they run, so a
	// replay matches them however the goroutines were scheduled.
	outs := make([]<-chan dbos.StepOutcome[llm.Block], 0, len(b.Calls))
	dones := make([]func(), 0, len(b.Calls))
	var first error
	for i := range b.Calls {
		s.e.failpoint("before:" + s.label + names[i])
		step, done := during(s.e, s.label+names[i], call(i))
		ch, err := dbos.Go(dctx, step, dbos.WithStepName(names[i]), dbos.WithStepMaxRetries(0))
		if err != nil {
			first = err // the calls launched already are waited for below
			break
		}
		outs, dones = append(outs, ch), append(dones, done)
	}
	for i, ch := range outs {
		o := <-ch // its outcome checkpointed (or not, if cut off)
		dones[i]()
		if o.Err != nil && first == nil {
			first = o.Err
		}
		b.Results[i] = o.Result
		s.e.failpoint("after:" + s.label + names[i])
	}
	return first
}

// runStep runs fn as the named, checkpointed step, between the failpoints
// of its name (after label, which tells a child's steps from a root's).
// DBOS's own step retries are off: model calls retry inside the provider,
// and a tool call must not run twice.
func runStep[R any](e *Engine, ctx dbos.Context, label, name string, fn func(context.Context) (R, error)) (R, error) {
	e.failpoint("before:" + label + name)
	step, done := during(e, label+name, fn)
	defer done() // deferred: a step that panics lets its admission go too
	r, err := dbos.RunAsStep(ctx, step, dbos.WithStepName(name), dbos.WithStepMaxRetries(0))
	e.failpoint("after:" + label + name)
	return r, err
}

// ErrFailpoint is the error of a step that Options.Failpoint "error:NAME"
// fails.
var ErrFailpoint = errors.New("failpoint")

// inStepKey marks the context of a step admitted by the engine's gate:
// its waits are parked (gate.park).
type inStepKey struct{}

// during wraps a step's function with the failpoint "during:NAME": the
// step's work is done but its result not yet checkpointed, the worst
// moment to die. The step runs only once the engine's gate admits it (not
// while it drains; on a worker of a fleet, only while its lease is
// fresh); done, called once DBOS has returned from the step (its
// outcome checkpointed), lets the admission go: a drain that counted the
// step finished as soon as its function returned would shut DBOS down
// before it checkpointed the outcome, and the outcome would be lost while
// the run went on to record the step's result in the transcript. A step
// replayed from its checkpoint is never admitted.
func during[R any](e *Engine, name string, fn func(context.Context) (R, error)) (_ dbos.Step[R], done func()) {
	var admitted atomic.Bool
	step := func(ctx context.Context) (r R, err error) {
		// An engine that drains, or a worker whose lease may be running
		// out, starts nothing.
		if err := e.gate.admit(ctx); err != nil {
			return r, err
		}
		admitted.Store(true)
		ctx = context.WithValue(ctx, inStepKey{}, true)
		if e.opts.Failpoint == "error:"+name {
			return r, fmt.Errorf("step %s: %w", name, ErrFailpoint)
		}
		r, err = fn(ctx)
		e.failpoint("during:" + name)
		return r, err
	}
	return step, func() {
		if admitted.CompareAndSwap(true, false) {
			e.gate.stepDone()
		}
	}
}
