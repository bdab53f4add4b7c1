package loop

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/deputy-run/deputy/llm"
)

// AfterFunc is asked after each tool call ran (Claude Code's PostToolUse
// hooks), with the input it ran with and its result, and returns the
// result the model reads: the same, or with feedback added. It runs
// inside the call's own step, so under a durable step runner what it
// returns is checkpointed with the result and a replay does not ask
// again. Calls the gate denied or held, and calls that could not run,
// never reach it.
type AfterFunc func(ctx context.Context, c *Call, name string, input json.RawMessage, result llm.Block) llm.Block

// StopHalted: a Hold, an Inbox or the gate's owner said the run must end
// now (a hook's continue: false); Halt.Reason says why, for the person.
const StopHalted StopReason = "halted"

// Halt is the error a HoldFunc or InboxFunc returns to end the run with
// StopHalted: it is not a failure of the run, so Run returns no error.
type Halt struct{ Reason string }

func (h *Halt) Error() string {
	if h.Reason == "" {
		return "the run was halted"
	}
	return "the run was halted: " + h.Reason
}

// halted is the verdict for a Hold or Inbox error that is a Halt.
func halted(err error) (verdict, bool) {
	var h *Halt
	if errors.As(err, &h) {
		return verdict{stop: StopHalted}, true
	}
	return verdict{}, false
}
