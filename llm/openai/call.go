package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/retry"
)

// attemptOptions returns the per-attempt request options: retry's
// middleware, which records the response status and retry headers and
// feeds the watchdog with the response's bytes.
func (m *Model) attemptOptions(w *retry.Watchdog, out *retry.Outcome, hint *retry.Hint) []option.RequestOption {
	return []option.RequestOption{option.WithMiddleware(m.policy.Middleware(w, out, hint, "x-request-id"))}
}

// once makes one non-streaming attempt.
func (m *Model) once(ctx context.Context, w *retry.Watchdog, p *sdk.ChatCompletionNewParams, out *retry.Outcome) (*llm.Response, error) {
	var hint retry.Hint
	cc, err := m.service.New(ctx, *p, m.attemptOptions(w, out, &hint)...)
	if err != nil {
		return nil, m.wrapErr(err, out, hint)
	}
	if len(cc.Choices) == 0 {
		return nil, retry.Transient(retry.ReasonMalformed, fmt.Errorf("%s: response has no choices", m.name))
	}
	return toResponse(cc, nil), nil
}

// streamOnce makes one streaming attempt, passing deltas to stream (which
// may be nil) and assembling the completion with the SDK's accumulator.
func (m *Model) streamOnce(ctx context.Context, w *retry.Watchdog, p *sdk.ChatCompletionNewParams, stream func(llm.Delta), out *retry.Outcome) (*llm.Response, error) {
	var hint retry.Hint
	s := m.service.NewStreaming(ctx, *p, m.attemptOptions(w, out, &hint)...)
	defer s.Close()
	var acc sdk.ChatCompletionAccumulator
	var st streamState
	emit := out.Relay(stream)
	for s.Next() {
		chunk := s.Current()
		st.fixToolIndexes(&chunk)
		// Always numbered, even without a callback: the order blocks
		// appeared in is the order of the response's content.
		st.emit(&chunk, emit)
		for i := range chunk.Choices {
			if chunk.Choices[i].FinishReason != "" {
				st.finished = true
			}
		}
		if !acc.AddChunk(chunk) {
			return nil, retry.Transient(retry.ReasonMalformed, fmt.Errorf("%s: stream chunk does not continue the completion", m.name))
		}
	}
	if err := s.Err(); err != nil {
		return nil, m.wrapErr(err, out, hint)
	}
	if !st.finished || len(acc.Choices) == 0 {
		// The body ended without a finish_reason: the connection was closed
		// early. (Servers that ignore include_usage still send one.)
		return nil, retry.Transient(retry.ReasonStreamCut, fmt.Errorf("%s: stream ended before finish_reason", m.name))
	}
	return toResponse(&acc.ChatCompletion, st.order), nil
}

// wrapErr turns an attempt's error into deputy's: an *llm.APIError (with
// the retry headers) for an error the server answered, before or inside the
// stream; a transient error for a body that broke off or did not decode;
// the transport error otherwise. None carries request headers.
func (m *Model) wrapErr(err error, out *retry.Outcome, hint retry.Hint) error {
	var se *sdk.Error
	if errors.As(err, &se) {
		ae := &llm.APIError{
			Provider:   m.name,
			StatusCode: se.StatusCode,
			Type:       errType(se.Type, se.Code),
			Message:    se.Message,
		}
		if se.Response != nil {
			ae.RequestID = se.Response.Header.Get("x-request-id")
		}
		if ae.Message == "" {
			ae.Message = retry.BodySnippet(se.RawJSON(), se.StatusCode)
		}
		if hint.HasAfter {
			ae.RetryAfter = hint.After
		}
		return retry.WithHint(ae, hint)
	}
	var ev *ssestream.StreamError
	if errors.As(err, &ev) {
		// An error object inside a 200 stream.
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(ev.Event.Data, &body)
		code, _ := body.Error.Code.(string)
		ae := &llm.APIError{Provider: m.name, StatusCode: out.Status, Type: errType(body.Error.Type, code),
			Message: body.Error.Message, RequestID: out.RequestID}
		if ae.Message == "" {
			ae.Message = retry.BodySnippet(string(ev.Event.Data), 0)
		}
		return ae
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", m.name, err)
	}
	if out.Status == http.StatusOK {
		return retry.BodyError(m.name, err)
	}
	return fmt.Errorf("%s: %w", m.name, err)
}

// errType picks the most specific error kind: OpenAI's code
// (rate_limit_exceeded, insufficient_quota, invalid_api_key) over its type.
func errType(typ, code string) string {
	switch {
	case code != "":
		return code
	case typ != "":
		return typ
	}
	return "error"
}
