package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
)

// ChildRunner runs children's work where it is checkpointed (see
// Runner.Children). RunChild calls work at most once, with the step runner
// the child's loop and its report use, and returns what work returned;
// for a child that ended in an earlier execution of its parent's run, it
// returns that end without calling work. id is stable across executions.
type ChildRunner interface {
	RunChild(ctx context.Context, id string, work func(context.Context, ChildEnv) ChildEnd) (ChildEnd, error)
	// StartChild is RunChild without the wait, for a background child:
	// work runs after StartChild returns, and its end goes to the
	// parent's mailbox.
	StartChild(ctx context.Context, id string, work func(context.Context, ChildEnv) ChildEnd) error
}

// ChildEnv is what a ChildRunner gives a child's work: how its steps are
// executed, its inbox (loop.Config.Inbox), and the time its earlier runs
// spent running, which its wall-time budget has used up. Hold is its
// loop.Config.Hold: it waits for the child's own background children.
type ChildEnv struct {
	Steps loop.Steps
	Inbox loop.InboxFunc
	Hold  loop.HoldFunc
	Spent time.Duration
	// Skip: the child's run is carried elsewhere (an earlier execution's
	// workflow); work only lets go of what it holds in this tree.
	Skip bool
	// Closing, when set, reports whether the process is shutting down: a
	// run cut by that has not ended (the next execution resumes it), so
	// its fence is let go, not ended.
	Closing func() bool
	// Resume, when set, continues a run suspended on held calls
	// (loop.Config.Resume).
	Resume *loop.Resume
}

// ChildEnd is how a child ended: the relay its parent gets (usage and cost
// of its whole subtree) and its own record.
type ChildEnd struct {
	Relay    Relay           `json:"relay"`
	Instance instance.Record `json:"instance"`
	// Pending is a suspended run's unsent user message (loop.Result).
	Pending *llm.Message `json:"pending,omitempty"`
}

// runChild lists a prepared child, waits for a slot (and for its turn to
// write, if it writes), runs it, and returns its relay. It never fails: a
// child that could not run relays that as a failure.
func (tr *tree) runChild(ctx context.Context, c *node, msgs []llm.Message) Relay {
	parent, n := tr.list(ctx, c, msgs)
	return tr.runListed(ctx, parent, n, msgs)
}

// runListed is runChild for a child listed already (n, under parent).
func (tr *tree) runListed(ctx context.Context, parent, n *node, msgs []llm.Message) Relay {
	defer tr.stopMCP(n) // its run has ended, or never started
	release, err := tr.acquire(ctx, parent, n)
	if err != nil {
		res := &loop.Result{StopReason: loop.StopCancelled}
		return tr.relay(n, res, "", err).Relay
	}
	defer release()

	work := func(ctx context.Context, env ChildEnv) ChildEnd { return tr.work(ctx, n, msgs, env) }
	if tr.r.Children == nil {
		return work(ctx, ChildEnv{}).Relay
	}
	end, err := tr.r.Children.RunChild(ctx, n.inst.ID, work)
	switch {
	case tr.ended(n) && err == nil:
		return end.Relay
	case tr.ended(n):
		// Its work ran here, but what it returned was lost on the way.
		return tr.lastRelay(n, err)
	case err != nil:
		return tr.relay(n, &loop.Result{StopReason: loop.StopStepError}, "", err).Relay
	}
	tr.adopt(n, end)
	return end.Relay
}

// startChild lists a prepared child and starts it in the background: it
// takes its slot (and turn to write) now, holds them until it ends, and
// runs on without the spawn call, which returns its id.
func (tr *tree) startChild(ctx context.Context, c *node, msgs []llm.Message) (string, error) {
	if tr.r.Children == nil || tr.r.Manager == nil {
		return "", errors.New("spawn refused: background subagents need deputy's managed runtime; spawn it without background")
	}
	parent, n := tr.list(ctx, c, msgs)
	release, err := tr.acquire(ctx, parent, n)
	if err != nil {
		tr.stopMCP(n)
		tr.relay(n, &loop.Result{StopReason: loop.StopCancelled}, "", err)
		return "", fmt.Errorf("spawn failed: %w", err)
	}
	work := func(ctx context.Context, env ChildEnv) ChildEnd {
		defer release()
		return tr.work(ctx, n, msgs, env)
	}
	if err := tr.r.Children.StartChild(context.WithoutCancel(ctx), n.inst.ID, work); err != nil {
		release()
		tr.stopMCP(n)
		tr.relay(n, &loop.Result{StopReason: loop.StopStepError}, "", err)
		return "", fmt.Errorf("spawn failed: %w", err)
	}
	return fmt.Sprintf("subagent %s (%s): started in the background. It works while you go on; subagent_wait "+
		"collects its report (which also reaches you by itself once it ends), subagent_status tells how it is doing.",
		n.inst.ID, n.inst.Type), nil
}

// work runs a child's loop in env and relays how it ended. A run that
// stopped to wait (it asked, or was paused) is not an end: its ChildEnd
// says asking or paused (StateOf), and its usage so far rolls up like an
// end's.
func (tr *tree) work(ctx context.Context, n *node, msgs []llm.Message, env ChildEnv) ChildEnd {
	// Its MCP servers stop when this run does, however it ends: a child
	// that asked or was paused starts them again in its next run.
	defer tr.stopMCP(n)
	if env.Skip {
		return ChildEnd{}
	}
	if env.Steps != nil {
		n.cfg.Steps = env.Steps
	}
	n.cfg.Inbox, n.cfg.Hold, n.cfg.Resume = env.Inbox, env.Hold, env.Resume
	if l := &n.cfg.Limits; env.Spent > 0 && l.WallTime > 0 {
		l.WallTime = max(l.WallTime-env.Spent, time.Nanosecond)
		if l.SoftWallTime > 0 {
			l.SoftWallTime = max(l.SoftWallTime-env.Spent, time.Nanosecond)
		}
	}
	if err := tr.startMCP(ctx, n); err != nil { // a later run's (the first started them at the spawn)
		res := &loop.Result{Messages: msgs, StopReason: loop.StopStepError}
		return tr.relay(n, res, "", err)
	}
	if err := tr.enterFence(ctx, n); err != nil {
		res := &loop.Result{Messages: msgs, StopReason: loop.StopStepError}
		return tr.relay(n, res, "", err)
	}
	res, runErr := tr.run(ctx, n, msgs)
	if res.StopReason == loop.StopSuspended || env.Closing != nil && env.Closing() {
		tr.releaseFence(ctx, n) // it goes on in a later run: its work stays
	}
	if res.StopReason == loop.StopSuspended {
		state, _ := endState(res, nil)
		tr.end(n, res, state, "", nil)
		tr.mu.Lock()
		in := n.inst
		tr.mu.Unlock()
		return ChildEnd{Instance: in, Pending: res.Pending, Relay: RelayOf(&in)}
	}
	report := tr.report(ctx, n, res)
	if n.fence == nil {
		// Released above (the process closes): nothing to keep or drop.
	} else if err := tr.leaveFence(ctx, n, res, runErr); err != nil {
		res.StopReason, runErr = loop.StopStepError, err
	}
	if n.fence != nil && n.fence.Note != "" {
		report = "[deputy] " + n.fence.Note + "\n\n" + report
	}
	return tr.relay(n, res, report, runErr)
}

// list adds a prepared child under the instance whose spawn call ctx
// belongs to, placed and named after that call.
func (tr *tree) list(ctx context.Context, c *node, msgs []llm.Message) (parent, n *node) {
	parent, n = tr.place(ctx, c)
	tr.emit(n, Event{Kind: EventCreated, Spawned: n.spawned(msgs)})
	return parent, n
}

// place adds a prepared child to the tree as list does, announcing
// nothing.
func (tr *tree) place(ctx context.Context, c *node) (parent, n *node) {
	parent = nodeFrom(ctx)
	c.order = append(slices.Clip(parent.order), 0, 0)
	call, _ := loop.CallFrom(ctx)
	if call != nil {
		c.order[len(c.order)-2], c.order[len(c.order)-1] = call.Turn, call.Index
	}
	c.inst.ID = tr.childID(parent, call, c.sub)
	return parent, tr.add(parent, c)
}

// childID names a child. Under a ChildRunner the name comes from its parent
// and the spawn call (whose id the model chose, and a replay repeats), so
// a parent's run replayed after a crash names, and finds, the child it
// started the first time.
func (tr *tree) childID(parent *node, call *loop.Call, sub string) string {
	if tr.r.NewID != nil || tr.r.Children == nil || call == nil {
		return tr.newID()
	}
	key := fmt.Appendf(nil, "%s/%d/%d/%s", parent.inst.ID, call.Turn, call.Index, call.ID)
	if sub != "" {
		key = fmt.Appendf(key, "/%s", sub) // one of a fan-out's tasks
	}
	sum := sha256.Sum256(key)
	return "i-" + hex.EncodeToString(sum[:6])
}

// ended reports whether n has its end recorded.
func (tr *tree) ended(n *node) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return n.inst.State != instance.Running
}

// lastRelay is a failed relay for a child whose end is recorded but whose
// relay did not come back.
func (tr *tree) lastRelay(n *node, err error) Relay {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := RelayOf(&n.inst)
	r.State, r.Incomplete, r.Error = instance.Failed, true, err.Error()
	return r
}

// adopt takes in a child that ended in an earlier execution of its
// parent's run: its record, and what its subtree spent, as if it had ended
// here.
func (tr *tree) adopt(n *node, end ChildEnd) {
	tr.mu.Lock()
	in := end.Instance
	in.ID, in.Parent, in.Depth = n.inst.ID, n.inst.Parent, n.inst.Depth
	n.inst = in
	if p := n.parent; p != nil {
		p.below.Add(end.Relay.Usage)
		if end.Relay.Cost != nil {
			p.belowCost += *end.Relay.Cost
		}
		p.belowOK = p.belowOK && end.Relay.Cost != nil
	}
	tr.mu.Unlock()
	tr.emit(n, Event{Kind: EventEnded, Relay: &end.Relay, Final: &in})
}

// acquire takes a slot among parent's running children and, for a child
// that writes, its turn to write. Waiting ends with ctx.
func (tr *tree) acquire(ctx context.Context, parent, n *node) (release func(), err error) {
	queued := func(why string) { tr.emit(n, Event{Kind: EventQueued, Waiting: why}) }
	// The turn to write comes before the slot, so a writer waiting for
	// its turn never sits on a slot a reader could run in. No deadlock:
	// whoever holds a slot is running.
	var turn chan struct{}
	if n.writes {
		turn = n.writeTurn()
		if err := Take(ctx, turn, func() { queued("its turn to write") }); err != nil {
			return nil, fmt.Errorf("not started while waiting for its turn to write: %w", err)
		}
	}
	if err := Take(ctx, parent.sem, func() { queued("a slot (max_parallel)") }); err != nil {
		if turn != nil {
			<-turn
		}
		return nil, fmt.Errorf("not started: %w", err)
	}
	return func() {
		<-parent.sem
		if turn != nil {
			<-turn
		}
	}, nil
}

// Take puts a token into ch, waiting while it is full unless ctx ends
// (its cause is the error); queued is called first when it has to wait,
// so the caller can say what waits. The tree's slots and turns to write
// are channels' buffers, and so are the durable engine's run slots.
func Take(ctx context.Context, ch chan struct{}, queued func()) error {
	select {
	case ch <- struct{}{}:
		return nil
	default:
	}
	queued()
	select {
	case ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// writeTurn is the token a writing child holds while it runs: its nearest
// writing ancestor's. That ancestor is blocked in a spawn call (this one,
// or the one that started a reading parent in between), so it is not
// writing itself, and the writers below it take turns.
func (n *node) writeTurn() chan struct{} {
	a := n.parent
	for !a.writes && a.parent != nil {
		a = a.parent
	}
	return a.kidsWrite
}

// reportAsk asks a child whose report is over its cap for a shorter one.
const reportAsk = "[deputy] Your report is %d characters; the parent accepts at most %d. Rewrite it within %d " +
	"characters: keep the conclusion, the key facts and what is unverified, drop the rest. Reply with the " +
	"report only."

// report is the child's final text within its cap. A complete child whose
// answer is too long is asked once, in one more model call counted in its
// usage, to shorten it; a summary still too long, or a partial result, is
// cut with a marker.
func (tr *tree) report(ctx context.Context, n *node, res *loop.Result) string {
	capChars := n.reportCap()
	text := res.Answer
	size := utf8.RuneCountInString(text)
	cfg := n.cfg
	question := fmt.Sprintf(reportAsk, size, capChars, capChars)
	maxTokens := max(256, capChars/2)
	if size <= capChars || res.StopReason != loop.StopCompleted || ctx.Err() != nil || !n.canAsk(res, question, maxTokens) {
		out, _ := CapReport(text, capChars)
		return out
	}
	if wall := cfg.Limits.WallTime; wall > 0 {
		// The summary call is still the child's work: its wall time holds.
		var cancel context.CancelFunc
		ctx, cancel = clock.WithTimeout(ctx, tr.clock, wall-tr.clock.Now().Sub(n.start), errors.New("wall-time limit reached"))
		defer cancel()
	}
	cfg.OnEvent = nil
	resp, err := loop.Ask(ctx, cfg, res.Messages, question, res.Turns+1, maxTokens)
	if err == nil {
		res.Usage.Add(resp.Usage)
		if short := resp.Message().Text(); short != "" {
			text = short
		}
	}
	out, _ := CapReport(text, capChars)
	return out
}

// canAsk reports whether the child's budgets leave room for the summary
// call: wall time left, the tree budget not spent, and its own token
// budget able to pay for the whole transcript again plus the answer.
func (n *node) canAsk(res *loop.Result, question string, maxTokens int) bool {
	l, b := n.cfg.Limits, n.cfg.Budget
	if l.WallTime > 0 && n.cfg.Clock.Now().Sub(n.start) >= l.WallTime {
		return false
	}
	if b != nil && b.Spent() {
		return false
	}
	if l.MaxTotalTokens > 0 {
		req := llm.Request{System: n.cfg.System, Tools: n.cfg.Tools.Specs(), Messages: res.Messages}
		need := int64(llm.EstimateRequest(&req) + llm.EstimateTokens(question) + maxTokens)
		if res.Usage.Total()+need > l.MaxTotalTokens {
			return false
		}
	}
	return true
}

func (n *node) reportCap() int {
	if n.def != nil && n.def.ReportCap > 0 {
		return n.def.ReportCap
	}
	return agentdef.DefaultReportCap
}

// relay records how the child ended and tells its parent: its record's
// relay, with what its whole subtree spent.
func (tr *tree) relay(n *node, res *loop.Result, report string, runErr error) ChildEnd {
	state, _ := endState(res, runErr)
	tr.end(n, res, state, report, runErr)
	tr.mu.Lock()
	final := n.inst
	r := RelayOf(&final)
	r.Usage.Add(n.below)
	r.Cost = nil
	if final.Cost != nil && n.belowOK {
		c := *final.Cost + n.belowCost
		r.Cost = &c
	}
	tr.mu.Unlock()
	if r.State == instance.Failed && r.Error == "" {
		r.Error = "stopped: " + r.StopReason
	}
	tr.emit(n, Event{Kind: EventEnded, Relay: &r, Final: &final})
	return ChildEnd{Relay: r, Instance: final}
}
