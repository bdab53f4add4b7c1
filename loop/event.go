package loop

import "github.com/deputy-run/deputy/llm"

// EventKind says what happened.
type EventKind uint8

// The events a run emits, in the order they can occur within a turn.
const (
	EventWrapUp        EventKind = iota + 1 // Turn (the last): the soft wall time passed
	EventTurnStarted                        // Turn
	EventCompaction                         // Turn, Compacted, Usage (of the summary call)
	EventModelDelta                         // Turn, Delta
	EventModelAttempt                       // Turn, Attempt (one HTTP request of a model call)
	EventModelResponse                      // Turn, Usage, ModelStop
	EventToolCall                           // Turn, Block (the tool_use)
	EventToolResult                         // Turn, Block (the tool_result)
	EventFinished                           // Turn (the last), Usage (the run's), Stop, Err
)

var eventNames = [...]string{"", "wrap_up", "turn_started", "compaction", "model_delta", "model_attempt", "model_response", "tool_call", "tool_result", "finished"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one thing that happened during a run, for UIs and telemetry. It is
// a flat value so emitting one allocates nothing.
type Event struct {
	Kind      EventKind
	Turn      int
	Delta     llm.Delta
	Attempt   llm.Attempt // when Attempt.Discarded, drop the deltas since the last attempt
	Block     llm.Block
	Usage     llm.Usage
	ModelStop llm.StopReason
	Stop      StopReason
	Compacted int // messages replaced by the summary
	Err       error
}
