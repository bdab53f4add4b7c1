package durable

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
)

// DefaultMaxRuns is how many runs an engine carries at once when
// Options.MaxRuns is not set.
const DefaultMaxRuns = 64

// slots caps the runs an engine carries at once, roots' and children's
// (each parent's own cap on its children, max_parallel, is its tree's). A
// run gives its place up while it waits for its children (a foreground
// spawn, subagent_wait, holding for background children), so a full
// engine of waiting parents cannot deadlock.
type slots struct{ ch chan struct{} }

type slotKey struct{}

// held is a run's place, carried in its context so a wait inside the run
// (several at once, for parallel spawns) can give it up.
type held struct {
	mu      sync.Mutex
	s       *slots
	have    bool
	waiting int // waits in progress; the place is given up while any is
}

// take waits for a place, calling queued first if it has to; the context
// it returns carries it.
func (s *slots) take(ctx context.Context, queued func()) (context.Context, func(), error) {
	if err := agent.Take(ctx, s.ch, queued); err != nil {
		return ctx, nil, err
	}
	h := &held{s: s, have: true}
	return context.WithValue(ctx, slotKey{}, h), func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.giveUp()
	}, nil
}

// giveUp lets the place go if the run has it; h.mu is held.
func (h *held) giveUp() {
	if h.have {
		h.have = false
		<-h.s.ch
	}
}

// yield gives up the place ctx's run holds, if any, until resume; the
// last of several overlapping waits to resume takes a place again.
func (s *slots) yield(ctx context.Context) (resume func()) {
	h, _ := ctx.Value(slotKey{}).(*held)
	if h == nil {
		return func() {}
	}
	h.mu.Lock()
	h.waiting++
	h.giveUp()
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.waiting--
		last := h.waiting == 0
		h.mu.Unlock()
		if !last {
			return
		}
		s.ch <- struct{}{}
		h.mu.Lock()
		if h.waiting > 0 || h.have {
			// Another wait began meanwhile (it gives the place up), or
			// another resume took one first.
			<-s.ch
		} else {
			h.have = true
		}
		h.mu.Unlock()
	}
}

// parentCaps hold each parent's max_parallel across all its children's
// runs: a child's first run also holds its parent's slot in the tree that
// spawned it, but a later run (an answer, a resume) is built in a tree of
// its own, so only the engine sees all of them.
type parentCaps struct {
	mu sync.Mutex
	m  map[string]*parentCap
}

type parentCap struct {
	ch    chan struct{}
	users int
}

// take waits for one of parent's n places (queued first if it must).
func (p *parentCaps) take(ctx context.Context, parent string, n int, queued func()) (func(), error) {
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]*parentCap{}
	}
	c := p.m[parent]
	if c == nil {
		c = &parentCap{ch: make(chan struct{}, n)}
		p.m[parent] = c
	}
	c.users++
	p.mu.Unlock()
	done := func() {
		p.mu.Lock()
		if c.users--; c.users == 0 {
			delete(p.m, parent)
		}
		p.mu.Unlock()
	}
	if err := agent.Take(ctx, c.ch, queued); err != nil {
		done()
		return nil, err
	}
	return func() { <-c.ch; done() }, nil
}

// takeParentSlot waits for a place among the running children of ld's
// parent (its tree's max_parallel).
func (e *Engine) takeParentSlot(ctx context.Context, ld loaded) (func(), error) {
	in := ld.Instance
	root, err := e.st.GetInstance(ctx, in.Root)
	if err != nil {
		return nil, err
	}
	// Returned, not left to fail the run later: a cap read from a spec
	// that does not decode would be the default, not the tree's.
	spec, err := specOf(root)
	if err != nil {
		return nil, fmt.Errorf("the cap on the children of %s (max_parallel): %w", in.Parent, err)
	}
	n := spec.MaxParallel
	if n <= 0 {
		n = agent.DefaultMaxParallel
	}
	return e.parents.take(ctx, in.Parent, n, e.queued(in.ID, in.Parent, "a slot (max_parallel)"))
}

// takeSlot waits for a place for a run of instance id under MaxRuns.
func (e *Engine) takeSlot(ctx context.Context, id string) (context.Context, func(), error) {
	return e.slots.take(ctx, e.queued(id, "", "a place under the engine's cap (MaxRuns)"))
}

// queued announces that instance id waits for why (EventQueued).
func (e *Engine) queued(id, parent, why string) func() {
	return func() {
		if h := e.opts.OnEvent; h != nil {
			h(agent.Event{Kind: agent.EventQueued, Instance: id, Parent: parent, Waiting: why})
		}
	}
}

// changed wakes everyone waiting for an instance of this engine to move
// (subagent_wait, a parent holding for its background children). A nil
// engine (a Control without one) has nobody waiting.
func (e *Engine) changed() {
	if e == nil {
		return
	}
	e.chMu.Lock()
	close(e.ch)
	e.ch = make(chan struct{})
	e.chMu.Unlock()
}

func (e *Engine) changes() <-chan struct{} {
	e.chMu.Lock()
	defer e.chMu.Unlock()
	return e.ch
}

// await blocks until something changes, another process may have changed
// something (PollInterval), ctx ends or timeout fires.
func (e *Engine) await(ctx context.Context, timeout <-chan struct{}) error {
	return e.awaitOn(ctx, e.changes(), timeout)
}

// awaitOn is await on a changes channel taken earlier. A run that waits
// (for children, for mail) does no work meanwhile: it gives its place
// under the engine's cap up, and a step of it is not one a draining
// engine waits for.
func (e *Engine) awaitOn(ctx context.Context, changed <-chan struct{}, timeout <-chan struct{}) error {
	defer e.slots.yield(ctx)()
	if ctx.Value(inStepKey{}) != nil {
		defer e.gate.park()()
	}
	poll := time.NewTimer(e.opts.PollInterval)
	defer poll.Stop()
	select {
	case <-changed:
	case <-poll.C:
	case <-timeout:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// hold is a run's loop.Config.Hold: when its model has answered, a step
// waits for the background children it still has running and hands their
// reports to the model; with none, the run completes.
func (e *Engine) hold(wf dbos.Context, id, label string) func(context.Context, int) ([]string, error) {
	return func(ctx context.Context, turn int) ([]string, error) {
		got, err := e.mailStep(wf, ctx, label, fmt.Sprintf("turn-%d/hold", turn), func(c context.Context) (inboxed, error) {
			for {
				// Who is at work first, then the mail: a child that had
				// settled by the first read had posted its relay by the
				// second, so no relay falls between the two.
				busy, err := e.childrenAtWork(c, id)
				if err != nil {
					return inboxed{}, err
				}
				mail, err := e.st.Pending(c, id)
				if err != nil {
					return inboxed{}, err
				}
				if in := readMail(mail, false); len(in.Notes) > 0 || !busy {
					return in, nil
				}
				if err := e.await(c, nil); err != nil {
					return inboxed{}, err
				}
			}
		})
		return got.Notes, err
	}
}

// childrenAtWork reports whether a child of id is still at work (not
// settled).
func (e *Engine) childrenAtWork(ctx context.Context, id string) (bool, error) {
	kids, err := e.st.ListInstances(ctx, store.Filter{Parent: id})
	if err != nil {
		return false, err
	}
	for _, k := range kids {
		if done, err := e.settled(ctx, k); err != nil || !done {
			return !done, err
		}
	}
	return false, nil
}

// settled reports whether a child needs nothing more of its own to reach
// its parent: it asks or is paused, or it ended and no run of it is open.
// Its relay is in its parent's mailbox by then: a run posts it before it
// ends (childEnded), and an end no run records (failRun before a run
// started, cancelNow) is written with it, in one transaction (endRelayed),
// so no moment, crash or takeover shows the end without it. Not instead
// "ended with no relay in the mailbox is pending, read it from the
// record": nothing tells such a child from one whose spawn call took its
// end first-hand (no relay owed), and a process dying between an end and
// a post of its own would leave the relay owed for ever.
func (e *Engine) settled(ctx context.Context, in *instance.Record) (bool, error) {
	switch {
	case in.State == instance.Asking || in.State == instance.Paused:
		return true, nil
	case !in.State.Terminal():
		return false, nil
	}
	run, err := openRun(ctx, e.st, in.ID)
	return err == nil && run == 0, err
}

// openRun is the id of instance id's last run while it has not ended, 0
// once it has (or when there is none).
func openRun(ctx context.Context, st *store.Store, id string) (int64, error) {
	runs, err := st.Runs(ctx, id)
	if n := len(runs); err != nil || n == 0 || !runs[n-1].EndedAt.IsZero() {
		return 0, err
	}
	return runs[len(runs)-1].ID, nil
}

// child returns parent's child id, or an error the parent model reads.
func (e *Engine) child(ctx context.Context, parent, id string) (*instance.Record, error) {
	in, err := e.st.GetInstance(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && in.Parent != parent {
		return nil, fmt.Errorf("no subagent %s of yours (subagent_list lists them)", id)
	}
	return in, err
}

func (e *Engine) control() Control { return Control{Store: e.st, Engine: e} }

// status is what a parent learns of a child: its question while asking,
// its relay once ended.
func (e *Engine) status(ctx context.Context, in *instance.Record) (agent.Status, error) {
	s := agent.Status{ID: in.ID, Type: in.Type, State: in.State, Turns: in.Turns, ToolCalls: in.ToolCalls, Usage: in.Usage}
	switch {
	case in.State == instance.Asking:
		var err error
		if s.Question, err = question(ctx, e.st, in.ID); err != nil {
			return s, err
		}
		if s.Approval, _, err = openApproval(ctx, e.st, in.ID); err != nil {
			return s, err
		}
	case in.State.Terminal():
		s.Relay, _ = recordedEnd(in).Relay.ToolResult()
	}
	return s, nil
}

// manager is the engine as agent.Manager: parents' hold on their
// children.
type manager struct{ e *Engine }

// Status implements agent.Manager.
func (m manager) Status(ctx context.Context, parent, id string) (agent.Status, error) {
	in, err := m.e.child(ctx, parent, id)
	if err != nil {
		return agent.Status{}, err
	}
	return m.e.status(ctx, in)
}

// List implements agent.Manager: parent's children, without their relays.
func (m manager) List(ctx context.Context, parent string) ([]agent.Status, error) {
	kids, err := m.e.st.ListInstances(ctx, store.Filter{Parent: parent})
	if err != nil {
		return nil, err
	}
	out := make([]agent.Status, 0, len(kids))
	for _, in := range kids {
		s, err := m.e.status(ctx, in)
		if err != nil {
			return nil, err
		}
		s.Relay = ""
		out = append(out, s)
	}
	return out, nil
}

// Wait implements agent.Manager. A child is done waiting for when it has
// ended or asks (or was paused: it needs its parent either way). The
// relays it returns count as delivered: they do not come again at the
// parent's next turn. It reports from the records, so a wait run again
// after a crash reports the same.
func (m manager) Wait(ctx context.Context, parent string, ids []string, all bool, timeout time.Duration) ([]agent.Status, error) {
	ids = slices.Compact(slices.Clone(ids))
	for _, id := range ids {
		if _, err := m.e.child(ctx, parent, id); err != nil {
			return nil, err
		}
	}
	expired := make(chan struct{})
	t := m.e.opts.Clock.AfterFunc(timeout, func() { close(expired) })
	defer t.Stop()
	for {
		out := make([]agent.Status, 0, len(ids))
		ready := 0
		for _, id := range ids {
			in, err := m.e.st.GetInstance(ctx, id)
			if err != nil {
				return nil, err
			}
			s, err := m.e.status(ctx, in)
			if err != nil {
				return nil, err
			}
			if done, err := m.e.settled(ctx, in); err != nil {
				return nil, err
			} else if done {
				ready++
			}
			out = append(out, s)
		}
		select {
		case <-expired:
			ready = len(ids) // report what there is
		default:
		}
		if ready == len(ids) || !all && ready > 0 {
			// What it reports is delivered: relays, and notices of the
			// questions it shows (a child that asks has posted no relay).
			// Nothing else.
			for _, s := range out {
				if s.Relay == "" && s.Question == "" {
					continue
				}
				if err := consumeFrom(ctx, m.e.st, s.ID); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		if err := m.e.await(ctx, expired); err != nil {
			return nil, err
		}
	}
}

// Send implements agent.Manager.
func (m manager) Send(ctx context.Context, parent, id, text string) error {
	key := ""
	if call, ok := loop.CallFrom(ctx); ok {
		key = "send-" + call.ID
	}
	return m.act(ctx, parent, id, func(c Control) error { return c.send(ctx, id, parent, text, key) })
}

// Pause implements agent.Manager.
func (m manager) Pause(ctx context.Context, parent, id string) error {
	return m.act(ctx, parent, id, func(c Control) error { return c.Pause(ctx, id) })
}

// Resume implements agent.Manager.
func (m manager) Resume(ctx context.Context, parent, id string) error {
	return m.act(ctx, parent, id, func(c Control) error { return c.Resume(ctx, id) })
}

// Cancel implements agent.Manager.
func (m manager) Cancel(ctx context.Context, parent, id string) error {
	return m.act(ctx, parent, id, func(c Control) error { return c.Cancel(ctx, id) })
}

// Answer implements agent.Manager.
func (m manager) Answer(ctx context.Context, parent, id, answer string) error {
	return m.act(ctx, parent, id, func(c Control) error { return c.answerAs(ctx, id, parent, answer) })
}

// act does a control on parent's child id. The control wakes this
// engine's waiters itself when it moves what they wait for (restart,
// Cancel).
func (m manager) act(ctx context.Context, parent, id string, do func(Control) error) error {
	if _, err := m.e.child(ctx, parent, id); err != nil {
		return err
	}
	return do(m.e.control())
}
