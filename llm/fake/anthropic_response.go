package fake

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// The Anthropic Messages API: responses, JSON and SSE.

// anthropicMessages answers POST /v1/messages.
func (s *Server) anthropicMessages(ex *exchange) {
	d, werr := decodeAnthropic(ex.entry.Body, false, s.threads())
	if werr != nil {
		ex.fail(werr)
		return
	}
	ex.entry.Request, ex.entry.Stream = d.req, d.stream
	// The turn ends however the handler does: a cut_stream fault ends it
	// by panicking with http.ErrAbortHandler, and a continue it left in
	// flight would refuse every later continue from that message.
	finished := false
	defer func() {
		if !finished {
			d.thread.abandon()
		}
	}()
	m, reply, ok := s.anthropicAnswer(ex, d)
	if ok && reply != nil {
		d.thread.finish(m.ID, reply)
		finished = true
	}
}

// anthropicAnswer generates and sends the answer to d. It returns the
// message and, when the whole of it reached the client, the assistant
// message a thread holds; ok is false when no answer began.
func (s *Server) anthropicAnswer(ex *exchange, d *anthDecoded) (anthMessageOut, json.RawMessage, bool) {
	lim := wireLimits{maxTokens: d.maxTokens, stop: d.req.StopSequences}
	g, ok := s.generate(ex, d.req, lim, d.stream, "toolu_01", func() cachePlan { return s.cache.planAnthropic(d.elems) })
	if !ok {
		return anthMessageOut{}, nil, false
	}
	if d.thinkingOmitted {
		omitThinking(g)
	}
	if d.schema != nil {
		if err := applySchema(g, d.schema); err != nil {
			ex.fail(internalErr(err))
			return anthMessageOut{}, nil, false
		}
	}
	if !s.begin(ex, g) {
		return anthMessageOut{}, nil, false
	}
	m := anthMessageOut{ID: s.newID("msg_01", 22), Type: "message", Role: "assistant", Model: d.req.Model, Content: []json.RawMessage{}}
	if d.contextManagement {
		m.ContextManagement = &anthContextManagementOut{AppliedEdits: []json.RawMessage{}}
	}
	content := make([]json.RawMessage, 0, len(g.content))
	for i := range g.content {
		content = append(content, anthBlockJSON(&g.content[i]))
	}
	var err error
	if d.stream {
		err = s.anthropicStream(ex, g, m)
	} else {
		err = s.anthropicWhole(ex, g, m, content)
	}
	if err != nil || g.fault != nil {
		return m, nil, true
	}
	return m, mustJSON(anthReplyMessage{Role: "assistant", Content: content}), true
}

// anthReplyMessage is an answer as the conversation holds it.
type anthReplyMessage struct {
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}

// anthropicWhole sends a non-streamed answer after its output latency.
func (s *Server) anthropicWhole(ex *exchange, g *generation, m anthMessageOut, content []json.RawMessage) error {
	if err := clock.Sleep(ex.r.Context(), s.clock, time.Duration(g.output)*g.perToken); err != nil {
		ex.record(statusClientGone)
		return err
	}
	m.Content = content
	stop := string(g.stop)
	m.StopReason = &stop
	if g.stopSeq != "" {
		m.StopSequence = &g.stopSeq
	}
	m.Usage = anthUsageOut(g, g.output, true)
	ex.startHeaders(false)
	return newBodyWriter(ex.w, g.fault).whole(mustJSON(m))
}

// statusClientGone is logged for a request whose client left before the
// response began (nginx's convention).
const statusClientGone = 499

// begin waits out the first-byte latency and makes the request's cache
// writes readable: from here on the response has begun.
func (s *Server) begin(ex *exchange, g *generation) bool {
	if g.first > 0 {
		ex.log() // in flight: Status 0 until the wait ends
	}
	if err := clock.Sleep(ex.r.Context(), s.clock, g.first); err != nil {
		ex.record(statusClientGone)
		return false
	}
	if g.plan != nil {
		s.cache.publish(g.plan)
	}
	return true
}

// anthMessageOut is a message object. context_management is there when
// the request asked for context edits (BetaMessage.ContextManagement).
// The SDKs' container and stop_details are left out, as in the documented
// responses (testdata/golden): the fake runs no container and refuses
// nothing.
type anthMessageOut struct {
	ID                string                    `json:"id"`
	Type              string                    `json:"type"`
	Role              string                    `json:"role"`
	Model             string                    `json:"model"`
	Content           []json.RawMessage         `json:"content"`
	StopReason        *string                   `json:"stop_reason"`
	StopSequence      *string                   `json:"stop_sequence"`
	ContextManagement *anthContextManagementOut `json:"context_management,omitempty"`
	Usage             anthUsage                 `json:"usage"`
}

// anthContextManagementOut reports the context edits applied; the fake
// never needs to clear anything, so the list is empty.
type anthContextManagementOut struct {
	AppliedEdits []json.RawMessage `json:"applied_edits"`
}

type anthUsage struct {
	InputTokens              int                `json:"input_tokens"`
	CacheCreationInputTokens int                `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int                `json:"cache_read_input_tokens"`
	CacheCreation            *anthCacheCreation `json:"cache_creation,omitempty"`
	OutputTokens             int                `json:"output_tokens"`
	ServiceTier              string             `json:"service_tier,omitempty"`
}

type anthCacheCreation struct {
	Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
}

// anthUsageOut renders usage; full adds the TTL breakdown and service tier
// that message objects carry (message_delta's usage has neither).
func anthUsageOut(g *generation, output int, full bool) anthUsage {
	u := anthUsage{
		InputTokens:              g.usage.Input,
		CacheCreationInputTokens: g.usage.Write(),
		CacheReadInputTokens:     g.usage.Read,
		OutputTokens:             output,
	}
	if full {
		u.CacheCreation = &anthCacheCreation{Ephemeral5m: g.usage.Write5m, Ephemeral1h: g.usage.Write1h}
		u.ServiceTier = "standard"
	}
	return u
}

type anthTextOut struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthToolUseOut struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthThinkingOut struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

// anthInput is a finished tool_use block's input. A non-streamed response
// is one JSON document, so arguments that are not an object (a scenario's
// raw_input) can be only a JSON value of another kind: raw_input itself
// when it is one (`"text"`, `[1]`), else a JSON string holding its text.
// Either way the client sees an input that is not an object.
func anthInput(b *llm.Block) json.RawMessage {
	if b.InvalidInput == "" {
		return b.Input
	}
	if json.Valid([]byte(b.InvalidInput)) {
		return json.RawMessage(b.InvalidInput)
	}
	return appendJSONString(nil, b.InvalidInput)
}

// anthBlockJSON renders a finished content block.
func anthBlockJSON(b *llm.Block) json.RawMessage {
	switch b.Type {
	case llm.TypeText:
		return mustJSON(anthTextOut{Type: "text", Text: b.Text})
	case llm.TypeToolUse:
		return mustJSON(anthToolUseOut{Type: "tool_use", ID: b.ID, Name: b.Name, Input: anthInput(b)})
	}
	return b.Raw
}

// Stream event payloads.
type (
	anthMessageStart struct {
		Type    string         `json:"type"`
		Message anthMessageOut `json:"message"`
	}
	anthBlockStart struct {
		Type         string          `json:"type"`
		Index        int             `json:"index"`
		ContentBlock json.RawMessage `json:"content_block"`
	}
	anthTextDelta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	anthJSONDelta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}
	anthThinkingDelta struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	anthSignatureDelta struct {
		Type      string `json:"type"`
		Signature string `json:"signature"`
	}
	anthBlockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	anthMessageDelta struct {
		Type  string             `json:"type"`
		Delta anthMessageDeltaIn `json:"delta"`
		Usage anthUsage          `json:"usage"`
	}
	anthMessageDeltaIn struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	anthTypeOnly struct {
		Type string `json:"type"`
	}
)

// anthDeltaEvent is a content_block_delta event carrying a delta of type D.
type anthDeltaEvent[D any] struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta D      `json:"delta"`
}

// anthStream writes one Messages stream. The delta events live in the
// stream and are refilled for each delta, so encoding one allocates
// nothing of its own.
type anthStream struct {
	s   *Server
	ex  *exchange
	g   *generation
	bw  *bodyWriter
	buf bytes.Buffer
	enc *frameEncoder

	textEv  anthDeltaEvent[anthTextDelta]
	jsonEv  anthDeltaEvent[anthJSONDelta]
	thinkEv anthDeltaEvent[anthThinkingDelta]
	sigEv   anthDeltaEvent[anthSignatureDelta]
}

// emit encodes v as the data of event name.
func (st *anthStream) emit(name string, v any, last bool) error {
	st.buf.Reset()
	if err := st.enc.encode(v); err != nil {
		return err
	}
	return st.bw.event(name, st.buf.Bytes(), last)
}

// sendDelta sends one content delta after its share of per-token latency.
func sendDelta[D any](st *anthStream, ev *anthDeltaEvent[D], index int, d D, p *pacer, n int) error {
	if err := clock.Sleep(st.ex.r.Context(), st.s.clock, time.Duration(p.next(n))*st.g.perToken); err != nil {
		return err
	}
	ev.Type, ev.Index, ev.Delta = "content_block_delta", index, d
	return st.emit("content_block_delta", ev, false)
}

func (s *Server) anthropicStream(ex *exchange, g *generation, m anthMessageOut) error {
	st := &anthStream{s: s, ex: ex, g: g, bw: newBodyWriter(ex.w, g.fault)}
	st.bw.flushEach = g.perToken > 0
	st.enc = newFrameEncoder(&st.buf)
	st.bw.errFrame = func() (string, []byte) {
		// As documented, a mid-stream error event carries no request_id:
		// the response headers already did.
		return "error", mustJSON(anthropicErrorBody{Type: "error", Error: anthropicErrorInner{Type: "overloaded_error", Message: "Overloaded"}})
	}
	st.bw.badFrame = func() (string, []byte) {
		return "content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`)
	}
	ex.startHeaders(true)
	return st.run(m) // a write error means the client left; a fault ends on purpose
}

func (st *anthStream) run(m anthMessageOut) error {
	g := st.g
	start := m
	start.Usage = anthUsageOut(g, min(g.output, 1), true)
	if err := st.emit("message_start", anthMessageStart{Type: "message_start", Message: start}, false); err != nil {
		return err
	}
	for i := range g.content {
		if err := st.block(i, &g.content[i]); err != nil {
			return err
		}
	}
	md := anthMessageDelta{Type: "message_delta", Delta: anthMessageDeltaIn{StopReason: string(g.stop)}, Usage: anthUsageOut(g, g.output, false)}
	if g.stopSeq != "" {
		md.Delta.StopSequence = &g.stopSeq
	}
	if err := st.emit("message_delta", md, false); err != nil {
		return err
	}
	return st.emit("message_stop", anthTypeOnly{Type: "message_stop"}, true)
}

// block streams content block i: start, deltas, stop.
func (st *anthStream) block(i int, b *llm.Block) error {
	g := st.g
	var startBlock json.RawMessage
	var think anthThinkingOut
	switch b.Type {
	case llm.TypeText:
		startBlock = mustJSON(anthTextOut{Type: "text"})
	case llm.TypeToolUse:
		startBlock = mustJSON(anthToolUseOut{Type: "tool_use", ID: b.ID, Name: b.Name, Input: json.RawMessage(`{}`)})
	case "thinking":
		if json.Unmarshal(b.Raw, &think) == nil {
			startBlock = mustJSON(anthThinkingOut{Type: "thinking"})
			break
		}
		fallthrough
	default:
		startBlock = b.Raw
	}
	if err := st.emit("content_block_start", anthBlockStart{Type: "content_block_start", Index: i, ContentBlock: startBlock}, false); err != nil {
		return err
	}
	if i == 0 {
		// The API pings right after the first block starts.
		if err := st.emit("ping", anthTypeOnly{Type: "ping"}, false); err != nil {
			return err
		}
	}
	switch {
	case b.Type == llm.TypeText:
		p := newPacer(llm.EstimateOutput([]llm.Block{*b}), len(b.Text))
		for _, piece := range g.textPieces(b.Text) {
			if err := sendDelta(st, &st.textEv, i, anthTextDelta{Type: "text_delta", Text: piece}, p, len(piece)); err != nil {
				return err
			}
		}
	case b.Type == llm.TypeToolUse:
		// The API's first input fragment is empty; the rest cut the JSON
		// text anywhere.
		// Arguments that are not a JSON object (a scenario's raw_input)
		// stream as they are: fragments that never make an object, as a
		// stream cut short or a model that lost its way sends them.
		args := b.Arguments()
		p := newPacer(llm.EstimateOutput([]llm.Block{*b}), len(args))
		if err := sendDelta(st, &st.jsonEv, i, anthJSONDelta{Type: "input_json_delta"}, p, 0); err != nil {
			return err
		}
		for _, piece := range g.jsonPieces(args) {
			if err := sendDelta(st, &st.jsonEv, i, anthJSONDelta{Type: "input_json_delta", PartialJSON: piece}, p, len(piece)); err != nil {
				return err
			}
		}
	case think.Type == "thinking":
		p := newPacer(llm.EstimateOutput([]llm.Block{*b}), len(think.Thinking)+len(think.Signature))
		for _, piece := range g.textPieces(think.Thinking) {
			if err := sendDelta(st, &st.thinkEv, i, anthThinkingDelta{Type: "thinking_delta", Thinking: piece}, p, len(piece)); err != nil {
				return err
			}
		}
		if think.Signature != "" {
			if err := sendDelta(st, &st.sigEv, i, anthSignatureDelta{Type: "signature_delta", Signature: think.Signature}, p, len(think.Signature)); err != nil {
				return err
			}
		}
	default:
		// An opaque block arrives whole in its start event.
		p := newPacer(llm.EstimateOutput([]llm.Block{*b}), 0)
		if err := clock.Sleep(st.ex.r.Context(), st.s.clock, time.Duration(p.next(0))*g.perToken); err != nil {
			return err
		}
	}
	return st.emit("content_block_stop", anthBlockStop{Type: "content_block_stop", Index: i}, false)
}

// anthropicCountTokens answers POST /v1/messages/count_tokens with the
// package's one token-counting rule.
func (s *Server) anthropicCountTokens(ex *exchange) {
	d, werr := decodeAnthropic(ex.entry.Body, true, nil)
	if werr != nil {
		ex.fail(werr)
		return
	}
	ex.entry.Request = d.req
	n := 0
	if len(d.elems) > 0 {
		n = d.elems[len(d.elems)-1].tokens
	}
	ex.startHeaders(false)
	_, _ = ex.w.Write(mustJSON(struct {
		InputTokens int `json:"input_tokens"`
	}{n}))
}
