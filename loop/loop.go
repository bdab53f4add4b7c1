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
)

// Limits bound one run. A zero field takes its default; the total-token,
// tool-call and wall-time budgets default to none.
type Limits struct {
	MaxTurns        int           // model calls; default 30
	MaxTotalTokens  int64         // prompt + output tokens over all calls
	MaxToolCalls    int           // tool calls over the run
	WallTime        time.Duration // from the start of Run
	MaxOutputTokens int           // per model call; default 8192
	ToolOutputChars int           // per tool result; default 50,000
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
	// OnEvent receives events synchronously, in order, from the goroutine
	// that called Run. It must not block for long: the loop waits for it.
	OnEvent func(Event)
}

// Result is what a run produced. Run returns one even when it fails, so
// partial work (the transcript, the usage) is never lost.
type Result struct {
	Messages   []llm.Message // the transcript, compacted if compaction ran
	Answer     string        // the text of the last assistant message
	StopReason StopReason
	Turns      int
	ToolCalls  int
	Usage      llm.Usage
}

// errWallTime is the cancellation cause when the wall-time budget runs out.
var errWallTime = errors.New("wall-time limit reached")

// Run drives the model over msgs until it answers or a limit ends the run.
// The transcript must start with a user message. The error is non-nil only
// for StopModelError and StopCancelled.
func Run(ctx context.Context, cfg Config, msgs []llm.Message) (*Result, error) {
	r := newRun(cfg)
	res := &Result{Messages: msgs}
	if len(msgs) == 0 || msgs[0].Role != llm.User {
		return r.finish(res, StopModelError, errors.New("loop: the transcript must start with a user message"))
	}
	if r.lim.WallTime > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		t := r.clock.AfterFunc(r.lim.WallTime, func() { cancel(errWallTime) })
		defer t.Stop()
	}
	if cfg.OnEvent != nil {
		// Providers report each HTTP attempt (and retries that void streamed
		// deltas) through the context; they reach UIs as events.
		ctx = llm.WithAttemptObserver(ctx, func(a llm.Attempt) {
			r.emit(Event{Kind: EventModelAttempt, Turn: r.turn, Attempt: a})
		})
	}
	start := r.clock.Now()
	req := &llm.Request{
		Model:      cfg.ModelName,
		System:     cfg.System,
		Tools:      cfg.Tools.Specs(),
		ToolChoice: cfg.ToolChoice,
		MaxTokens:  r.lim.MaxOutputTokens,
	}
	for {
		if ctx.Err() != nil {
			return r.failed(ctx, res, ctx.Err())
		}
		if stop := r.limitReached(res, start); stop != "" {
			return r.finish(res, stop, nil)
		}
		res.Turns++
		r.emit(Event{Kind: EventTurnStarted, Turn: res.Turns})

		if err := r.compactIfNeeded(ctx, res); err != nil {
			return r.failed(ctx, res, err)
		}
		req.Messages = res.Messages
		resp, err := r.steps.Model(ctx, res.Turns, StepGenerate, func(ctx context.Context) (*llm.Response, error) {
			return r.model.Generate(ctx, req, r.stream)
		})
		if err != nil {
			return r.failed(ctx, res, fmt.Errorf("turn %d: %w", res.Turns, err))
		}
		res.Usage.Add(resp.Usage)
		r.lastPrompt, r.sinceLast = resp.Usage.Prompt()+resp.Usage.OutputTokens, 0
		msg := resp.Message()
		res.Messages = append(res.Messages, msg)
		res.Answer = msg.Text()
		r.emit(Event{Kind: EventModelResponse, Turn: res.Turns, Usage: resp.Usage, ModelStop: resp.StopReason})

		calls := msg.ToolUses()
		if len(calls) == 0 {
			switch resp.StopReason {
			case llm.StopMaxTokens:
				return r.finish(res, StopMaxOutputTokens, nil)
			case llm.StopRefusal:
				return r.finish(res, StopRefusal, nil)
			case llm.StopPauseTurn:
				// The provider paused a long server-side turn; sending the
				// transcript back as it stands lets the model continue.
				continue
			}
			return r.finish(res, StopCompleted, nil)
		}

		stop := StopReason("")
		runnable := len(calls)
		switch {
		case resp.StopReason == llm.StopMaxTokens:
			// A response cut mid-call may carry truncated arguments; running
			// them would act on half an intent.
			stop, runnable = StopMaxOutputTokens, 0
		case r.lim.MaxToolCalls > 0 && res.ToolCalls+len(calls) > r.lim.MaxToolCalls:
			stop, runnable = StopMaxToolCalls, max(0, r.lim.MaxToolCalls-res.ToolCalls)
		}
		results, err := r.runTools(ctx, res.Turns, calls[:runnable])
		if err != nil {
			return r.failed(ctx, res, fmt.Errorf("turn %d: %w", res.Turns, err))
		}
		// Every tool_use gets its tool_result, run or not, so the transcript
		// stays valid for the provider if the instance is continued later.
		for _, c := range calls[runnable:] {
			results = append(results, llm.ToolResult(c.ID, "not run: "+string(stop)+" limit reached", true))
		}
		res.ToolCalls += runnable
		res.Messages = append(res.Messages, llm.Message{Role: llm.User, Content: results})
		for i := range results {
			r.sinceLast += llm.EstimateBlock(&results[i])
		}
		if stop != "" {
			return r.finish(res, stop, nil)
		}
	}
}

// run is the state of one Run call that is not part of its Result.
type run struct {
	cfg    Config
	model  llm.Model
	lim    Limits
	clock  clock.Clock
	steps  Steps
	stream func(llm.Delta)
	turn   int // for stream events

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
	if cfg.OnEvent != nil {
		r.stream = func(d llm.Delta) { cfg.OnEvent(Event{Kind: EventModelDelta, Turn: r.turn, Delta: d}) }
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
	}
	return ""
}

// runTools runs one turn's calls: concurrently when every call is
// read-only, in order otherwise. Results come back in call order.
func (r *run) runTools(ctx context.Context, turn int, calls []llm.Block) ([]llm.Block, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	b := &Batch{Calls: calls, Parallel: len(calls) > 1, set: r.cfg.Tools, limit: r.lim.ToolOutputChars}
	for i := range calls {
		r.emit(Event{Kind: EventToolCall, Turn: turn, Block: calls[i]})
		if b.Parallel && !r.cfg.Tools.ReadOnly(calls[i].Name) {
			b.Parallel = false
		}
	}
	b.Results = make([]llm.Block, len(calls), len(calls)+1)
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
func (r *run) failed(ctx context.Context, res *Result, err error) (*Result, error) {
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errWallTime) {
			return r.finish(res, StopWallTime, nil)
		}
		return r.finish(res, StopCancelled, context.Cause(ctx))
	}
	return r.finish(res, StopModelError, err)
}

func (r *run) finish(res *Result, stop StopReason, err error) (*Result, error) {
	res.StopReason = stop
	r.emit(Event{Kind: EventFinished, Turn: res.Turns, Usage: res.Usage, Stop: stop, Err: err})
	return res, err
}
