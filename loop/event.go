package loop

import "github.com/deputy-run/deputy/llm"

// EventKind says what happened.
type EventKind uint8

// The events a run emits, in the order they can occur within a turn.
const (
	EventTurnStarted   EventKind = iota + 1 // Turn
	EventCompaction                         // Turn, Compacted, Kept, Usage (of the summary call), Message (the new head, summary last)
	EventModelDelta                         // Turn, Delta
	EventModelAttempt                       // Turn, Attempt (one HTTP request of a model call)
	EventModelResponse                      // Turn, Usage, ModelStop
	EventToolCall                           // Turn, Block (the tool_use)
	EventToolResult                         // Turn, Block (the tool_result)
	EventFinished                           // Turn (the last), Usage (the run's), Stop, Err
	// EventWrapUp comes before the last turn's turn_started, once the soft
	// wall time has passed. It was added last to keep the values above.
	EventWrapUp // Turn (the last)
	// EventMessage carries a message the run appended to the transcript,
	// once it is final, in transcript order: an assistant message as soon
	// as it arrives, a user message of tool results before the next model
	// call or at the end. Messages replaced by compaction were emitted
	// before it, so a store that appends these keeps the original turns.
	EventMessage // Turn, Message
)

var eventNames = [...]string{"", "turn_started", "compaction", "model_delta", "model_attempt", "model_response", "tool_call", "tool_result", "finished", "wrap_up", "message"}

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
	Kept      int // messages kept verbatim after the new head
	Err       error
	Message   llm.Message // EventMessage
}
