package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/cost"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
)

// loaded is what a run starts from, checkpointed as the run's first step:
// on a replay after a crash the run must start from the same transcript
// as the first time, not from the longer one the store holds by then.
type loaded struct {
	Instance *store.Instance
	Messages []llm.Message
	Active   time.Duration
	// Spent is what the instance's tree recorded spending before this run
	// (instances' totals are written when a run ends or waits), charged to
	// the tree budget: read in the step, so a replay is charged the same.
	Spent agent.TreeBudget
	Run   store.Run // set by the start step
	// Resume continues a run suspended on held calls, now decided
	// (resumption); ResumeMail is the mail it takes, consumed when the
	// resumed turn's results are recorded.
	Resume     *loop.Resume `json:",omitempty"`
	ResumeMail []int64      `json:",omitempty"`
}

// runInstance is the workflow that carries a root instance from where it
// stands to its end. Its steps, in order: load, start, then the loop's
// (turn-N/generate, turn-N/call-I-NAME/start for side effects,
// turn-N/call-I-NAME, ...), then finish; or, when a step of deputy's own
// failed, fail (failRun).
func (e *Engine) runInstance(ctx dbos.Context, id string) (string, error) {
	state, err := e.carry(ctx, id)
	if err == nil || ctx.Err() != nil || ownedElsewhere(err) {
		return state, err
	}
	end, err := e.failRun(ctx, id, "", err, false)
	return string(end.Instance.State), err
}

// carry is a root's run: its first steps (startRun), its tree's run under
// the engine's cap, cancellable by a control, then how it ended
// (rootEnded).
func (e *Engine) carry(ctx dbos.Context, id string) (string, error) {
	wf, err := dbos.GetWorkflowID(ctx)
	if err != nil {
		return "", err
	}
	ld, err := e.startRun(ctx, id, wf, "", true)
	if err != nil {
		return "", err
	}
	if ld.Instance.State.Terminal() {
		return string(ld.Instance.State), nil
	}
	rec := newRecorder(e, id, ld.Instance, len(ld.Messages))
	defer rec.forget(id)
	// A fresh nonce per execution: a side-effecting call whose start marker
	// carries another execution's nonce had started before a crash.
	runner, task, spec, err := e.setup(ctx, ld.Instance, rec, agent.NewID(), ld.Spent)
	if err != nil {
		return e.fail(ctx, id, ld.Run.ID, err)
	}
	task.Limits = rootLimits(spec, task.Definition, ld)
	task.Messages, task.Inbox, task.Hold = ld.Messages, e.inbox(ctx, id, ""), e.hold(ctx, id, "")
	task.Resume = ld.Resume
	rec.resuming(id, ld.ResumeMail)
	slotCtx, release, err := e.takeSlot(ctx, id)
	if err != nil {
		return "", err
	}
	defer release()
	runCtx, cancel := context.WithCancelCause(slotCtx)
	defer cancel(nil)
	defer e.register(ctx, id, cancel)()
	out, runErr := runner.Run(runCtx, task)
	if out == nil {
		return e.fail(ctx, id, ld.Run.ID, runErr)
	}
	if errors.Is(runErr, context.Canceled) && ctx.Err() != nil {
		// Shut down or cancelled through DBOS: the run stops here and a
		// later execution resumes it; nothing is finished.
		return "", runErr
	}
	return e.rootEnded(ctx, ld, out, context.Cause(runCtx), rec)
}

// rootLimits are a root's limits for the run ld starts: the spec's, and a
// type's (def) where the spec leaves them open, less what the instance's
// earlier runs used, since both count over all its runs.
func rootLimits(spec Spec, def *agentdef.Definition, ld loaded) loop.Limits {
	l := loop.Limits{WallTime: spec.WallTime, MaxOutputTokens: spec.MaxOutputTokens, MaxTurns: spec.MaxTurns}
	if def != nil {
		l = agent.TypeLimits(def, l)
	}
	if l.MaxTurns > 0 {
		// A resumed run always gets a turn, to take in its answer.
		l.MaxTurns = max(l.MaxTurns-ld.Instance.Turns, 1)
	}
	if l.WallTime > 0 {
		// Only time spent running counts: earlier runs' (not the time
		// asking or paused between them) is taken off.
		l.WallTime = max(l.WallTime-ld.Active, time.Nanosecond)
		if l.SoftWallTime > 0 {
			l.SoftWallTime = max(l.SoftWallTime-ld.Active, time.Nanosecond)
		}
	}
	return l
}

// rootEnded records how a root's run ended, with totals over all the
// instance's runs: one that stopped to wait suspends, unless a cancel came
// as it did; any other finishes, cancelled if cause (why the run's context
// ended) says so, failed if its record could not be written.
func (e *Engine) rootEnded(ctx dbos.Context, ld loaded, out *agent.Outcome, cause error, rec *recorder) (string, error) {
	id := ld.Instance.ID
	res := endResult(ld.Instance, &out.Instances[0], out.Report)
	if out.Result.StopReason == loop.StopSuspended {
		state, err := e.suspend(ctx, id, stop{run: ld.Run.ID, pending: out.Result.Pending, totals: res})
		if err != nil || state != instance.Cancelled {
			e.changed() // those waiting for it to settle (Settle)
			return string(state), err
		}
		// A cancel came as it stopped to wait: it ends here.
		res.State, res.StopReason, res.Incomplete = store.Cancelled, string(loop.StopCancelled), true
	}
	if errors.Is(cause, errCancelled) || res.State == store.Cancelled {
		res.State, res.Error = store.Cancelled, errCancelled.Error()
	}
	if err := rec.failed(); err != nil && res.State != store.Failed {
		res.State, res.Error = store.Failed, "recording the run failed: "+err.Error()
	}
	return e.finish(ctx, id, ld.Run.ID, res)
}

// setup makes the runner and the root's task of a run in the tree of
// root, from root's spec: its model, tools, catalog and limits, with this
// engine for checkpointed steps, children, questions and control. nonce
// marks the root's side-effecting calls of this execution; spent is what
// the tree spent before (loaded.Spent).
func (e *Engine) setup(ctx context.Context, root *store.Instance, rec *recorder, nonce string, spent agent.TreeBudget) (agent.Runner, agent.Task, Spec, error) {
	spec, err := specOf(root)
	if err != nil {
		return agent.Runner{}, agent.Task{}, spec, err
	}
	model, name, err := e.opts.Models(spec.Model)
	if err != nil {
		return agent.Runner{}, agent.Task{}, spec, err
	}
	tools, err := e.opts.Tools(spec)
	if err != nil {
		return agent.Runner{}, agent.Task{}, spec, err
	}
	runner := e.opts.Runner
	runner.Catalog = e.Catalog()
	if spec.Config != nil {
		runner.Config = spec.Config
	}
	runner.Clock = e.opts.Clock
	runner.MaxDepth, runner.MaxParallel = spec.MaxDepth, spec.MaxParallel
	if wf, ok := ctx.(dbos.Context); ok && nonce != "" {
		runner.Steps = &steps{wf: wf, e: e, nonce: nonce, id: root.ID}
	}
	runner.Children, runner.Questions, runner.Manager, runner.Approvals = e, e, manager{e}, e
	if e.opts.Fence != nil {
		withConfig := spec
		withConfig.Config = runner.Config
		runner.Fencer = e.opts.Fence(withConfig)
	}
	runner.OnEvent = rec.event
	rec.prices = runner.Prices()
	task := agent.Task{ID: root.ID, Task: root.Task, System: spec.System, Model: model, ModelName: name,
		ModelSpec: spec.Model, Tools: tools, Offer: spec.Offer, Compaction: spec.Compaction, Budget: spec.Budget, Spent: spent}
	if spec.Type != "" || spec.Definition != nil {
		def := spec.Definition
		if def == nil {
			// Queued (Enqueue) before any engine looked the type up.
			var ok bool
			if def, ok = runner.Catalog.Lookup(spec.Type); !ok {
				return agent.Runner{}, agent.Task{}, spec, agent.UnknownType(spec.Type, runner.Catalog.List())
			}
		}
		// Its model was chosen when it started (spec.Model): the type's,
		// or the one its task named.
		def = def.Clone()
		def.Model = agentdef.TierInherit
		task.Type, task.Definition = def.Name, def
	}
	if spec.ChildModel != "" {
		m, name, err := e.opts.Models(spec.ChildModel)
		if err != nil {
			return agent.Runner{}, agent.Task{}, spec, err
		}
		task.Inherited = &agent.ModelRef{Model: m, Name: name, Spec: spec.ChildModel}
	}
	return runner, task, spec, nil
}

// moveTo moves instance id to state to; one that finds it there already is
// a step run again after a crash.
func moveTo(ctx context.Context, st *store.Store, id string, to instance.State, why string) error {
	err := st.Transition(ctx, id, to, why)
	if te := (*instance.TransitionError)(nil); errors.As(err, &te) && te.From == to {
		return nil
	}
	return err
}

// specOf is the spec root was recorded with (its definition snapshot).
func specOf(root *store.Instance) (Spec, error) {
	var spec Spec
	if err := json.Unmarshal(root.Definition, &spec); err != nil {
		return spec, fmt.Errorf("instance %s: its spec does not decode: %w", root.ID, err)
	}
	return spec, nil
}

// stop is how a run that stopped to wait left its instance: what suspend
// records.
type stop struct {
	run     int64
	pending *llm.Message // the unsent user message
	// totals are the instance's, this run's included (Turns, ToolCalls,
	// Usage, Cost: endResult's).
	totals store.Result
	// notify is the parent to tell of the instance's question ("" for a
	// root, or a child whose spawn call returns the question itself).
	notify string
}

// suspend ends a run that stopped to wait: its unsent results are kept in
// the mailbox for the next run, and the instance waits asking (it has an
// open question) or paused. If a cancel came while it ran, which its
// inbox did not see, it records nothing and says "cancelled": the caller
// ends the instance as any ended run (nobody must answer or resume it
// first).
func (e *Engine) suspend(ctx dbos.Context, id string, s stop) (instance.State, error) {
	return runStep(e, ctx, "", "suspend", func(c context.Context) (instance.State, error) {
		mail, err := e.st.Pending(c, id)
		if err != nil {
			return "", err
		}
		if cancelIn(mail) {
			// Ended by the caller, as any run that ends (the step's answer
			// holds the decision on a replay).
			return instance.Cancelled, nil
		}
		if s.pending != nil {
			b, err := json.Marshal(s.pending)
			if err != nil {
				return "", err
			}
			if _, err := e.st.Post(c, store.Mail{InstanceID: id, Sender: id, Kind: mailPending, Body: string(b),
				Key: fmt.Sprintf("pending-%d", s.run)}); err != nil {
				return "", err
			}
		}
		if err := e.st.UpdateProgress(c, id, s.totals.Turns, s.totals.ToolCalls, s.totals.Usage, s.totals.Cost); err != nil {
			return "", err
		}
		to, why := store.Paused, "paused by request"
		q, err := openQuestion(c, e.st, id)
		if err != nil {
			return "", err
		}
		a, aid, err := openApproval(c, e.st, id)
		if err != nil {
			return "", err
		}
		if q == nil && a != nil && heldIn(s.pending) {
			to, why = store.Asking, "approval: "+a.Tool+" "+agentdef.OneLine(string(a.Input), 200)
			if s.notify != "" {
				if _, err := e.st.Post(c, store.Mail{InstanceID: s.notify, Sender: id, Kind: mailAsked,
					Body: fmt.Sprintf("[deputy] Your subagent %s %s", id, agent.ApprovalNotice(a, s.notify)),
					Key:  fmt.Sprintf("asked-approval-%d", aid)}); err != nil {
					return "", err
				}
			}
		}
		if q != nil {
			to, why = store.Asking, "asked: "+agentdef.OneLine(q.Body, 200)
			if s.notify != "" {
				if _, err := e.st.Post(c, store.Mail{InstanceID: s.notify, Sender: id, Kind: mailAsked,
					Body: fmt.Sprintf("[deputy] Your subagent %s asks: %s\n(Answer with subagent_answer, then collect its report with subagent_wait.)", id, q.Body),
					Key:  fmt.Sprintf("asked-%d", q.ID)}); err != nil {
					return "", err
				}
			}
		}
		if err := moveTo(c, e.st, id, to, why); err != nil {
			return "", err
		}
		if err := e.st.EndRun(c, s.run, string(to)); err != nil {
			return "", err
		}
		return to, nil
	})
}

// load reads the instance and the transcript it continues from; a new
// instance's transcript is its task. A transcript that stops at the
// model's turn (a suspended run) is continued with what came meanwhile:
// the answer, the notes (continuation), delivered in one transaction with
// the mail they consume, unless the caller brings the first messages
// itself (!deliver). Active is the time earlier runs spent running.
func (e *Engine) load(ctx context.Context, id string, deliver bool) (loaded, error) {
	in, err := e.st.GetInstance(ctx, id)
	if err != nil {
		return loaded{}, err
	}
	msgs, err := e.st.Transcript(ctx, id)
	if err != nil {
		return loaded{}, err
	}
	if in.State.Terminal() {
		return loaded{Instance: in, Messages: msgs}, nil
	}
	if len(msgs) == 0 {
		msgs = []llm.Message{llm.UserText(in.Task)}
		if err := e.st.AppendMessages(ctx, id, 0, 0, msgs); err != nil {
			return loaded{}, err
		}
	} else if deliver {
		mail, err := e.st.Pending(ctx, id)
		if err != nil {
			return loaded{}, err
		}
		if cancelIn(mail) {
			// Cancelled while it waited or while its next run was queued:
			// it ends here, before doing anything more.
			if err := e.control().cancelNow(ctx, in, "cancelled by request"); err != nil {
				return loaded{}, err
			}
			in, err = e.st.GetInstance(ctx, id)
			return loaded{Instance: in, Messages: msgs}, err
		}
		if r, ids, ok := resumption(msgs, mail); ok {
			// Decided held calls: the run resumes the turn (its first
			// batch runs the approved ones) instead of delivering it.
			runs, err := e.st.Runs(ctx, id)
			if err != nil {
				return loaded{}, err
			}
			ld, err := e.loadTotals(ctx, in, msgs, runs)
			ld.Resume, ld.ResumeMail = r, ids
			return ld, err
		} else if m, ids := continuation(in, msgs, mail); m != nil || len(ids) > 0 {
			add := []llm.Message{}
			if m != nil {
				add = append(add, *m)
			}
			if err := e.st.Deliver(ctx, id, in.Turns, len(msgs), add, ids); err != nil {
				return loaded{}, err
			}
			msgs = append(msgs, add...)
		}
	}
	runs, err := e.st.Runs(ctx, id)
	if err != nil {
		return loaded{}, err
	}
	return e.loadTotals(ctx, in, msgs, runs)
}

// loadTotals is what a run starts from besides its transcript: the time
// earlier runs spent running, and what its tree spent.
func (e *Engine) loadTotals(ctx context.Context, in *store.Instance, msgs []llm.Message, runs []store.Run) (loaded, error) {
	var active time.Duration
	for _, r := range runs {
		if !r.EndedAt.IsZero() {
			active += r.EndedAt.Sub(r.StartedAt)
		}
	}
	// The tree's running total (one row), not a sum over its instances:
	// a fan-out's every child reads it as it starts.
	total, err := e.st.TreeSpent(ctx, in.Root)
	if err != nil {
		return loaded{}, err
	}
	spent := agent.TreeBudget{Tokens: total.Tokens, USD: total.USD}
	return loaded{Instance: in, Messages: msgs, Active: active, Spent: spent}, nil
}

// finish records the root's end with its run's, and cancels any child it
// leaves waiting (asking or paused, nobody answered or resumed it) or
// running, and their children: with the root ended, nothing would carry
// them on.
func (e *Engine) finish(ctx dbos.Context, id string, run int64, res store.Result) (string, error) {
	_, err := runStep(e, ctx, "", "finish", func(c context.Context) (bool, error) {
		if err := e.endChildren(c, id); err != nil {
			return false, err
		}
		if err := e.st.Finish(c, id, res); err != nil {
			return false, err
		}
		return true, e.st.EndRun(c, run, string(res.State))
	})
	if err != nil {
		return "", err
	}
	e.changed()
	return string(res.State), nil
}

// fail ends a run that could not go on, keeping the totals its record
// holds, and the run with it: one left open would keep Settle waiting.
func (e *Engine) fail(ctx dbos.Context, id string, run int64, cause error) (string, error) {
	in, err := e.st.GetInstance(ctx, id)
	if err != nil {
		in = &store.Instance{} // the finish step fails too, or records what it can
	}
	return e.finish(ctx, id, run, failedResult(in, loop.StopModelError, cause))
}

// recorder writes what a tree's instances do into the store as it
// happens: children as they start and end, every message of every
// transcript, and the model-call attempts. Writes are idempotent, so the
// replay of a run after a crash, which emits the same events again, adds
// nothing. The first error is kept: a run whose record failed ends failed.
type recorder struct {
	e    *Engine
	root string
	// models are the instances' provider:model, prices the run's table:
	// the live cost of each model call.
	models map[string]string
	prices cost.Table
	usage  map[string]llm.Usage       // model calls not yet counted (their message follows)
	live   map[string]*store.Progress // running totals: earlier runs' and this run's
	tools  map[string]string          // tool names by call id, for the results' events
	// resumeID is the instance whose run resumes a turn of held calls;
	// resumeMail is the mail that resumption took, consumed with the
	// resumed turn's results (its first user message of the run).
	resumeID   string
	resumeMail []int64
	// base is what the instance this run resumes had spent in its earlier
	// runs, as its load step read it: its record now also holds this
	// run's live progress (store.With.Progress), so its end adds to this, not to
	// the record. A child that starts in this run has none.
	base store.Instance

	mu     sync.Mutex
	seq    map[string]int  // next message seq per instance
	listed map[string]bool // children recorded by an EventListed, whose EventCreated is still to come
	// fold holds, per instance, the seq of the assistant message its
	// model step stored in the step's own transaction (steps.generate):
	// the loop's events for that call (its response, its message) then
	// write nothing and count nothing, the step did.
	fold map[string]int
	err  error
}

func newRecorder(e *Engine, root string, in *store.Instance, messages int) *recorder {
	r := &recorder{e: e, root: root, seq: map[string]int{in.ID: messages}, models: map[string]string{in.ID: in.Model},
		usage: map[string]llm.Usage{}, tools: map[string]string{}, base: *in, fold: map[string]int{},
		live: map[string]*store.Progress{in.ID: {Turns: in.Turns, ToolCalls: in.ToolCalls, Usage: in.Usage, Cost: in.Cost}}}
	e.recs.Store(in.ID, r)
	return r
}

// recorderOf is the recorder that records instance id's loop events in
// this process (its run's, or its spawner's for a child started here),
// nil when none does.
func (e *Engine) recorderOf(id string) *recorder {
	if r, ok := e.recs.Load(id); ok {
		return r.(*recorder)
	}
	return nil
}

// forget stops naming r as instance id's recorder (its run here ended).
func (r *recorder) forget(id string) { r.e.recs.CompareAndDelete(id, r) }

// event passes ev on (Options.OnEvent) and records what it says happened
// (a loop's step: step); the first write that fails is kept (failed).
func (r *recorder) event(ev agent.Event) {
	if ev.Kind == agent.EventEnded {
		ev = r.ended(ev)
	}
	if h := r.e.opts.OnEvent; h != nil {
		h(ev)
	}
	ctx := context.Background() // the writes must land even as a run is being cancelled
	var err error
	switch s := ev.Spawned; {
	case ev.Kind == agent.EventListed:
		// Children listed together (a fan-out's): recorded in one
		// transaction, all or none; their own EventCreated follow.
		err = r.createListed(ctx, ev.Listed)
	case ev.Kind == agent.EventCreated && s != nil:
		if r.wasListed(ev.Instance) {
			break
		}
		// A child is listed: recorded, with its first messages, before
		// its workflow starts (its start step moves it to running).
		err = r.e.st.CreateInstances(ctx, []store.Listed{listedOf(ev)})
	case ev.Kind == agent.EventSpawned && s != nil:
		r.mu.Lock()
		r.seq[ev.Instance] = len(s.Messages)
		r.models[ev.Instance] = s.Model
		r.mu.Unlock()
		r.e.recs.Store(ev.Instance, r)
	case ev.Kind == agent.EventStep:
		err = r.step(ctx, ev.Instance, ev.Loop)
	case r.childEnd(ev) && !ev.Relay.Interrupted:
		// A child stopped by the engine's shutdown has not ended (ended
		// said so): its workflow stays pending and the next execution
		// resumes it.
		err = r.finishChild(ctx, ev.Instance, ev.Relay, ev.Final)
	}
	if r.childEnd(ev) {
		r.forget(ev.Instance)
	}
	if err != nil {
		r.mu.Lock()
		if r.err == nil {
			r.err = fmt.Errorf("instance %s: %w", ev.Instance, err)
		}
		r.mu.Unlock()
	}
}

// listedOf is the instance to record for a child's EventCreated, with its
// first messages.
func listedOf(ev agent.Event) store.Listed {
	s := ev.Spawned
	def, _ := json.Marshal(s.Definition)
	return store.Listed{Instance: &store.Instance{ID: ev.Instance, Parent: ev.Parent, Type: ev.Type,
		Definition: def, Task: s.Task, Mode: string(s.Mode), Model: s.Model}, Messages: s.Messages}
}

// createListed records the children of an EventListed, marking them so
// that their own EventCreated record nothing more.
func (r *recorder) createListed(ctx context.Context, evs []agent.Event) error {
	list := make([]store.Listed, 0, len(evs))
	for _, ev := range evs {
		if ev.Kind == agent.EventCreated && ev.Spawned != nil {
			list = append(list, listedOf(ev))
		}
	}
	if err := r.e.st.CreateInstances(ctx, list); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listed == nil {
		r.listed = map[string]bool{}
	}
	for _, l := range list {
		r.listed[l.Instance.ID] = true
	}
	return nil
}

// wasListed reports, once, whether child id was recorded by an
// EventListed.
func (r *recorder) wasListed(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.listed[id] {
		return false
	}
	delete(r.listed, id)
	return true
}

// childEnd reports whether ev is the end of one of the tree's children:
// not its root's, and not a run that stopped to wait.
func (r *recorder) childEnd(ev agent.Event) bool {
	return ev.Kind == agent.EventEnded && ev.Relay != nil && ev.Final != nil && ev.Instance != r.root &&
		!ev.Final.State.Waiting()
}

// step records a loop event of instance id: a final message at its
// sequence number (with what its transaction carries: with), a model
// call's attempt, a compaction. A model call's usage is counted with the
// assistant message that follows, in its transaction.
func (r *recorder) step(ctx context.Context, id string, le loop.Event) error {
	switch le.Kind {
	case loop.EventMessage:
		r.mu.Lock()
		seq := r.seq[id]
		r.seq[id] = seq + 1
		f, folded := r.fold[id]
		if folded && f == seq {
			delete(r.fold, id) // stored, counted and announced by its step
		}
		r.mu.Unlock()
		if folded && f == seq {
			return nil
		}
		if r.e.dbos.Err() != nil {
			// DBOS is shutting down: a step it cut off ends the loop with
			// "not run" results that must not be recorded (the next run
			// replays that step, or finds it cut, and its result differs).
			// Nothing is lost by skipping: no step is checkpointed and no
			// outcome recorded from here on, so the next execution replays
			// this run's turns and appends what is missing.
			return nil
		}
		if err := r.e.st.AppendWith(ctx, id, le.Turn, seq, []llm.Message{le.Message}, r.with(id, le.Turn, le.Message)); err != nil {
			return err
		}
		return r.resumed(ctx, id, le.Message)
	case loop.EventModelAttempt:
		_, err := r.e.st.RecordAttempt(ctx, id, le.Turn, le.Attempt)
		return err
	case loop.EventModelResponse:
		r.mu.Lock()
		if _, folded := r.fold[id]; !folded { // a folded call's usage is counted already
			u := r.usage[id]
			u.Add(le.Usage)
			r.usage[id] = u
		}
		r.mu.Unlock()
	case loop.EventCompaction:
		// Every message so far is stored (the loop emits them before it
		// compacts): the summary covers all but the kept tail.
		r.mu.Lock()
		through := r.seq[id] - 1 - le.Kept
		r.mu.Unlock()
		summary := ""
		if head := le.Message.Content; len(head) > 0 {
			summary = head[len(head)-1].Text
		}
		return r.e.st.RecordCompaction(ctx, store.Compaction{InstanceID: id, Turn: le.Turn, ThroughSeq: through,
			Summary: summary, Usage: le.Usage})
	}
	return nil
}

// ended is a child's EventEnded (Options.OnEvent) as it is true of the
// instance: one the engine's shutdown stopped has not ended, whatever the
// cut-off loop said (failed, cancelled, "in 0 turns"), and stays created or
// running for the next execution to resume. Its relay says Interrupted,
// with the state the store holds and no error.
func (r *recorder) ended(ev agent.Event) agent.Event {
	if !r.childEnd(ev) || !r.e.closed.Load() {
		return ev
	}
	state := instance.Running // a run of it started, unless the store says otherwise
	if cur, err := r.e.st.GetInstance(context.Background(), ev.Instance); err == nil {
		if cur.State.Terminal() {
			return ev // it ended after all (cancelled meanwhile): nothing to resume
		}
		state = cur.State
	}
	relay, final := *ev.Relay, *ev.Final
	relay.State, final.State, relay.Interrupted = state, state, true
	relay.Error, final.Error = "", ""
	ev.Relay, ev.Final = &relay, &final
	return ev
}

// toolEventCut bounds a tool's input or output in its event: the event
// announces the call; the transcript holds it whole.
const toolEventCut = 500

// with is what a message's append carries into its transaction: for an
// assistant message, the model call's share of the instance's live totals
// and a tool_call event per call it makes; for a user message, a
// tool_result event per result. The store writes them only when the
// message is new, so a replay after a crash counts nothing twice.
func (r *recorder) with(id string, turn int, m llm.Message) store.With {
	var w store.With
	event := func(kind string, data map[string]any) {
		raw, _ := json.Marshal(data) // strings and numbers only
		w.Events = append(w.Events, store.NewEvent{Kind: kind, Data: raw})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Role == llm.Assistant {
		u := r.usage[id]
		delete(r.usage, id)
		w, apply := r.assistant(id, turn, m, u)
		apply()
		return w
	}
	for _, b := range m.Content {
		if b.Type == llm.TypeToolResult {
			name := r.tools[b.ToolUseID]
			delete(r.tools, b.ToolUseID)
			event("tool_result", map[string]any{"turn": turn, "id": b.ToolUseID, "name": name, "is_error": b.IsError,
				"output": agentdef.OneLine(b.Text, toolEventCut)})
		}
	}
	return w
}

// assistant is what the append of assistant message m of instance id
// carries (with), for a model call that used u, and apply, which makes
// the recorder count it: computing it changes nothing, so a transaction
// that runs it and is run again (a retry) or rolled back counts nothing.
// Called with r.mu held; apply too.
func (r *recorder) assistant(id string, turn int, m llm.Message, u llm.Usage) (store.With, func()) {
	var w store.With
	// Absolute totals, from the base the run's load step read plus every
	// call of this run (a replay's too): the store needs no read to write
	// them.
	var p store.Progress
	if cur := r.live[id]; cur != nil {
		p = *cur
	}
	p.Turns++
	p.Usage.Add(u)
	if c, ok := r.prices.Cost(r.models[id], u); ok {
		p.Cost = addCost(p.Cost, &c)
	}
	var calls []llm.Block
	for _, b := range m.Content {
		if b.Type == llm.TypeToolUse {
			p.ToolCalls++
			calls = append(calls, b)
			raw, _ := json.Marshal(map[string]any{"turn": turn, "id": b.ID, "name": b.Name,
				"input": agentdef.OneLine(b.Arguments(), toolEventCut)}) // strings and numbers only
			w.Events = append(w.Events, store.NewEvent{Kind: "tool_call", Data: raw})
		}
	}
	cp := p
	w.Progress = &cp
	return w, func() {
		r.live[id] = &p
		for _, b := range calls {
			r.tools[b.ID] = b.Name
		}
	}
}

// finishChild records a child's end, with the totals of all its runs:
// what earlier runs spent is on its record already.
func (r *recorder) finishChild(ctx context.Context, id string, rl *agent.Relay, in *instance.Record) error {
	if r.e.opts.Failpoint == "error:record-end" {
		return fmt.Errorf("record the end of %s: %w", id, ErrFailpoint)
	}
	cur, err := r.e.st.GetInstance(ctx, id)
	if err != nil || cur.State.Terminal() {
		return err // ended already: a replay, or cancelled meanwhile
	}
	var prev store.Instance // earlier runs' totals: none for a child new in this run
	if id == r.base.ID {
		prev = r.base
	}
	return r.e.st.Finish(ctx, id, endResult(&prev, in, rl.Report))
}

// endResult is how a run that did in ended an instance that had done prev
// in its earlier runs: the totals cover all its runs.
func endResult(prev *store.Instance, in *instance.Record, report string) store.Result {
	usage := prev.Usage
	usage.Add(in.Usage)
	return store.Result{State: in.State, StopReason: in.StopReason, Incomplete: in.Incomplete,
		Report: report, Error: in.Error, Usage: usage, Cost: addCost(prev.Cost, in.Cost), Turns: prev.Turns + in.Turns,
		ToolCalls: prev.ToolCalls + in.ToolCalls, Artifacts: in.Artifacts}
}

func (r *recorder) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// resuming says that this run of instance id resumes a turn of held
// calls, taking mail.
func (r *recorder) resuming(id string, mail []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resumeID, r.resumeMail = id, mail
}

// resumed consumes the resumption's mail once the resumed turn's results
// (m, the run's first user message of id) are recorded: from then on the
// transcript holds the decision, and a later run must not resume again.
// A crash before this replays the run from its checkpointed load, to the
// same place.
func (r *recorder) resumed(ctx context.Context, id string, m llm.Message) error {
	r.mu.Lock()
	if id != r.resumeID || m.Role != llm.User || r.resumeMail == nil {
		r.mu.Unlock()
		return nil
	}
	ids := r.resumeMail
	r.resumeMail = nil
	r.mu.Unlock()
	return consume(ctx, r.e.st, ids)
}

// heldIn reports whether a suspended run's pending results hold a call
// for approval.
func heldIn(pending *llm.Message) bool {
	return pending != nil && slices.ContainsFunc(pending.Content, loop.IsHeld)
}
