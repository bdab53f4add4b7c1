package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
)

// Mail kinds. Mail waits in an instance's mailbox until a run of that
// instance takes it: at a turn boundary (notes, pause, cancel) or when the
// next run starts (the answer, the pending results, notes).
const (
	MailQuestion = "question" // the instance's own open question (ask_parent)
	MailAnswer   = "answer"   // the answer to it
	MailNote     = "note"     // a message the model sees at its next turn
	MailPause    = "pause"
	MailCancel   = "cancel"
	mailPending  = "pending" // a suspended run's unsent user message (JSON)
)

// cancelIn reports whether mail holds a cancel.
func cancelIn(mail []store.Mail) bool {
	return slices.ContainsFunc(mail, func(m store.Mail) bool { return m.Kind == MailCancel })
}

// Operator is the sender of mail from a person (the CLI, the API).
const Operator = "operator"

// errCancelled is the cause a run's context is cancelled with when its
// instance is cancelled while this engine runs it.
var errCancelled = errors.New("cancelled by request")

// Control acts on instances from any process: it checks the state, posts
// mail, and moves states the store can move alone. A run that must start
// (a resume, an answer) is started by Engine when it is set, and queued
// for a worker otherwise, through URL (the store's database URL; without
// it, on SQLite, queueing closes the store).
//
// A running instance is reached through its mailbox: it pauses, cancels or
// reads a note at its next turn boundary. When Engine runs the instance,
// a cancel is immediate (its context is cancelled), children included.
type Control struct {
	Store  *store.Store
	URL    string
	Engine *Engine
}

// Pause stops an instance: a running one at its next turn boundary, an
// asking one at once (its answer will wait for the resume).
func (c Control) Pause(ctx context.Context, id string) error {
	in, err := c.instance(ctx, id, "paused", func(s instance.State) bool { return s == instance.Running || s == instance.Asking })
	if err != nil {
		return err
	}
	if in.State == instance.Running {
		_, err = c.Store.Post(ctx, store.Mail{InstanceID: id, Sender: Operator, Kind: MailPause})
		return err
	}
	return c.Store.Transition(ctx, id, instance.Paused, "paused while asking")
}

// Resume starts the next run of a paused instance.
func (c Control) Resume(ctx context.Context, id string) error {
	in, err := c.instance(ctx, id, "resumed", func(s instance.State) bool { return s == instance.Paused })
	if err != nil {
		return err
	}
	return c.restart(ctx, in, "resumed")
}

// instance reads instance id for a control its state must allow (ok),
// refused as what otherwise.
func (c Control) instance(ctx context.Context, id, what string, ok func(instance.State) bool) (*instance.Record, error) {
	in, err := c.Store.GetInstance(ctx, id)
	if err == nil && !ok(in.State) {
		err = refused(in, what)
	}
	return in, err
}

// restart moves a waiting instance to running at once (so nobody sees it
// waiting once it is answered or resumed) and starts its next run; if the
// run cannot start, it waits as before.
func (c Control) restart(ctx context.Context, in *instance.Record, why string) error {
	if err := c.Store.Transition(ctx, in.ID, instance.Running, why); err != nil {
		return err
	}
	if err := c.nextRun(ctx, in); err != nil {
		if back := c.Store.Transition(context.WithoutCancel(ctx), in.ID, in.State, "its next run did not start"); back != nil {
			return errors.Join(err, back)
		}
		return err
	}
	c.Engine.changed()
	return nil
}

// Cancel ends an instance as cancelled, keeping what it did: a running one
// at its next turn boundary (at once when Engine runs it), with its partial
// answer; any other active one now, its active descendants with it.
func (c Control) Cancel(ctx context.Context, id string) error {
	in, err := c.instance(ctx, id, "cancelled", instance.State.Active)
	if err != nil {
		return err
	}
	active, err := c.Store.ListInstances(ctx, store.Filter{Root: in.Root, Active: true})
	if err != nil {
		return err
	}
	tree := subtree(active, id)
	// Every one is told first, then each is stopped, the deepest first: a
	// cancelled child's partial relay is what its parent's spawn call
	// returns, and the parent, told already, stops at the turn boundary
	// that follows instead of answering it with another call. Told before
	// it is stopped, a run that starts it meanwhile finds the cancel at its
	// first turn boundary.
	for _, t := range tree {
		if _, err := c.Store.Post(ctx, store.Mail{InstanceID: t.ID, Sender: Operator, Kind: MailCancel, Key: "cancel"}); err != nil {
			return err
		}
	}
	slices.SortStableFunc(tree, func(a, b *instance.Record) int { return b.Depth - a.Depth })
	for _, t := range tree {
		if err := c.cancelOne(ctx, t); err != nil {
			return err
		}
	}
	c.Engine.changed()
	return nil
}

// cancelOne cancels one instance told already (its cancel mail is
// posted): a running one through its mailbox and, when this engine runs
// it, its context; any other active one now.
func (c Control) cancelOne(ctx context.Context, in *instance.Record) error {
	for range 3 {
		if in.State == instance.Running {
			// Its run stops at its next turn boundary on the mail (at once
			// when this engine runs it), unless it stopped to wait just
			// before the mail landed.
			if c.Engine != nil {
				c.Engine.cancelRun(in.ID)
			}
			now, err := c.Store.GetInstance(ctx, in.ID)
			if err != nil || now.State == instance.Running || now.State.Terminal() {
				return err
			}
			in = now
		}
		err := c.cancelNow(ctx, in, "cancelled by request while "+string(in.State))
		if te := (*instance.TransitionError)(nil); !errors.As(err, &te) {
			return err
		}
		// It moved meanwhile: a run started it (created, answered or
		// resumed), or it went between two states no run carries (asking
		// to paused). It is cancelled as it is now: giving up would leave
		// the mail above to cancel a later run, after the request was
		// said to have failed.
		if in, err = c.Store.GetInstance(ctx, in.ID); err != nil {
			return err
		}
	}
	return fmt.Errorf("cancel %s: its state kept changing; try again", in.ID)
}

// cancelNow ends an instance that no run carries as cancelled, keeping
// what it recorded, with its relay (endRelayed). One that ended otherwise
// meanwhile is left to whoever ended it, who relays that end.
func (c Control) cancelNow(ctx context.Context, in *instance.Record, why string) error {
	err := c.endRelayed(ctx, in, store.Result{State: instance.Cancelled, From: in.State, StopReason: string(loop.StopCancelled),
		Incomplete: true, Report: in.Report, Error: why, Usage: in.Usage, Cost: in.Cost, Turns: in.Turns,
		ToolCalls: in.ToolCalls}, false)
	if errors.Is(err, instance.ErrTerminal) {
		return nil
	}
	return err
}

// endRelayed writes an end of in that no run of it records, as r says: a
// child's relay, made from its record as it ended, is posted in the end's
// transaction (see settled for why), unless a spawn call waits for the end
// (waited) and takes it first-hand.
func (c Control) endRelayed(ctx context.Context, in *instance.Record, r store.Result, waited bool) error {
	if in.Parent != "" && !waited {
		r.Tell = func(ended *instance.Record) store.Mail {
			return relayMail(ended.ID, ended.Parent, recordedEnd(ended).Relay)
		}
	}
	err := c.Store.Finish(ctx, in.ID, r)
	if err == nil && c.Engine != nil && c.Engine.opts.endWritten != nil {
		c.Engine.opts.endWritten(in.ID) // a test's hook
	}
	return err
}

// subtree is id and those below it in tree; the line up from one stops
// at an instance tree does not hold.
func subtree(tree []*instance.Record, id string) []*instance.Record {
	parent := map[string]string{}
	for _, t := range tree {
		parent[t.ID] = t.Parent
	}
	var out []*instance.Record
	for _, t := range tree {
		for at, ok := t.ID, true; ok; at, ok = parent[at] {
			if at == id {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// Send leaves a note for an active instance: the model reads it at its
// next turn (or when its next run starts).
func (c Control) Send(ctx context.Context, id, from, text string) error {
	return c.send(ctx, id, from, text, "")
}

// send posts the note, once per key when key is set (a tool call run
// again after a crash sends it once).
func (c Control) send(ctx context.Context, id, from, text, key string) error {
	if text == "" {
		return errors.New("the message is empty")
	}
	if _, err := c.instance(ctx, id, "sent a message", instance.State.Active); err != nil {
		return err
	}
	_, err := c.Store.Post(ctx, store.Mail{InstanceID: id, Sender: from, Kind: MailNote, Body: text, Key: key})
	return err
}

// Answer answers an instance's open question. An asking instance's next
// run starts with the answer as its ask_parent result; a paused one that
// had asked gets it when resumed. A question is answered once.
func (c Control) Answer(ctx context.Context, id, text string) error {
	return c.answerAs(ctx, id, Operator, text)
}

// answerAs answers for sender: the operator, or the instance's parent.
func (c Control) answerAs(ctx context.Context, id, sender, text string) error {
	if text == "" {
		return errors.New("the answer is empty")
	}
	in, err := c.Store.GetInstance(ctx, id)
	if err != nil {
		return err
	}
	q, err := openQuestion(ctx, c.Store, id)
	if err != nil {
		return err
	}
	if q == nil || (in.State != instance.Asking && in.State != instance.Paused) {
		return refused(in, "answered (it has no open question)")
	}
	if _, err := c.Store.Post(ctx, store.Mail{InstanceID: id, Sender: sender, Kind: MailAnswer, Body: text,
		Key: fmt.Sprintf("answer-%d", q.ID)}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("%w: instance %s: its question was answered already", store.ErrConflict, id)
		}
		return err
	}
	// The parent's notice of the question is done with.
	if err := consumeFrom(ctx, c.Store, id); err != nil {
		return err
	}
	if in.State == instance.Paused {
		return nil
	}
	return c.restart(ctx, in, "answered")
}

// Question returns an instance's open question, or nil.
func (c Control) Question(ctx context.Context, id string) (*store.Mail, error) {
	return openQuestion(ctx, c.Store, id)
}

// question is instance id's open question, "" when it has none.
func question(ctx context.Context, st *store.Store, id string) (string, error) {
	q, err := openQuestion(ctx, st, id)
	if err != nil {
		return "", err
	}
	if q == nil {
		// A call waiting for approval is its question, in words.
		text, _, err := approvalNotice(ctx, st, id)
		return text, err
	}
	return q.Body, nil
}

func openQuestion(ctx context.Context, st *store.Store, id string) (*store.Mail, error) {
	mail, err := st.Pending(ctx, id)
	if err != nil {
		return nil, err
	}
	for i := len(mail) - 1; i >= 0; i-- {
		if mail[i].Kind == MailQuestion {
			return &mail[i], nil
		}
	}
	return nil, nil
}

// refused is the error for a control the instance's state does not allow;
// it wraps instance.ErrIllegalTransition.
func refused(in *instance.Record, what string) error {
	return fmt.Errorf("%w: instance %s is %s, so it cannot be %s", instance.ErrIllegalTransition, in.ID, in.State, what)
}

// nextRun starts (Engine) or queues the instance's next run. Its workflow
// id is numbered after the runs recorded, so two resumes racing name the
// same workflow and DBOS starts it once.
func (c Control) nextRun(ctx context.Context, in *instance.Record) error {
	id := in.ID
	runs, err := c.Store.Runs(ctx, id)
	if err != nil {
		return err
	}
	wf, name := runWorkflowID(id, len(runs)+1), WorkflowName
	if in.Parent != "" {
		name = ChildWorkflowName
	}
	if c.Engine == nil {
		return enqueue(ctx, c.Store, c.URL, id, wf, name)
	}
	if in.Parent != "" {
		_, err = dbos.RunWorkflow(c.Engine.dbos, c.Engine.runChild, id, dbos.WithWorkflowID(wf))
	} else {
		err = c.Engine.startRoot(id, wf)
	}
	if err != nil {
		return fmt.Errorf("start the next run of %s: %w", id, err)
	}
	return nil
}

// runWorkflowID names run n of an instance's workflow.
func runWorkflowID(id string, n int) string {
	if n <= 1 {
		return workflowID(id)
	}
	return fmt.Sprintf("%s-%d", workflowID(id), n)
}

// Ask implements agent.Questions: the question goes into the asking
// instance's own mailbox, where the answer's poster finds it.
func (e *Engine) Ask(ctx context.Context, id, callID, question string) error {
	_, err := e.st.Post(context.WithoutCancel(ctx), store.Mail{InstanceID: id, Sender: id, Kind: MailQuestion,
		Body: question, Key: "ask-" + callID})
	return err
}

// inboxed is what a turn boundary found in the mailbox (a checkpointed
// step's output, so a replay finds the same).
type inboxed struct {
	Notes []string        `json:"notes,omitempty"`
	Stop  loop.StopReason `json:"stop,omitempty"`
	Mail  []int64         `json:"mail,omitempty"`
}

// inbox is a root's loop.Config.Inbox: a step per turn boundary reads its
// mailbox. What it read is consumed after the step is checkpointed: from
// then on the checkpoint holds it.
func (e *Engine) inbox(wf dbos.Context, id, label string) func(context.Context, int) ([]string, loop.StopReason, error) {
	return func(ctx context.Context, turn int) ([]string, loop.StopReason, error) {
		got, err := e.mailStep(wf, ctx, label, fmt.Sprintf("turn-%d/inbox", turn), func(c context.Context) (inboxed, error) {
			mail, err := e.st.Pending(c, id)
			return readMail(mail, true), err
		})
		return got.Notes, got.Stop, err
	}
}

// mailStep runs read as the named step of a turn boundary (an inbox, a
// hold), then marks the mail it took delivered: from then on the
// checkpoint holds it, and a replay finds the same.
func (e *Engine) mailStep(wf dbos.Context, ctx context.Context, label, name string, read func(context.Context) (inboxed, error)) (inboxed, error) {
	got, err := runStep(e, dbos.From(wf, ctx), label, name, read)
	if err != nil {
		return inboxed{}, err
	}
	return got, consume(ctx, e.st, got.Mail)
}

// readMail is what a turn boundary takes from mail: always its children's
// relays (as a note that says what they are) and notices of their
// questions; at a boundary between turns (boundary), also the notes and a
// pause or cancel, which a hold (the model has answered) leaves for the
// inbox.
func readMail(mail []store.Mail, boundary bool) inboxed {
	var in inboxed
	for _, m := range mail {
		switch {
		case m.Kind == mailRelay:
			in.Notes = append(in.Notes, "[deputy] A subagent you started in the background has ended; its report:\n\n"+m.Body)
		case m.Kind == mailAsked:
			in.Notes = append(in.Notes, m.Body)
		case !boundary:
			continue
		case m.Kind == MailNote:
			in.Notes = append(in.Notes, noteText(m))
		case m.Kind == MailCancel:
			in.Stop = loop.StopCancelled
		case m.Kind == MailPause:
			if in.Stop == "" {
				in.Stop = loop.StopSuspended
			}
		default:
			continue
		}
		in.Mail = append(in.Mail, m.ID)
	}
	return in
}

func noteText(m store.Mail) string {
	from := "your parent"
	if m.Sender == Operator {
		from = "the operator"
	}
	return "[deputy] A message from " + from + ": " + m.Body
}

// continuation is the user message a run starts with when the transcript
// it continues ends with the model's turn: the suspended run's pending
// results (or, after a crash cut the calls, Interrupted for each), with
// the answer in ask_parent's place, and the notes that came meanwhile. A
// transcript that ends with a user message gets only the notes, as a
// message of their own. It returns the mail the message delivers. A
// child's answer from the operator (deputy answer --as-parent) says so.
func continuation(in *instance.Record, msgs []llm.Message, mail []store.Mail) (*llm.Message, []int64) {
	var pending *llm.Message
	var answer *store.Mail
	var notes []llm.Block
	var ids []int64
	for _, m := range mail {
		switch m.Kind {
		case mailPending:
			var p llm.Message
			if json.Unmarshal([]byte(m.Body), &p) == nil {
				pending = &p
			}
		case MailAnswer:
			answer = &m
		case MailNote:
			notes = append(notes, llm.Text(noteText(m)))
		case MailQuestion, MailPause, MailApproval, MailDecision:
			// Superseded by this run: the question is answered (or asked
			// again), the pause is over.
		default:
			continue
		}
		ids = append(ids, m.ID)
	}
	last := msgs[len(msgs)-1]
	uses := last.ToolUses()
	if last.Role == llm.User || len(uses) == 0 {
		if len(notes) == 0 {
			return nil, ids
		}
		return &llm.Message{Role: llm.User, Content: notes}, ids
	}
	var content []llm.Block
	if pending != nil {
		content = slices.Clone(pending.Content)
	} else {
		for _, u := range uses {
			content = append(content, llm.ToolResult(u.ID, Interrupted, true))
		}
	}
	for i, b := range content {
		if loop.IsHeld(b) {
			// Resumed with no decision on it (paused while it waited, then
			// resumed): it did not run.
			content[i] = llm.ToolResult(b.ToolUseID, "[deputy] Not run: it waited for approval, and you were "+
				"resumed before anyone decided. Call it again if you still need it.", true)
			continue
		}
		if b.Type != llm.TypeToolResult || b.Text != agent.Waiting {
			continue
		}
		if answer != nil {
			text := answer.Body
			if in.Parent != "" && answer.Sender == Operator {
				// A person answered in its parent's place (--as-parent).
				text = "[deputy] Answered by the operator, speaking for your parent: " + text
			}
			content[i] = llm.ToolResult(b.ToolUseID, text, false)
		} else {
			content[i] = llm.ToolResult(b.ToolUseID, "[deputy] No answer came: you were paused, then resumed. "+
				"Ask again if you still need to know, or go on without it.", true)
		}
	}
	return &llm.Message{Role: llm.User, Content: append(content, notes...)}, ids
}
