package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/retry"
)

// attemptOptions returns the per-attempt request options: retry's
// middleware, which records the response status and retry headers into out
// and hint and feeds the watchdog with the response's bytes.
func (m *Model) attemptOptions(req *llm.Request, w *retry.Watchdog, out *retry.Outcome, hint *retry.Hint) []option.RequestOption {
	opts := []option.RequestOption{option.WithMiddleware(m.policy.Middleware(w, out, hint, "request-id"))}
	if req.Temperature != nil {
		// The SDK's params have no temperature field; set it on the encoded
		// body, leaving the rest of the bytes as they are.
		opts = append(opts, option.WithJSONSet("temperature", *req.Temperature))
	}
	return opts
}

// once makes one non-streaming attempt.
func (m *Model) once(ctx context.Context, w *retry.Watchdog, req *llm.Request, p *sdk.MessageNewParams, out *retry.Outcome) (*llm.Response, error) {
	var hint retry.Hint
	msg, err := m.client.Messages.New(ctx, *p, m.attemptOptions(req, w, out, &hint)...)
	if err != nil {
		return nil, m.wrapErr(err, out, hint)
	}
	return toResponse(msg, nil), nil
}

// streamOnce makes one streaming attempt, passing deltas to stream (which
// may be nil) and accumulating the message with the SDK's accumulator.
func (m *Model) streamOnce(ctx context.Context, w *retry.Watchdog, req *llm.Request, p *sdk.MessageNewParams, stream func(llm.Delta), out *retry.Outcome) (*llm.Response, error) {
	var hint retry.Hint
	s := m.client.Messages.NewStreaming(ctx, *p, m.attemptOptions(req, w, out, &hint)...)
	defer s.Close()
	var acc sdk.Message
	// inputs[i] is block i's input_json_delta fragments as they came (see
	// toolInput for why not the accumulator's).
	var inputs [][]byte
	stopped := false
	emit := out.Relay(stream)
	for s.Next() {
		ev := s.Current()
		if err := acc.Accumulate(ev); err != nil {
			return nil, retry.Transient(retry.ReasonMalformed, fmt.Errorf("anthropic: stream: %w", err))
		}
		switch ev.Type {
		case "content_block_start":
			cb := &ev.ContentBlock
			switch cb.Type {
			case "tool_use":
				emit(llm.Delta{Index: int(ev.Index), Type: llm.TypeToolUse, ID: cb.ID, Name: cb.Name})
			case "text":
				if cb.Text != "" {
					emit(llm.Delta{Index: int(ev.Index), Type: llm.TypeText, Text: cb.Text})
				}
			case "thinking":
				if cb.Thinking != "" {
					emit(llm.Delta{Index: int(ev.Index), Type: "thinking", Text: cb.Thinking})
				}
			}
		case "content_block_delta":
			d := &ev.Delta
			switch d.Type {
			case "text_delta":
				emit(llm.Delta{Index: int(ev.Index), Type: llm.TypeText, Text: d.Text})
			case "input_json_delta":
				if d.PartialJSON != "" {
					// The accumulator accepted the event, so the index is
					// one of its blocks.
					for int(ev.Index) >= len(inputs) {
						inputs = append(inputs, nil)
					}
					inputs[ev.Index] = append(inputs[ev.Index], d.PartialJSON...)
					emit(llm.Delta{Index: int(ev.Index), Type: llm.TypeToolUse, Text: d.PartialJSON})
				}
			case "thinking_delta":
				emit(llm.Delta{Index: int(ev.Index), Type: "thinking", Text: d.Thinking})
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := s.Err(); err != nil {
		return nil, m.wrapErr(err, out, hint)
	}
	if !stopped {
		// The body ended cleanly but without message_stop: the connection
		// was closed early. The partial message is not an answer.
		return nil, retry.Transient(retry.ReasonStreamCut, errors.New("anthropic: stream ended before message_stop"))
	}
	return toResponse(&acc, inputs), nil
}

// wrapErr turns an attempt's error into deputy's: an *llm.APIError carrying
// the retry headers for an API error; a transient error for a response body
// that broke off or did not decode; the transport error otherwise. None of
// them carries request headers, so the key cannot leak.
func (m *Model) wrapErr(err error, out *retry.Outcome, hint retry.Hint) error {
	var se *sdk.Error
	if errors.As(err, &se) {
		ae := &llm.APIError{
			Provider:   ProviderName,
			StatusCode: se.StatusCode,
			Type:       string(se.Type()),
			Message:    se.Message,
			RequestID:  se.RequestID,
		}
		if ae.Message == "" {
			ae.Message = retry.BodySnippet(se.RawJSON(), se.StatusCode)
		}
		if ae.Type == "" {
			ae.Type = "error"
		}
		if hint.HasAfter {
			ae.RetryAfter = hint.After
		}
		return retry.WithHint(ae, hint)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("anthropic: %w", err)
	}
	if out.Status == http.StatusOK {
		return retry.BodyError(ProviderName, err)
	}
	return fmt.Errorf("anthropic: %w", err)
}
