package durable

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
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
	id    string // the instance whose steps these are

	// stored is how many messages the instance's transcript held when
	// this execution first asked (storedOnce): a turn whose assistant
	// message is among them is checkpointed (generate).
	storedOnce sync.Once
	stored     int
	storedErr  error
}

func (s *steps) Model(ctx context.Context, turn int, purpose loop.StepPurpose, gen func(context.Context) (*llm.Response, error)) (*llm.Response, error) {
	name := fmt.Sprintf("turn-%d/%s", turn, purpose)
	if purpose == loop.StepGenerate && s.e.ds != nil && s.id != "" {
		if rec := s.e.recorderOf(s.id); rec != nil {
			return s.generate(ctx, rec, turn, name, gen)
		}
	}
	return runStep(s.e, dbos.From(s.wf, ctx), s.label, name, gen)
}

// generate is a turn's model call as one transaction: the HTTP call first,
// outside any transaction (holding SQLite's one writer for the length of
// a model call would serialise every run), then one DBOS transaction step
// whose output is the response and which stores, with its checkpoint, the
// assistant message, the instance's progress and its tool_call events
// (the data source is DBOS's own database: one commit, not two).
//
// DBOS checks a transaction step's checkpoint only inside its
// transaction, after the call would have run, so a replay is kept from
// calling the model again by the transcript: the message and the
// checkpoint commit together, so "the transcript held message seq S as
// this execution began" is "turn S's call is checkpointed", and the call
// is skipped for it. A failed call checkpoints its error (nothing else),
// as a plain step would. An append the store refuses (the instance ended
// meanwhile, a conflict) commits the checkpoint alone, and the recorder
// then appends the message from the loop's event as it did before, to
// the same refusal.
func (s *steps) generate(ctx context.Context, rec *recorder, turn int, name string, gen func(context.Context) (*llm.Response, error)) (*llm.Response, error) {
	e := s.e
	rec.mu.Lock()
	seq := rec.seq[s.id] // the assistant message's: the loop emits it next
	rec.mu.Unlock()
	s.storedOnce.Do(func() { s.stored, s.storedErr = e.st.MessageCount(context.WithoutCancel(ctx), s.id) })
	if s.storedErr != nil {
		return nil, s.storedErr
	}
	e.failpoint("before:" + s.label + name)
	var resp *llm.Response
	var genErr error
	if seq >= s.stored {
		// An engine that drains, or a worker whose lease may be running
		// out, starts nothing; its admission is let go once the outcome
		// is checkpointed (during).
		if err := e.gate.admit(ctx); err != nil {
			return nil, err
		}
		defer e.gate.stepDone()
		if e.opts.Failpoint == "error:"+s.label+name {
			genErr = fmt.Errorf("step %s: %w", s.label+name, ErrFailpoint)
		} else {
			resp, genErr = gen(context.WithValue(ctx, inStepKey{}, true))
		}
		e.failpoint("during:" + s.label + name)
	}
	var ran, wrote bool
	out, err := dbos.RunAsTransaction(dbos.From(s.wf, ctx), e.ds, func(c context.Context, tx dbos.Tx) (*llm.Response, error) {
		ran, wrote = true, false // run again if DBOS retries the transaction
		if genErr != nil {
			return nil, genErr
		}
		if resp == nil {
			return nil, fmt.Errorf("%s: the transcript holds its message but its checkpoint is missing", name)
		}
		msg := resp.Message()
		rec.mu.Lock()
		u := rec.usage[s.id] // none pending, unless a call's message was never emitted
		u.Add(resp.Usage)
		w, _ := rec.assistant(s.id, turn, msg, u)
		rec.mu.Unlock()
		err := e.st.AppendWithTx(c, storeTx{tx}, s.id, turn, seq, []llm.Message{msg}, w)
		switch {
		case err == nil:
			wrote = true
		case errors.Is(err, store.ErrTerminal), errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			// Refused before it wrote anything: the recorder meets the
			// same refusal and keeps it as the run's record error.
		default:
			return nil, err
		}
		return resp, nil
	}, dbos.WithStepName(name), dbos.WithStepMaxRetries(0))
	e.failpoint("after:" + s.label + name)
	if err != nil {
		return out, err
	}
	if !ran {
		wrote = seq < s.stored // replayed: stored with its checkpoint, unless the store refused it then
	}
	if wrote {
		e.st.EventsCommitted()
		if out != nil {
			rec.mu.Lock()
			u := rec.usage[s.id]
			u.Add(out.Usage)
			delete(rec.usage, s.id)
			_, apply := rec.assistant(s.id, turn, out.Message(), u)
			apply()
			rec.fold[s.id] = seq
			rec.mu.Unlock()
		}
	}
	return out, nil
}

// storeTx is DBOS's transaction as the store takes a caller's (store.Tx).
type storeTx struct{ tx dbos.Tx }

func (t storeTx) Exec(ctx context.Context, q string, args ...any) (store.TxResult, error) {
	return t.tx.Exec(ctx, q, args...)
}

func (t storeTx) Query(ctx context.Context, q string, args ...any) (store.Rows, error) {
	return t.tx.Query(ctx, q, args...)
}

func (t storeTx) QueryRow(ctx context.Context, q string, args ...any) store.Row {
	return t.tx.QueryRow(ctx, q, args...)
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
