// Package loop is deputy's agent loop: one turn is one model call plus the
// tool calls it asks for, repeated until the model answers without calling a
// tool or a limit ends the run.
//
// The loop does not know whether it runs durably: every model call and every
// batch of tool calls goes through a Steps implementation, which is a plain
// function call here (Direct) and a checkpointed step in the runtime.
package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// StopReason says why a run ended. Every limit has its own reason, so a
// caller (and a parent agent reading a relay) knows which budget ran out.
type StopReason string

// Why a run ends.
const (
	// StopCompleted: the model answered without calling a tool.
	StopCompleted StopReason = "completed"
	// StopRefusal: the model declined to answer.
	StopRefusal StopReason = "refusal"
	// StopMaxTurns: Limits.MaxTurns model calls were made.
	StopMaxTurns StopReason = "max_turns"
	// StopMaxTotalTokens: Limits.MaxTotalTokens were used.
	StopMaxTotalTokens StopReason = "max_total_tokens"
	// StopMaxToolCalls: Limits.MaxToolCalls tool calls were made.
	StopMaxToolCalls StopReason = "max_tool_calls"
	// StopWallTime: Limits.WallTime passed.
	StopWallTime StopReason = "wall_time"
	// StopMaxOutputTokens: a response was cut at Limits.MaxOutputTokens.
	StopMaxOutputTokens StopReason = "max_output_tokens"
	// StopCancelled: the caller's context was cancelled.
	StopCancelled StopReason = "cancelled"
	// StopModelError: a model call failed (after the provider's retries).
	StopModelError StopReason = "model_error"
	// StopStepError: the step runner failed to run a step (for a durable
	// runner, its store was unavailable); the calls it did not run have
	// error results.
	StopStepError StopReason = "step_error"
	// StopBudget: the shared Budget (a tree of subagents) is spent.
	StopBudget StopReason = "budget"
	// StopSuspended: the run stopped to wait, not to end: a suspending
	// tool (ask_parent) succeeded, or the Inbox said pause. Its last user
	// message is Result.Pending, not in Messages; the next run continues
	// the transcript.
	StopSuspended StopReason = "suspended"
)

// Limits bound one run. A zero field takes its default; the total-token,
// tool-call and wall-time budgets default to none.
type Limits struct {
	MaxTurns       int           // model calls; default 30
	MaxTotalTokens int64         // prompt + output tokens over all calls; see outputCap
	MaxToolCalls   int           // tool calls over the run
	WallTime       time.Duration // from the start of Run; in-flight calls are cancelled
	// SoftWallTime, when set, is when the model is told to wrap up: the
	// next turn carries WrapUp after the tool results and is the last one
	// (tool calls it still makes are answered, not run).
	SoftWallTime    time.Duration
	MaxOutputTokens int // per model call; default 8192
	ToolOutputChars int // per tool result; default 50,000
}

// Defaults for Limits.
const (
	DefaultMaxTurns        = 30
	DefaultMaxOutputTokens = 8192
)

// Config is everything one run needs besides its transcript.
type Config struct {
	Model      llm.Model
	ModelName  string // sent in requests; picks the context window
	System     string
	Tools      *tool.Set
	ToolChoice llm.ToolChoice
	Limits     Limits
	Compaction Compaction
	Clock      clock.Clock // default clock.Real
	Steps      Steps       // default Direct
	// Budget, when set, is drawn from by every model call and stops the run
	// with StopBudget once spent. Several runs may share one.
	Budget Budget
	// OnEvent receives events synchronously, in order, from the goroutine
	// that called Run. It must not block for long: the loop waits for it.
	OnEvent func(Event)
	// Stream asks for a streamed response and emits its deltas as
	// EventModelDelta; without it the model is called with a nil stream
	// callback, which lets a provider built with NonStreaming use the
	// cheaper non-streamed call. It takes effect only with OnEvent.
	Stream bool
	// Inbox, when set, is asked at every turn boundary after the first
	// for what has come for the run; see InboxFunc.
	Inbox InboxFunc
	// Hold, when set, is asked when the model answers without calling a
	// tool, before the run completes; see HoldFunc.
	Hold HoldFunc
	// Gate, when set, is asked before each tool call runs; see GateFunc.
	Gate GateFunc
	// After, when set, is asked after each tool call ran; see AfterFunc.
	After AfterFunc
	// Resume, when set, continues a run suspended on held calls; see
	// Resume.
	Resume *Resume
}

// InboxFunc is asked at every turn boundary after the first (before the
// next model call; turn is the one about to start) for what has come for
// the run: notes the model sees with its next request, after the tool
// results, and a stop (StopSuspended to pause, StopCancelled to cancel)
// that ends the run there.
type InboxFunc func(ctx context.Context, turn int) (notes []string, stop StopReason, err error)

// HoldFunc is asked when the model answers without calling a tool, before
// the run completes (turn is the one its notes would start): notes it
// returns (the reports of background children that were still working)
// go to the model as a new turn instead, so nothing started is left
// unread.
type HoldFunc func(ctx context.Context, turn int) (notes []string, err error)

// Result is what a run produced. Run returns one even when it fails, so
// partial work (the transcript, the usage) is never lost.
type Result struct {
	Messages   []llm.Message // the transcript, compacted if compaction ran
	Answer     string        // the text of the last assistant message
	StopReason StopReason
	Turns      int
	ToolCalls  int
	Usage      llm.Usage
	// Pending is the user message a suspended run stopped before sending:
	// the results of its last turn's calls (a suspending call's result
	// being a placeholder the next run replaces with the answer, a held
	// call's Held) and any notes.
	Pending *llm.Message
}

// Budget is a spending limit shared by several runs, such as every
// instance of a tree of subagents. It must be safe for concurrent use.
type Budget interface {
	// Spend records one model call's usage; model is the request's model
	// name, for budgets kept in money.
	Spend(model string, u llm.Usage)
	// Spent reports whether nothing is left.
	Spent() bool
}

// WrapUp is the message a run gets once its soft wall time has passed.
const WrapUp = "[deputy] Time is almost up. Do not call any more tools: write your final answer now " +
	"from what you have, and say what is unfinished."

// errWallTime is the cancellation cause when the wall-time budget runs out.
var errWallTime = errors.New("wall-time limit reached")

// Run drives the model over msgs until it answers or a limit ends the run.
// The transcript must start with a user message; Run appends to a copy and
// never writes into msgs' backing array (a fork shares its parent's). The
// error is non-nil only for StopModelError, StopStepError and StopCancelled.
//
// Every turn goes through the same phases, each of which may end the run:
// the turn boundary, the model call, and then either the answer (a
// response without tool calls) or the tool turn.
func Run(ctx context.Context, cfg Config, msgs []llm.Message) (*Result, error) {
	r := newRun(cfg)
	res := &Result{Messages: slices.Clip(msgs)}
	switch {
	case cfg.Model == nil:
		return r.finish(res, StopModelError, errors.New("loop: Config.Model is nil"))
	case len(msgs) == 0 || msgs[0].Role != llm.User:
		return r.finish(res, StopModelError, errors.New("loop: the transcript must start with a user message"))
	}
	if r.lim.WallTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = clock.WithTimeout(ctx, r.clock, r.lim.WallTime, errWallTime)
		defer cancel()
	}
	r.start, r.req, r.emitted = r.clock.Now(), cfg.request(nil), len(res.Messages)
	if cfg.Resume != nil {
		if v := r.resume(ctx, res); v.ends() {
			return r.finish(res, v.stop, v.err)
		}
	}
	for {
		if v := r.boundary(ctx, res); v.ends() {
			return r.finish(res, v.stop, v.err)
		}
		t, v := r.call(ctx, res)
		if v.ends() {
			return r.finish(res, v.stop, v.err)
		}
		if len(t.calls) == 0 {
			v = r.answered(ctx, res, t)
		} else {
			v = r.toolTurn(ctx, res, t)
		}
		if v.ends() {
			return r.finish(res, v.stop, v.err)
		}
	}
}

// verdict is what a phase of a turn tells Run: the zero value goes on, a
// stop ends the run there. err goes with the stop as Run's error, so it is
// non-nil only with StopModelError, StopStepError and StopCancelled.
type verdict struct {
	stop StopReason
	err  error
}

func (v verdict) ends() bool { return v.stop != "" }

// reply is what the phases after a model call need of its response.
type reply struct {
	model llm.StopReason // why the response ended, as the provider said
	calls []llm.Block    // its tool_use blocks
	// cut is the run's stop when the response was cut at max_tokens:
	// StopMaxOutputTokens, or StopMaxTotalTokens when the cap was what
	// remained of the budget.
	cut StopReason
}

// boundary is the turn boundary. The run ends here, before it spends
// another model call, when the caller cancelled, a budget is spent
// (limitReached) or the Inbox says so; otherwise what came for the run
// joins the transcript, and once the soft wall time has passed the model
// is told to wrap up, which makes the coming turn the last.
func (r *run) boundary(ctx context.Context, res *Result) verdict {
	if ctx.Err() != nil {
		return r.failed(ctx, ctx.Err())
	}
	if stop := r.limitReached(res, r.start); stop != "" {
		return verdict{stop: stop}
	}
	if r.cfg.Inbox != nil && res.Turns > 0 {
		notes, stop, err := r.cfg.Inbox(ctx, res.Turns+1)
		if v, ok := halted(err); ok {
			return v
		}
		if err != nil {
			return verdict{StopStepError, fmt.Errorf("turn %d: inbox: %w", res.Turns+1, err)}
		}
		for _, n := range notes {
			res.Messages = appendUserText(res.Messages, n)
		}
		if stop != "" {
			return verdict{stop: stop} // StopSuspended: finish suspends the run
		}
	}
	if !r.wrapping && r.lim.SoftWallTime > 0 && res.Turns > 0 && r.clock.Now().Sub(r.start) >= r.lim.SoftWallTime {
		r.wrapping = true
		res.Messages = appendUserText(res.Messages, WrapUp)
		r.emit(Event{Kind: EventWrapUp, Turn: res.Turns + 1})
	}
	return verdict{}
}

// call starts a turn and makes its model call. The transcript is
// compacted first when the prompt has grown too large, and the output is
// capped so the call cannot overrun the total-token budget; the response
// is spent (from the run and the shared Budget), appended and emitted at
// once, so it is kept whatever the later phases decide.
func (r *run) call(ctx context.Context, res *Result) (reply, verdict) {
	r.emitMessages(res)
	res.Turns++
	r.emit(Event{Kind: EventTurnStarted, Turn: res.Turns})

	if err := r.compactIfNeeded(ctx, res); err != nil {
		return reply{}, r.failed(ctx, err)
	}
	r.req.Messages = res.Messages
	var budgetCut bool
	if r.req.MaxTokens, budgetCut = r.outputCap(res); r.req.MaxTokens <= 0 {
		res.Turns-- // no call was made
		return reply{}, verdict{stop: StopMaxTotalTokens}
	}
	resp, err := r.steps.Model(ctx, res.Turns, StepGenerate, func(ctx context.Context) (*llm.Response, error) {
		return r.model.Generate(r.observe(ctx), r.req, r.stream)
	})
	if err == nil && resp == nil {
		err = errors.New("the model returned no response and no error")
	}
	if err != nil {
		return reply{}, r.failed(ctx, fmt.Errorf("turn %d: %w", res.Turns, err))
	}
	r.spend(res, resp.Usage)
	r.lastPrompt, r.sinceLast = resp.Usage.Prompt()+resp.Usage.OutputTokens, 0
	msg := resp.Message()
	res.Messages = append(res.Messages, msg)
	res.Answer = msg.Text()
	r.emit(Event{Kind: EventModelResponse, Turn: res.Turns, Usage: resp.Usage, ModelStop: resp.StopReason})
	r.emitMessages(res)

	t := reply{model: resp.StopReason, calls: msg.ToolUses(), cut: StopMaxOutputTokens}
	if budgetCut {
		t.cut = StopMaxTotalTokens // the cap was what remained of the budget
	}
	return t, verdict{}
}

// answered handles a response without tool calls, which usually completes
// the run. A cut or refused answer ends it with its own reason; a paused
// one goes back to the model to continue; and Hold may hand the model the
// reports of background children as a new turn, so nothing started is
// left unread.
func (r *run) answered(ctx context.Context, res *Result, t reply) verdict {
	switch t.model {
	case llm.StopMaxTokens:
		return verdict{stop: t.cut}
	case llm.StopRefusal:
		return verdict{stop: StopRefusal}
	case llm.StopPauseTurn:
		if r.wrapping {
			return verdict{stop: StopWallTime} // no call beyond the one promised
		}
		// The provider paused a long server-side turn; sending the
		// transcript back as it stands lets the model continue.
		return verdict{}
	}
	if r.cfg.Hold != nil && !r.wrapping {
		notes, err := r.cfg.Hold(ctx, res.Turns+1)
		if v, ok := halted(err); ok {
			return v
		}
		if err != nil {
			return verdict{StopStepError, fmt.Errorf("turn %d: hold: %w", res.Turns+1, err)}
		}
		if len(notes) > 0 {
			for _, n := range notes {
				res.Messages = appendUserText(res.Messages, n)
			}
			return verdict{}
		}
	}
	return verdict{stop: StopCompleted}
}

// toolTurn runs the calls of a response that made some. Not all may run: a
// cut response's arguments may be truncated, a wrapping run was told to
// stop calling, and the tool-call budget may not cover them all. Calls not
// run still get results, and the run ends when a limit held calls back,
// the step runner failed, or a suspending tool asks the run to wait.
func (r *run) toolTurn(ctx context.Context, res *Result, t reply) verdict {
	stop := StopReason("")
	runnable := len(t.calls)
	switch {
	case t.model == llm.StopMaxTokens:
		// A response cut mid-call may carry truncated arguments; running
		// them would act on half an intent.
		stop, runnable = t.cut, 0
	case r.wrapping:
		stop, runnable = StopWallTime, 0
	case r.lim.MaxToolCalls > 0 && res.ToolCalls+len(t.calls) > r.lim.MaxToolCalls:
		stop, runnable = StopMaxToolCalls, max(0, r.lim.MaxToolCalls-res.ToolCalls)
	}
	results, err := r.runTools(ctx, res, t.calls, runnable)
	ran := len(results)
	// Every tool_use gets its tool_result, run or not, so the transcript
	// stays valid for the provider if the instance is continued later.
	for _, c := range t.calls[len(results):] {
		why := "not run: " + string(stop) + " limit reached"
		switch {
		case r.wrapping:
			why = "not run: time is up; answer with what you have"
		case err != nil:
			why = "not run: " + err.Error()
		}
		results = append(results, llm.ToolResult(c.ID, why, true))
	}
	res.ToolCalls += ran
	res.Messages = append(res.Messages, llm.Message{Role: llm.User, Content: results})
	for i := range results {
		r.sinceLast += llm.EstimateBlock(&results[i])
	}
	switch {
	case err != nil:
		return verdict{StopStepError, fmt.Errorf("turn %d: %w", res.Turns, err)}
	case stop != "":
		return verdict{stop: stop}
	case r.suspends(t.calls, results):
		return verdict{stop: StopSuspended}
	}
	return verdict{}
}

// suspends reports whether one of a turn's calls was a successful call to
// a suspending tool (tool.Suspending), or was held by the gate.
func (r *run) suspends(calls, results []llm.Block) bool {
	for i, c := range calls {
		if IsHeld(results[i]) || !results[i].IsError && r.cfg.Tools.Suspends(c.Name) {
			return true
		}
	}
	return false
}

// outputCap is max_tokens for the next call: the per-call limit, or what is
// left of the total-token budget after the estimated prompt when that is
// less (cut reports that case). Zero or less means the next prompt alone
// would spend the budget. The prompt is estimated (llm.EstimateTokens), so
// the budget holds to within that estimate's error.
func (r *run) outputCap(res *Result) (n int, cut bool) {
	n = r.lim.MaxOutputTokens
	if r.lim.MaxTotalTokens <= 0 {
		return n, false
	}
	left := r.lim.MaxTotalTokens - res.Usage.Total() - r.promptEstimate(res)
	if left < int64(n) {
		return int(max(left, 0)), true
	}
	return n, false
}

// observe routes the providers' attempt reports for one model call to
// OnEvent. Only the model call's context carries it: a tool that calls a
// model of its own (a subagent) must not report into this run's events,
// from another goroutine.
func (r *run) observe(ctx context.Context) context.Context {
	if r.cfg.OnEvent == nil {
		return ctx
	}
	return llm.WithAttemptObserver(ctx, r.onAttempt)
}

// run is the state of one Run call that is not part of its Result.
type run struct {
	cfg       Config
	model     llm.Model
	lim       Limits
	clock     clock.Clock
	steps     Steps
	stream    func(llm.Delta) // nil unless Config.Stream and OnEvent
	onAttempt func(llm.Attempt)
	turn      int // for stream events

	start    time.Time    // of Run, for the wall-time budgets
	req      *llm.Request // reused by every turn's model call
	wrapping bool         // the wrap-up message was sent: this turn is the last

	// emitted counts the transcript's messages already sent as
	// EventMessage (or given to Run).
	emitted int

	// Prompt size bookkeeping for compaction: the last response's prompt
	// plus output, and the estimated tokens appended since.
	lastPrompt int64
	sinceLast  int
}

func newRun(cfg Config) *run {
	r := &run{cfg: cfg, model: cfg.Model, lim: cfg.Limits, clock: cfg.Clock, steps: cfg.Steps}
	if r.lim.MaxTurns <= 0 {
		r.lim.MaxTurns = DefaultMaxTurns
	}
	if r.lim.MaxOutputTokens <= 0 {
		r.lim.MaxOutputTokens = DefaultMaxOutputTokens
	}
	if r.lim.ToolOutputChars <= 0 {
		r.lim.ToolOutputChars = tool.DefaultOutputLimit
	}
	if r.clock == nil {
		r.clock = clock.Real
	}
	if r.steps == nil {
		r.steps = Direct{}
	}
	if cfg.Stream && cfg.OnEvent != nil {
		r.stream = func(d llm.Delta) { cfg.OnEvent(Event{Kind: EventModelDelta, Turn: r.turn, Delta: d}) }
	}
	if cfg.OnEvent != nil {
		r.onAttempt = func(a llm.Attempt) { cfg.OnEvent(Event{Kind: EventModelAttempt, Turn: r.turn, Attempt: a}) }
	}
	return r
}

func (r *run) emit(e Event) {
	if e.Kind == EventTurnStarted {
		r.turn = e.Turn
	}
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(e)
	}
}

// limitReached checks the budgets that are spent before a model call.
func (r *run) limitReached(res *Result, start time.Time) StopReason {
	switch {
	case res.Turns >= r.lim.MaxTurns:
		return StopMaxTurns
	case r.lim.MaxTotalTokens > 0 && res.Usage.Total() >= r.lim.MaxTotalTokens:
		return StopMaxTotalTokens
	case r.lim.MaxToolCalls > 0 && res.ToolCalls >= r.lim.MaxToolCalls:
		return StopMaxToolCalls
	case r.lim.WallTime > 0 && r.clock.Now().Sub(start) >= r.lim.WallTime:
		return StopWallTime
	case r.cfg.Budget != nil && r.cfg.Budget.Spent():
		return StopBudget
	}
	return ""
}

// emitMessages sends the messages appended since the last call as
// EventMessage events. It is called where the transcript's tail is final.
func (r *run) emitMessages(res *Result) {
	if r.cfg.OnEvent == nil {
		r.emitted = len(res.Messages)
		return
	}
	for ; r.emitted < len(res.Messages); r.emitted++ {
		r.emit(Event{Kind: EventMessage, Turn: res.Turns, Message: res.Messages[r.emitted]})
	}
}

// spend adds one model call's usage to the run and to the shared budget.
func (r *run) spend(res *Result, u llm.Usage) {
	res.Usage.Add(u)
	if r.cfg.Budget != nil {
		r.cfg.Budget.Spend(r.cfg.ModelName, u)
	}
}

// request is the model request of a run over msgs, without max_tokens.
func (cfg *Config) request(msgs []llm.Message) *llm.Request {
	return &llm.Request{
		Model:      cfg.ModelName,
		System:     cfg.System,
		Tools:      cfg.Tools.Specs(),
		ToolChoice: cfg.ToolChoice,
		Messages:   msgs,
	}
}

// appendUserText adds text to the transcript as the model's next input: to
// the last message when it is the user's (tool results and text may share
// a message, and roles must alternate), as a new message otherwise. The
// last message is copied, never written into: its blocks may be shared
// with a parent's transcript.
func appendUserText(msgs []llm.Message, text string) []llm.Message {
	n := len(msgs)
	if n == 0 || msgs[n-1].Role != llm.User {
		return append(msgs, llm.UserText(text))
	}
	last := msgs[n-1]
	content := make([]llm.Block, 0, len(last.Content)+1)
	content = append(append(content, last.Content...), llm.Text(text))
	return append(msgs[:n-1:n-1], llm.Message{Role: llm.User, Content: content})
}

// runTools runs the first runnable of one turn's calls: concurrently when
// every one may run alongside the others (tool.Set.Concurrent: read-only
// tools and spawns), in order otherwise. Results come back in call
// order, with room for the calls that were not run.
func (r *run) runTools(ctx context.Context, res *Result, calls []llm.Block, runnable int) ([]llm.Block, error) {
	if runnable == 0 {
		return make([]llm.Block, 0, len(calls)), nil
	}
	turn := res.Turns
	run := calls[:runnable]
	b := &Batch{Calls: run, Parallel: len(run) > 1, set: r.cfg.Tools, limit: r.lim.ToolOutputChars,
		turn: turn, transcript: res.Messages, gate: r.cfg.Gate, after: r.cfg.After}
	for i := range run {
		r.emit(Event{Kind: EventToolCall, Turn: turn, Block: run[i]})
		if b.Parallel && !r.cfg.Tools.Concurrent(run[i].Name) {
			b.Parallel = false
		}
	}
	b.Results = make([]llm.Block, len(run), len(calls))
	if err := r.steps.Tools(ctx, turn, b); err != nil {
		return nil, err
	}
	for i := range b.Results {
		r.emit(Event{Kind: EventToolResult, Turn: turn, Block: b.Results[i]})
	}
	return b.Results, nil
}

// failed ends a run whose model call or step failed, telling a cancellation
// (by the caller or the wall-time budget) apart from a model error.
func (r *run) failed(ctx context.Context, err error) verdict {
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errWallTime) {
			return verdict{stop: StopWallTime}
		}
		return verdict{StopCancelled, context.Cause(ctx)}
	}
	return verdict{StopModelError, err}
}

// finish ends the run with stop. A StopSuspended run stops to wait, not to
// end: the user message it would have sent next, not yet emitted, becomes
// Pending, so the transcript ends with the model's turn and the next run
// adds what came meanwhile (an answer, notes) to that one message.
func (r *run) finish(res *Result, stop StopReason, err error) (*Result, error) {
	if n := len(res.Messages) - 1; stop == StopSuspended && n >= r.emitted && res.Messages[n].Role == llm.User {
		res.Pending = &res.Messages[n]
		res.Messages = res.Messages[:n:n]
	}
	res.StopReason = stop
	r.emitMessages(res)
	r.emit(Event{Kind: EventFinished, Turn: res.Turns, Usage: res.Usage, Stop: stop, Err: err})
	return res, err
}
