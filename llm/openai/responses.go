package openai

// The Responses API (POST /v1/responses), OpenAI's newer wire, chosen with
// Options.Responses (the spec openai-responses:MODEL, or deputy.yaml's
// openai.responses). Sources: openai-go/v3's responses package (v3.98.0:
// ResponseNewParams, Response, ResponseStreamEventUnion) and the API
// reference's "Create a model response" and "Streaming events" pages.
//
// Attempts, retries, streaming and the plain call work as on Chat
// Completions (Generate's doc). What differs is the mapping:
//
//   - the system prompt is instructions; each transcript block is an input
//     item: text a message (role user or assistant), tool_use a
//     function_call (call_id, name, arguments as a string), tool_result a
//     function_call_output, in transcript order;
//   - every output item is one block, in output order (so a streamed
//     delta's Index is its output_index): a message its text (refusals
//     included), a function_call a tool_use, anything else (reasoning
//     first of all) an opaque block holding the item's JSON;
//   - reasoning items go back as the exact bytes stored. store is false:
//     nothing of the conversation is kept on OpenAI's side, so a request
//     never depends on server state (a previous_response_id that expired,
//     a store another deployment cannot see, data-retention settings that
//     forbid it) and every request carries its whole transcript, as on
//     the other wires. Without stored state a reasoning item is only
//     usable with its encrypted_content, hence include
//     ["reasoning.encrypted_content"] (for models that reason: see
//     encryptsReasoning);
//   - status completed with a function_call is tool_use, otherwise
//     end_turn (refusal when the answer is a refusal); incomplete with
//     reason max_output_tokens is max_tokens, content_filter refusal;
//     failed is an error, retried when its code says the server failed;
//   - usage: InputTokens = input_tokens − cached_tokens − cache writes, as
//     on Chat Completions;
//   - the wire has no stop sequences, and a request with some is refused.

import (
	"context"
	"fmt"

	"github.com/openai/openai-go/v3/responses"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/retry"
)

// generateResponse is Generate on the Responses API.
func (m *Model) generateResponse(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
	params, err := m.responseParams(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	streaming := stream != nil || !m.opts.NonStreaming
	return m.attempts(ctx, params.Model, streaming, func(actx context.Context, w *retry.Watchdog, out *retry.Outcome) (*llm.Response, error) {
		if streaming {
			return m.streamResponseOnce(actx, w, &params, stream, out)
		}
		return m.responseOnce(actx, w, &params, out)
	})
}

// responseOnce makes one non-streaming attempt.
func (m *Model) responseOnce(ctx context.Context, w *retry.Watchdog, p *responses.ResponseNewParams, out *retry.Outcome) (*llm.Response, error) {
	var hint retry.Hint
	r, err := m.responses.New(ctx, *p, m.attemptOptions(w, out, &hint)...)
	if err != nil {
		return nil, m.wrapErr(err, out, hint)
	}
	if err := m.responseFailure(r, out); err != nil {
		return nil, err
	}
	return fromResponse(r, r.Output), nil
}

// streamResponseOnce makes one streaming attempt, passing deltas to stream
// (which may be nil). The response is the terminal event's, its output
// items those the stream finished (see responseStream).
func (m *Model) streamResponseOnce(ctx context.Context, w *retry.Watchdog, p *responses.ResponseNewParams, stream func(llm.Delta), out *retry.Outcome) (*llm.Response, error) {
	var hint retry.Hint
	s := m.responses.NewStreaming(ctx, *p, m.attemptOptions(w, out, &hint)...)
	defer s.Close()
	st := responseStream{emit: out.Relay(stream)}
	for s.Next() {
		ev := s.Current()
		if err := st.add(&ev); err != nil {
			return nil, m.streamEventErr(err, out)
		}
	}
	if err := s.Err(); err != nil {
		return nil, m.wrapErr(err, out, hint)
	}
	if st.final == nil {
		return nil, retry.Transient(retry.ReasonStreamCut, fmt.Errorf("%s: stream ended before the response was completed", m.name))
	}
	if err := m.responseFailure(st.final, out); err != nil {
		return nil, err
	}
	return fromResponse(st.final, st.output()), nil
}

// responseFailure returns the error of a response whose status is failed
// (an *llm.APIError with the response's error code as its type), or nil.
func (m *Model) responseFailure(r *responses.Response, out *retry.Outcome) error {
	if r.Status != responses.ResponseStatusFailed {
		return nil
	}
	msg := r.Error.Message
	if msg == "" {
		msg = "the response failed without saying why"
	}
	return &llm.APIError{Provider: m.name, StatusCode: out.Status, Type: errType("", string(r.Error.Code)),
		Message: msg, RequestID: out.RequestID}
}

// streamEventErr turns what responseStream.add refused into deputy's
// error: an error event becomes an *llm.APIError of the attempt's status
// (200), retried when its code says the server failed; anything else is a
// stream that does not follow the protocol, retried as malformed.
func (m *Model) streamEventErr(err error, out *retry.Outcome) error {
	if ev, ok := err.(*errorEvent); ok {
		msg := ev.message
		if msg == "" {
			msg = "error event without a message"
		}
		return &llm.APIError{Provider: m.name, StatusCode: out.Status, Type: errType("", ev.code), Message: msg, RequestID: out.RequestID}
	}
	return retry.Transient(retry.ReasonMalformed, fmt.Errorf("%s: stream: %w", m.name, err))
}
