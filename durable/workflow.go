package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/agent"
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
}

// runInstance is the workflow that carries a root instance from where it
// stands to its end. Its steps, in order: load, start, then the loop's
// (turn-N/generate, turn-N/call-I-NAME/start for side effects,
// turn-N/call-I-NAME, ...), then finish.
func (e *Engine) runInstance(ctx dbos.Context, id string) (string, error) {
	state, err := e.carry(ctx, id)
	if err != nil && ctx.Err() == nil {
		// A step of deputy's own failed (the store, or a replay that no
		// longer matches its steps): end the instance as failed, through
		// a step if the workflow still can, else straight in the store
		// (Finish is idempotent), so no instance stays active with no run
		// to carry it.
		if _, ferr := e.fail(ctx, id, err); ferr == nil {
			return string(store.Failed), nil
		}
		if e.st.Finish(context.WithoutCancel(ctx), id, store.Result{State: store.Failed, StopReason: string(loop.StopStepError),
			Error: err.Error()}) == nil {
			return string(store.Failed), nil
		}
	}
	return state, err
}

func (e *Engine) carry(ctx dbos.Context, id string) (string, error) {
	// A fresh nonce per execution: a side-effecting call whose start marker
	// carries another execution's nonce had started before a crash.
	nonce := agent.NewID()
	ld, err := runStep(e, ctx, "", "load", func(c context.Context) (loaded, error) { return e.load(c, id) })
	if err != nil {
		return "", err
	}
	if ld.Instance.State.Terminal() {
		return string(ld.Instance.State), nil
	}
	if _, err := runStep(e, ctx, "", "start", func(c context.Context) (bool, error) {
		err := e.st.Transition(c, id, store.Running, "run started")
		var te *store.TransitionError
		if errors.As(err, &te) && te.From == store.Running {
			return true, nil // the run is resuming after a crash
		}
		return err == nil, err
	}); err != nil {
		return "", err
	}

	var spec Spec
	if err := json.Unmarshal(ld.Instance.Definition, &spec); err != nil {
		return e.fail(ctx, id, fmt.Errorf("instance %s: its spec does not decode: %w", id, err))
	}
	model, name, err := e.opts.Models(spec.Model)
	if err != nil {
		return e.fail(ctx, id, err)
	}
	tools, err := e.opts.Tools(spec)
	if err != nil {
		return e.fail(ctx, id, err)
	}
	rec := &recorder{e: e, root: id, seq: map[string]int{id: len(ld.Messages)}}
	runner := e.opts.Runner
	runner.Catalog = e.Catalog()
	if spec.Config != nil {
		runner.Config = spec.Config
	}
	runner.Clock = e.opts.Clock
	runner.MaxDepth, runner.MaxParallel = spec.MaxDepth, spec.MaxParallel
	runner.Steps = &steps{wf: ctx, e: e, nonce: nonce}
	runner.Children = e
	runner.OnEvent = rec.event
	out, runErr := runner.Run(ctx, agent.Task{
		ID: id, Task: ld.Instance.Task, System: spec.System,
		Model: model, ModelName: name, ModelSpec: spec.Model, Tools: tools,
		Limits: loop.Limits{MaxTurns: spec.MaxTurns}, Compaction: spec.Compaction, Budget: spec.Budget, Messages: ld.Messages,
	})
	if out == nil {
		return e.fail(ctx, id, runErr)
	}
	if errors.Is(runErr, context.Canceled) && ctx.Err() != nil {
		// Shut down or cancelled through DBOS: the run stops here and a
		// later execution resumes it; nothing is finished.
		return "", runErr
	}
	root := out.Instances[0]
	res := store.Result{
		State: store.State(root.State), StopReason: root.StopReason, Incomplete: root.Incomplete,
		Report: out.Result.Answer, Error: root.Error, Usage: root.Usage, Cost: root.Cost,
		Turns: root.Turns, ToolCalls: root.ToolCalls, Artifacts: artifacts(root.Artifacts),
	}
	if err := rec.failed(); err != nil && res.State != store.Failed {
		res.State, res.Error = store.Failed, "recording the run failed: "+err.Error()
	}
	return e.finish(ctx, id, res)
}

// load reads the instance and the transcript it continues from; a new
// instance's transcript is its task.
func (e *Engine) load(ctx context.Context, id string) (loaded, error) {
	in, err := e.st.GetInstance(ctx, id)
	if err != nil {
		return loaded{}, err
	}
	msgs, err := e.st.Transcript(ctx, id)
	if err != nil {
		return loaded{}, err
	}
	if len(msgs) == 0 && !in.State.Terminal() {
		msgs = []llm.Message{llm.UserText(in.Task)}
		if err := e.st.AppendMessages(ctx, id, 0, 0, msgs); err != nil {
			return loaded{}, err
		}
	}
	return loaded{Instance: in, Messages: msgs}, nil
}

// finish records the root's end, and ends any child still active: one
// whose parent's spawn call did not come back for it (the parent was
// stopped before it could), so nothing will resume it.
func (e *Engine) finish(ctx dbos.Context, id string, res store.Result) (string, error) {
	_, err := runStep(e, ctx, "", "finish", func(c context.Context) (bool, error) {
		kids, err := e.st.ListInstances(c, store.Filter{Root: id, Active: true})
		if err != nil {
			return false, err
		}
		for _, k := range kids {
			if k.ID == id {
				continue
			}
			if err := e.st.Finish(c, k.ID, store.Result{State: store.Failed, Incomplete: true, StopReason: "interrupted",
				Error: "interrupted: its parent ended without waiting for it"}); err != nil {
				return false, err
			}
		}
		return true, e.st.Finish(c, id, res)
	})
	if err != nil {
		return "", err
	}
	return string(res.State), nil
}

// fail ends a run that could not go on.
func (e *Engine) fail(ctx dbos.Context, id string, cause error) (string, error) {
	return e.finish(ctx, id, store.Result{State: store.Failed, StopReason: string(loop.StopModelError), Error: cause.Error()})
}

func artifacts(paths []string) json.RawMessage {
	if len(paths) == 0 {
		return nil
	}
	b, _ := json.Marshal(paths)
	return b
}

// recorder writes what a tree's instances do into the store as it
// happens: children as they start and end, every message of every
// transcript, and the model-call attempts. Writes are idempotent, so the
// replay of a run after a crash, which emits the same events again, adds
// nothing. The first error is kept: a run whose record failed ends failed.
type recorder struct {
	e    *Engine
	root string

	mu  sync.Mutex
	seq map[string]int // next message seq per instance
	err error
}

func (r *recorder) event(ev agent.Event) {
	if h := r.e.opts.OnEvent; h != nil {
		h(ev)
	}
	ctx := context.Background() // the writes must land even as a run is being cancelled
	var err error
	switch ev.Kind {
	case agent.EventSpawned:
		if s := ev.Spawned; s != nil {
			def, _ := json.Marshal(s.Definition)
			err = r.e.st.CreateInstance(ctx, &store.Instance{ID: ev.Instance, Parent: ev.Parent, Type: ev.Type,
				Definition: def, Task: s.Task, Mode: string(s.Mode), Model: s.Model})
			if err == nil {
				err = r.e.st.Transition(ctx, ev.Instance, store.Running, "spawned")
				var te *store.TransitionError
				if errors.As(err, &te) && te.From == store.Running {
					err = nil // a child resumed after a crash
				}
			}
			if err == nil {
				err = r.e.st.SetWorkflow(ctx, ev.Instance, workflowID(ev.Instance))
			}
			if err == nil {
				err = r.e.st.AppendMessages(ctx, ev.Instance, 0, 0, s.Messages)
			}
			r.mu.Lock()
			r.seq[ev.Instance] = len(s.Messages)
			r.mu.Unlock()
		}
	case agent.EventStep:
		switch ev.Loop.Kind {
		case loop.EventMessage:
			r.mu.Lock()
			seq := r.seq[ev.Instance]
			r.seq[ev.Instance] = seq + 1
			r.mu.Unlock()
			err = r.e.st.AppendMessages(ctx, ev.Instance, ev.Loop.Turn, seq, []llm.Message{ev.Loop.Message})
		case loop.EventModelAttempt:
			_, err = r.e.st.RecordAttempt(ctx, ev.Instance, ev.Loop.Turn, ev.Loop.Attempt)
		case loop.EventCompaction:
			// Every message so far is stored (the loop emits them before
			// it compacts); the summary covers all but the kept tail.
			r.mu.Lock()
			through := r.seq[ev.Instance] - 1 - ev.Loop.Kept
			r.mu.Unlock()
			head := ev.Loop.Message.Content
			summary := ""
			if n := len(head); n > 0 {
				summary = head[n-1].Text
			}
			err = r.e.st.RecordCompaction(ctx, store.Compaction{InstanceID: ev.Instance, Turn: ev.Loop.Turn,
				ThroughSeq: through, Summary: summary, Usage: ev.Loop.Usage})
		}
	case agent.EventEnded:
		// A child stopped by the engine's shutdown has not ended: its
		// workflow stays pending and the next execution resumes it.
		if rl, in := ev.Relay, ev.Final; rl != nil && in != nil && ev.Instance != r.root && !r.e.closed.Load() {
			err = r.e.st.Finish(ctx, ev.Instance, store.Result{State: store.State(in.State), StopReason: in.StopReason,
				Incomplete: in.Incomplete, Report: rl.Report, Error: in.Error, Usage: in.Usage, Cost: in.Cost,
				Turns: in.Turns, ToolCalls: in.ToolCalls, Artifacts: artifacts(in.Artifacts)})
		}
	}
	if err != nil {
		r.mu.Lock()
		if r.err == nil {
			r.err = fmt.Errorf("instance %s: %w", ev.Instance, err)
		}
		r.mu.Unlock()
	}
}

func (r *recorder) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
