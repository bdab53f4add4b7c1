package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// Model is the in-process scripted model: an llm.Model that answers from a
// Scenario without any wire, for tests, benchmarks and the offline demo. It
// applies the scenario's latency on its clock and its faults as the errors a
// real provider would give, ends answers at the request's stop sequences and
// max_tokens exactly as the fake server does, and streams deltas the way a
// provider does.
// It is safe for concurrent use.
type Model struct {
	s         *Scenario
	clock     clock.Clock
	noLatency bool
	n         atomic.Int64
}

// ModelOption configures a Model.
type ModelOption func(*Model)

// WithModelClock makes the model wait for latency on c (default
// clock.Real); tests pass a *clock.Fake.
func WithModelClock(c clock.Clock) ModelOption {
	return func(m *Model) { m.clock = c }
}

// WithoutLatency makes the model ignore the scenario's latency (faults'
// delays included), for tests of a scenario written to look alive in a
// demo.
func WithoutLatency() ModelOption {
	return func(m *Model) { m.noLatency = true }
}

// NewModel returns a scripted model playing s. A nil s answers every request
// with DefaultText.
func NewModel(s *Scenario, opts ...ModelOption) *Model {
	m := &Model{s: s, clock: clock.Real}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Requests returns how many requests the model has received.
func (m *Model) Requests() int { return int(m.n.Load()) }

var _ llm.Model = (*Model)(nil)

// Generate answers req from the scenario.
func (m *Model) Generate(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
	if req == nil {
		return nil, errors.New("fake: nil request")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := int(m.n.Add(1))
	rep, compiled := m.s.respond(req, RequestInfo{Provider: InProcess, N: n})

	firstByte, perToken := rep.FirstByte, rep.PerToken
	if rep.Fault != nil && rep.Fault.Kind == FaultSlowFirstByte {
		firstByte += rep.Fault.Delay
	}
	if m.noLatency {
		firstByte, perToken = 0, 0
	}
	if err := clock.Sleep(ctx, m.clock, firstByte); err != nil {
		return nil, err
	}
	if err := faultError(rep.Fault); err != nil {
		return nil, err
	}

	// The same ending as over HTTP: stop sequences and max_tokens cut the
	// content, and the stop reason follows.
	var stopSeq string
	rep.Content, rep.StopReason, stopSeq = endAnswer(rep.Content, rep.StopReason, requestLimits(req))
	out := llm.EstimateOutput(rep.Content)
	cutAt := -1 // bytes of deltas after which the stream breaks; -1: never
	if f := rep.Fault; f != nil && (f.Kind == FaultCutStream || f.Kind == FaultErrorEvent) {
		cutAt = f.AfterBytes
		if cutAt == 0 {
			cutAt = (contentBytes(rep.Content) + 1) / 2
		}
	}
	switch {
	case stream != nil || cutAt >= 0:
		if err := m.play(ctx, &rep, compiled, stream, perToken, cutAt); err != nil {
			return nil, err
		}
	case perToken > 0:
		if err := clock.Sleep(ctx, m.clock, perToken*time.Duration(out)); err != nil {
			return nil, err
		}
	}

	resp := &llm.Response{
		ID:           responseID(m.s.seedOrZero(), n),
		Model:        req.Model,
		Content:      rep.Content,
		StopReason:   rep.StopReason,
		StopSequence: stopSeq,
	}
	if rep.Usage != nil {
		resp.Usage = *rep.Usage
	} else {
		resp.Usage = llm.Usage{InputTokens: int64(llm.EstimateRequest(req)), OutputTokens: int64(out)}
	}
	return resp, nil
}

// faultError is the error a fault that fails the whole request turns into:
// the same *llm.APIError a real provider's adapter returns, so retry logic
// is tested as it runs in production.
func faultError(f *Fault) error {
	if f == nil {
		return nil
	}
	switch f.Kind {
	case FaultRateLimit:
		return &llm.APIError{Provider: "fake", StatusCode: 429, Type: "rate_limit_error",
			Message: "fake: injected rate limit", RetryAfter: f.RetryAfter}
	case FaultOverloaded:
		return &llm.APIError{Provider: "fake", StatusCode: 529, Type: "overloaded_error",
			Message: "fake: injected overload", RetryAfter: f.RetryAfter}
	case FaultServerError:
		return &llm.APIError{Provider: "fake", StatusCode: 500, Type: "api_error",
			Message: "fake: injected server error", RetryAfter: f.RetryAfter}
	case FaultMalformedJSON:
		// A real decoder meeting a broken body fails with a syntax error;
		// produce a genuine one rather than a look-alike.
		var v any
		err := json.Unmarshal([]byte(`{"type":"message","content":[{"type":"te`), &v)
		return fmt.Errorf("fake: decode response: %w", err)
	}
	return nil
}

// errStreamCut is returned when a cut_stream fault breaks a stream; it wraps
// io.ErrUnexpectedEOF, which is what an SDK reading a dropped connection
// reports.
var errStreamCut = fmt.Errorf("fake: stream cut by an injected fault: %w", io.ErrUnexpectedEOF)

// play streams rep as deltas: each text block in a few fragments, each
// tool_use as a first delta carrying ID and Name and then fragments of its
// input JSON. perToken delays each fragment by its estimated tokens. At
// cutAt bytes of fragments (when cutAt >= 0) the stream breaks with the
// fault's error.
func (m *Model) play(ctx context.Context, rep *Reply, compiled *reply, stream func(llm.Delta), perToken time.Duration, cutAt int) error {
	sent := 0
	emit := func(d llm.Delta) error {
		if cutAt >= 0 && sent >= cutAt {
			if rep.Fault.Kind == FaultErrorEvent {
				return &llm.APIError{Provider: "fake", StatusCode: 529, Type: "overloaded_error",
					Message: "fake: injected error event in the stream", RetryAfter: rep.Fault.RetryAfter}
			}
			return errStreamCut
		}
		if perToken > 0 && (d.Text != "" || d.Name != "") {
			// A tool call's name is output too (llm.EstimateOutput).
			tokens := llm.EstimateTokens(d.Text) + llm.EstimateTokens(d.Name)
			if err := clock.Sleep(ctx, m.clock, perToken*time.Duration(tokens)); err != nil {
				return err
			}
		}
		if cutAt >= 0 && sent+len(d.Text) > cutAt {
			d.Text = d.Text[:cutAt-sent]
			for len(d.Text) > 0 && !utf8.ValidString(d.Text) {
				d.Text = d.Text[:len(d.Text)-1]
			}
		}
		sent += len(d.Text)
		if stream != nil {
			stream(d)
		}
		return nil
	}
	for i := range rep.Content {
		b := &rep.Content[i]
		switch b.Type {
		case llm.TypeText:
			if err := fragments(b.Text, func(s string) error {
				return emit(llm.Delta{Index: i, Type: llm.TypeText, Text: s})
			}); err != nil {
				return err
			}
		case llm.TypeToolUse:
			if err := emit(llm.Delta{Index: i, Type: llm.TypeToolUse, ID: b.ID, Name: b.Name}); err != nil {
				return err
			}
			input, ok := compiled.staticInput(b.Input)
			if !ok {
				input = b.Arguments() // as they are when not an object (raw_input)
			}
			if err := fragments(input, func(s string) error {
				return emit(llm.Delta{Index: i, Type: llm.TypeToolUse, Text: s})
			}); err != nil {
				return err
			}
		default:
			// An opaque block streams as one fragment of its text, when it
			// has one (thinking does).
			var body struct {
				Thinking string `json:"thinking"`
			}
			_ = json.Unmarshal(b.Raw, &body)
			if err := emit(llm.Delta{Index: i, Type: b.Type, Text: body.Thinking}); err != nil {
				return err
			}
		}
	}
	if cutAt >= 0 {
		// Everything fit before the cut point: the break comes at the end,
		// as a stream that never delivers its final event.
		sent = cutAt
		return emit(llm.Delta{})
	}
	return nil
}

// fragments calls f with s cut into a few pieces at rune boundaries: one
// piece up to 16 bytes, at most four. Providers cut anywhere; a few pieces
// are enough to exercise reassembly without costing time.
func fragments(s string, f func(string) error) error {
	k := len(s)/16 + 1
	if k > 4 {
		k = 4
	}
	start := 0
	for j := 1; j <= k; j++ {
		end := len(s) * j / k
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		if end <= start && j < k {
			continue
		}
		if err := f(s[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// contentBytes is how many bytes of deltas content streams as.
func contentBytes(content []llm.Block) int {
	n := 0
	for i := range content {
		n += len(content[i].Text) + len(content[i].Input) + len(content[i].InvalidInput) + len(content[i].Raw)
	}
	return n
}

func (s *Scenario) seedOrZero() int64 {
	if s == nil {
		return 0
	}
	return s.seed
}

// responseID is a deterministic message ID for request n.
func responseID(seed int64, n int) string {
	var buf [28]byte
	k := copy(buf[:], "msg_")
	k += putID(buf[k:], uint64(seed)^mix64(uint64(n)))
	return string(buf[:k])
}
