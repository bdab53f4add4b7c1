package openai

import (
	"fmt"
	"maps"
	"slices"

	"github.com/openai/openai-go/v3/responses"

	"github.com/deputy-run/deputy/llm"
)

// errorEvent is a stream's error event ({"type":"error","code",
// "message","param"}: openai-go's ResponseErrorEvent).
type errorEvent struct{ code, message string }

func (e *errorEvent) Error() string { return e.code + ": " + e.message }

// responseStream follows one streamed response: it passes the deltas on,
// numbered by output_index (one block per output item), keeps the items
// the stream finished, and the terminal response.
type responseStream struct {
	emit func(llm.Delta)
	// done holds each response.output_item.done item by output_index: the
	// API reference says to take a reasoning item's encrypted_content from
	// there, as output_item.added's may be incomplete.
	done map[int64]responses.ResponseOutputItemUnion
	// final is the response of response.completed or response.incomplete
	// (or response.failed, which responseFailure turns into an error).
	final *responses.Response
}

// add takes one event. It returns an *errorEvent for an error event, and
// an error for an event that breaks the protocol.
func (s *responseStream) add(ev *responses.ResponseStreamEventUnion) error {
	switch ev.Type {
	case "error":
		return &errorEvent{code: ev.Code, message: ev.Message}
	case "response.completed", "response.incomplete", "response.failed":
		if s.final != nil {
			return fmt.Errorf("%s after the response ended", ev.Type)
		}
		r := ev.Response
		s.final = &r
		return nil
	}
	if s.final != nil {
		return fmt.Errorf("%s after the response ended", ev.Type)
	}
	if ev.OutputIndex < 0 || ev.OutputIndex > maxOutputItems {
		return fmt.Errorf("%s: output_index %d out of range", ev.Type, ev.OutputIndex)
	}
	idx := int(ev.OutputIndex)
	switch ev.Type {
	case "response.output_item.added":
		if it := &ev.Item; it.Type == "function_call" {
			s.emit(llm.Delta{Index: idx, Type: llm.TypeToolUse, ID: it.CallID, Name: it.Name, Text: it.Arguments.OfString})
		}
	case "response.output_item.done":
		if s.done == nil {
			s.done = map[int64]responses.ResponseOutputItemUnion{}
		}
		s.done[ev.OutputIndex] = ev.Item
	case "response.output_text.delta", "response.refusal.delta":
		s.emit(llm.Delta{Index: idx, Type: llm.TypeText, Text: ev.Delta})
	case "response.function_call_arguments.delta":
		if ev.Delta != "" {
			s.emit(llm.Delta{Index: idx, Type: llm.TypeToolUse, Text: ev.Delta})
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		s.emit(llm.Delta{Index: idx, Type: typeReasoning, Text: ev.Delta})
	}
	return nil
}

// maxOutputItems bounds an output_index, so a broken stream cannot make a
// consumer index a huge slice.
const maxOutputItems = 1 << 16

// output is the response's output items: the terminal response's when it
// lists them, else the items the stream finished, in output order (a
// terminal event may leave output out: openai-go's accumulator allows for
// it).
func (s *responseStream) output() []responses.ResponseOutputItemUnion {
	if len(s.final.Output) > 0 || len(s.done) == 0 {
		return s.final.Output
	}
	out := make([]responses.ResponseOutputItemUnion, 0, len(s.done))
	for _, k := range slices.Sorted(maps.Keys(s.done)) {
		out = append(out, s.done[k])
	}
	return out
}
