package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/deputy-run/deputy/llm"
)

// GateFunc is asked before each tool call runs, after its arguments were
// checked (a call with malformed arguments never reaches it): name and
// input are the call's. It runs where the call would have run, so under a
// durable step runner its verdict is checkpointed with the call's result
// and a replay does not ask again.
type GateFunc func(ctx context.Context, c *Call, name string, input json.RawMessage) GateResult

// Verdict is a gate's answer.
type Verdict uint8

const (
	// GateAllow runs the call (with GateResult.Input in place of the
	// model's arguments when set).
	GateAllow Verdict = iota
	// GateDeny answers the call with an error result the model reads
	// (GateResult.Reason); the tool does not run.
	GateDeny
	// GateAsk holds the call for someone's approval: its result is Held,
	// the other calls of the turn run, and the run suspends after the
	// turn as it does for a suspending tool. A later run decides the held
	// calls (Config.Resume).
	GateAsk
)

// GateResult is what a gate decided about one call. Reason and Rule say
// why, for the model (a deny) and for whoever is asked (an ask).
type GateResult struct {
	Verdict Verdict
	// Input, with GateAllow, replaces the call's arguments (a hook's
	// updatedInput). The transcript keeps what the model sent.
	Input  json.RawMessage
	Reason string
	Rule   string
}

// Held is the result a call the gate held waits with in a suspended run's
// pending message, until a later run decides it (Config.Resume). It is
// the marker the loop recognizes held calls by, so a durable runner that
// replays a checkpointed result sees the same.
const Held = "[deputy] Held: this call waits for approval."

// ResumeTurn is the turn number a resumed run's first batch (the held
// calls it decides) is run as through Steps.Tools: no turn of the run has
// that number, so the batch's step names are its own.
const ResumeTurn = 0

// Resume is how a run continues a suspended run whose last turn held
// calls for approval: its transcript ends with that turn's assistant
// message, and instead of sending the pending results as they are, the run
// first decides the held calls, runs the approved ones (the gate is not
// asked again for them) through Steps.Tools, and records the completed
// results as the turn's user message. Then it goes on as any run.
type Resume struct {
	// Pending is the suspended run's Result.Pending: its held calls'
	// results are Held.
	Pending *llm.Message
	// Approved are the ids of the held calls to run now.
	Approved []string
	// Denied gives the reason of each held call refused; a held call in
	// neither list is answered as not approved.
	Denied map[string]string
	// Turn is the turn the calls were made in (Call.Turn, which a spawn's
	// child id derives from).
	Turn int
}

// IsHeld reports whether a tool_result is a held call's placeholder.
func IsHeld(b llm.Block) bool {
	return b.Type == llm.TypeToolResult && !b.IsError && b.Text == Held
}

// HeldCalls are the tool_use blocks of calls whose results in pending are
// Held, in call order, out of the assistant message last.
func HeldCalls(last llm.Message, pending *llm.Message) []llm.Block {
	if pending == nil {
		return nil
	}
	held := map[string]bool{}
	for _, b := range pending.Content {
		if IsHeld(b) {
			held[b.ToolUseID] = true
		}
	}
	var out []llm.Block
	for _, u := range last.ToolUses() {
		if held[u.ID] {
			out = append(out, u)
		}
	}
	return out
}

// Denied is the result a held call refused gets.
func Denied(reason string) string {
	if reason == "" {
		return "permission denied: the call was not approved"
	}
	return "permission denied: " + reason
}

// gated is the result of a call the gate did not let run, or ok with the
// input to run it with.
func gated(ctx context.Context, g GateFunc, c *Call, b *llm.Block) (res llm.Block, input json.RawMessage, ok bool) {
	v := g(ctx, c, b.Name, b.Input)
	switch v.Verdict {
	case GateDeny:
		why := v.Reason
		if v.Rule != "" {
			why = fmt.Sprintf("%s (rule %s)", cmpOr(why, "a deny rule matched"), v.Rule)
		}
		return llm.ToolResult(b.ID, Denied(why), true), nil, false
	case GateAsk:
		return llm.ToolResult(b.ID, Held, false), nil, false
	}
	if len(v.Input) > 0 {
		return llm.Block{}, v.Input, true
	}
	return llm.Block{}, b.Input, true
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// resume is a resumed run's first phase (Config.Resume): the held calls
// of the transcript's last turn are decided, the approved ones run, and
// the turn's results are recorded. It ends the run only when the step
// runner fails or the run was cancelled.
func (r *run) resume(ctx context.Context, res *Result) verdict {
	rs := r.cfg.Resume
	n := len(res.Messages)
	if n == 0 || res.Messages[n-1].Role != llm.Assistant || rs.Pending == nil {
		return verdict{StopStepError, fmt.Errorf("loop: Config.Resume needs a transcript that ends with the turn that held calls, and its pending results")}
	}
	uses := res.Messages[n-1].ToolUses()
	results := slices.Clone(rs.Pending.Content)
	var run []llm.Block
	var at, slot []int // each approved call's index in its turn, and its result's place
	for i, b := range results {
		if !IsHeld(b) {
			continue
		}
		j := slices.IndexFunc(uses, func(u llm.Block) bool { return u.ID == b.ToolUseID })
		switch {
		case j >= 0 && slices.Contains(rs.Approved, b.ToolUseID):
			run, at, slot = append(run, uses[j]), append(at, j), append(slot, i)
		default:
			why, ok := rs.Denied[b.ToolUseID]
			if !ok {
				why = "the call was not approved"
			}
			results[i] = llm.ToolResult(b.ToolUseID, Denied(why), true)
		}
	}
	if len(run) > 0 {
		b := &Batch{Calls: run, Parallel: len(run) > 1, set: r.cfg.Tools, limit: r.lim.ToolOutputChars,
			turn: rs.Turn, at: at, transcript: res.Messages, after: r.cfg.After}
		for i := range run {
			r.emit(Event{Kind: EventToolCall, Turn: ResumeTurn, Block: run[i]})
			if b.Parallel && !r.cfg.Tools.Concurrent(run[i].Name) {
				b.Parallel = false
			}
		}
		b.Results = make([]llm.Block, len(run))
		if err := r.steps.Tools(ctx, ResumeTurn, b); err != nil {
			return verdict{StopStepError, fmt.Errorf("resume: %w", err)}
		}
		for i := range b.Results {
			r.emit(Event{Kind: EventToolResult, Turn: ResumeTurn, Block: b.Results[i]})
			results[slot[i]] = b.Results[i]
		}
	}
	res.Messages = append(res.Messages, llm.Message{Role: llm.User, Content: results})
	for i := range results {
		r.sinceLast += llm.EstimateBlock(&results[i])
	}
	return verdict{}
}
