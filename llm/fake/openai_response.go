package fake

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// The OpenAI Chat Completions API: responses, JSON and SSE.

// oaiFingerprint is the system_fingerprint the fake reports.
const oaiFingerprint = "fp_de9u7yfa4e"

// openaiChat answers POST /v1/chat/completions.
func (s *Server) openaiChat(ex *exchange) {
	d, werr := decodeOpenAI(ex.entry.Body)
	if werr != nil {
		ex.fail(werr)
		return
	}
	ex.entry.Request, ex.entry.Stream = d.req, d.stream
	lim := wireLimits{maxTokens: d.maxTokens, stop: d.req.StopSequences}
	g, ok := s.generate(ex, d.req, lim, d.stream, "call_", func() cachePlan { return s.cache.planOpenAI(d.elems, d.retention) })
	if !ok {
		return
	}
	if err := d.shape(g); err != nil {
		ex.fail(internalErr(err))
		return
	}
	if !s.begin(ex, g) {
		return
	}
	id := s.newID("chatcmpl-", 29)
	created := s.clock.Now().Unix()
	if d.stream {
		s.openaiStream(ex, g, d, id, created)
		return
	}
	if clock.Sleep(ex.r.Context(), s.clock, time.Duration(g.output)*g.perToken) != nil {
		ex.record(statusClientGone)
		return
	}
	msg := oaiMessageOut{Role: "assistant", Annotations: []json.RawMessage{}}
	var text bytes.Buffer
	hasText := false
	for i := range g.content {
		b := &g.content[i]
		switch b.Type {
		case llm.TypeText:
			text.WriteString(b.Text)
			hasText = true
		case llm.TypeToolUse:
			msg.ToolCalls = append(msg.ToolCalls, oaiToolCallOut{ID: b.ID, Type: "function", Function: oaiFunctionOut{Name: b.Name, Arguments: b.Arguments()}})
		}
	}
	if hasText {
		s := text.String()
		if d.refusal(g) {
			msg.Refusal = &s
		} else {
			msg.Content = &s
		}
	}
	out := oaiCompletion{
		ID: id, Object: "chat.completion", Created: created, Model: d.req.Model,
		Choices:     []oaiChoice{{Index: 0, Message: msg, FinishReason: d.finishReason(g)}},
		Usage:       oaiUsageOut(g),
		ServiceTier: d.serviceTier, SystemFingerprint: oaiFingerprint,
	}
	ex.startHeaders(false)
	_ = newBodyWriter(ex.w, g.fault).whole(mustJSON(out))
}

// oaiFinishReason maps deputy's stop reasons onto finish_reason.
func oaiFinishReason(r llm.StopReason) string {
	switch r {
	case llm.StopToolUse:
		return "tool_calls"
	case llm.StopMaxTokens, llm.StopContextLimit:
		return "length"
	case llm.StopRefusal:
		return "content_filter"
	}
	return "stop"
}

type oaiCompletion struct {
	ID                string      `json:"id"`
	Object            string      `json:"object"`
	Created           int64       `json:"created"`
	Model             string      `json:"model"`
	Choices           []oaiChoice `json:"choices"`
	Usage             oaiUsage    `json:"usage"`
	ServiceTier       string      `json:"service_tier"`
	SystemFingerprint string      `json:"system_fingerprint"`
}

type oaiChoice struct {
	Index        int           `json:"index"`
	Message      oaiMessageOut `json:"message"`
	Logprobs     *struct{}     `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

type oaiMessageOut struct {
	Role        string            `json:"role"`
	Content     *string           `json:"content"`
	Refusal     *string           `json:"refusal"`
	ToolCalls   []oaiToolCallOut  `json:"tool_calls,omitempty"`
	Annotations []json.RawMessage `json:"annotations"`
}

type oaiToolCallOut struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function oaiFunctionOut `json:"function"`
}

type oaiFunctionOut struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaiUsage struct {
	PromptTokens            int                  `json:"prompt_tokens"`
	CompletionTokens        int                  `json:"completion_tokens"`
	TotalTokens             int                  `json:"total_tokens"`
	PromptTokensDetails     oaiPromptDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails oaiCompletionDetails `json:"completion_tokens_details"`
}

type oaiPromptDetails struct {
	CachedTokens int `json:"cached_tokens"`
	AudioTokens  int `json:"audio_tokens"`
}

type oaiCompletionDetails struct {
	ReasoningTokens          int `json:"reasoning_tokens"`
	AudioTokens              int `json:"audio_tokens"`
	AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
}

// oaiUsageOut renders usage: prompt_tokens is the whole prompt, cached
// tokens included; opaque output blocks (thinking) count as reasoning.
func oaiUsageOut(g *generation) oaiUsage {
	prompt := g.usage.Input + g.usage.Read + g.usage.Write()
	reasoning := 0
	for i := range g.content {
		if t := g.content[i].Type; t != llm.TypeText && t != llm.TypeToolUse {
			reasoning += llm.EstimateOutput(g.content[i : i+1])
		}
	}
	return oaiUsage{
		PromptTokens: prompt, CompletionTokens: g.output, TotalTokens: prompt + g.output,
		PromptTokensDetails:     oaiPromptDetails{CachedTokens: g.usage.Read},
		CompletionTokensDetails: oaiCompletionDetails{ReasoningTokens: min(reasoning, g.output)},
	}
}

// Stream chunk payloads.
type (
	oaiChunk struct {
		ID                string           `json:"id"`
		Object            string           `json:"object"`
		Created           int64            `json:"created"`
		Model             string           `json:"model"`
		ServiceTier       string           `json:"service_tier"`
		SystemFingerprint string           `json:"system_fingerprint"`
		Choices           []oaiChunkChoice `json:"choices"`
		// Usage is null on every chunk but the last when include_usage is
		// set, and absent otherwise.
		Usage json.RawMessage `json:"usage,omitempty"`
	}
	oaiChunkChoice struct {
		Index int `json:"index"`
		// Delta is *oaiFirstDelta or *oaiDeltaOut.
		Delta        any       `json:"delta"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason *string   `json:"finish_reason"`
	}
	// oaiFirstDelta opens the message: role, and content "" (or null when
	// a tool call comes first) and refusal null, spelled out.
	oaiFirstDelta struct {
		Role      string             `json:"role"`
		Content   json.RawMessage    `json:"content"`
		ToolCalls []oaiToolCallDelta `json:"tool_calls,omitempty"`
		Refusal   json.RawMessage    `json:"refusal"`
	}
	oaiDeltaOut struct {
		Content   *string            `json:"content,omitempty"`
		Refusal   *string            `json:"refusal,omitempty"`
		ToolCalls []oaiToolCallDelta `json:"tool_calls,omitempty"`
	}
	oaiToolCallDelta struct {
		Index    int              `json:"index"`
		ID       string           `json:"id,omitempty"`
		Type     string           `json:"type,omitempty"`
		Function oaiFunctionDelta `json:"function"`
	}
	oaiFunctionDelta struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
)

var (
	jsonNull        = json.RawMessage("null")
	jsonEmptyString = json.RawMessage(`""`)
)

// oaiStream writes one Chat Completions stream. The chunk and its deltas
// live in the stream and are refilled for each frame, so encoding one
// allocates nothing of its own.
type oaiStream struct {
	s     *Server
	ex    *exchange
	g     *generation
	d     *oaiDecoded
	bw    *bodyWriter
	chunk oaiChunk
	buf   bytes.Buffer
	enc   *frameEncoder

	first oaiFirstDelta
	delta oaiDeltaOut
	text  string
	call  [1]oaiToolCallDelta

	// opened is set once the first delta (the role) has gone out; tool
	// numbers the tool calls sent so far, as the wire's index does.
	opened bool
	tool   int
}

// emit sends one chunk holding delta (and finish reason, if set).
func (st *oaiStream) emit(delta any, finish *string) error {
	st.chunk.Choices[0] = oaiChunkChoice{Index: 0, Delta: delta, FinishReason: finish}
	return st.send()
}

// send encodes the chunk as it stands and writes it as one frame.
func (st *oaiStream) send() error {
	st.buf.Reset()
	if err := st.enc.encode(&st.chunk); err != nil {
		return err
	}
	return st.bw.event("", st.buf.Bytes(), false)
}

func (s *Server) openaiStream(ex *exchange, g *generation, d *oaiDecoded, id string, created int64) {
	st := &oaiStream{s: s, ex: ex, g: g, d: d, bw: newBodyWriter(ex.w, g.fault)}
	st.bw.flushEach = g.perToken > 0
	st.enc = newFrameEncoder(&st.buf)
	st.chunk = oaiChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: d.req.Model,
		ServiceTier: d.serviceTier, SystemFingerprint: oaiFingerprint, Choices: make([]oaiChunkChoice, 1)}
	if d.includeUsage {
		st.chunk.Usage = jsonNull
	}
	st.bw.errFrame = func() (string, []byte) {
		return "", mustJSON((&wireError{kind: errOverloaded}).openaiBody())
	}
	st.bw.badFrame = func() (string, []byte) {
		return "", []byte(`{"id":"` + id + `","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`)
	}
	ex.startHeaders(true)
	_ = st.run(d.includeUsage)
}

// run streams the generation: each content block as its deltas, then the
// finish chunk, the usage chunk if asked for, and [DONE].
func (st *oaiStream) run(includeUsage bool) error {
	for i := range st.g.content {
		if err := st.block(i); err != nil {
			return err
		}
	}
	if !st.opened {
		// Even an empty reply opens the message before it finishes.
		if err := st.open(jsonEmptyString, nil); err != nil {
			return err
		}
	}
	finish := st.d.finishReason(st.g)
	st.delta = oaiDeltaOut{}
	if err := st.emit(&st.delta, &finish); err != nil {
		return err
	}
	if includeUsage {
		if err := st.usage(); err != nil {
			return err
		}
	}
	return st.bw.event("", []byte("[DONE]"), true)
}

// block streams content block i in the form its type takes on this wire.
func (st *oaiStream) block(i int) error {
	b := &st.g.content[i]
	cost := llm.EstimateOutput(st.g.content[i : i+1])
	switch b.Type {
	case llm.TypeText:
		return st.textBlock(b, cost)
	case llm.TypeToolUse:
		return st.toolBlock(b, cost)
	}
	// Opaque blocks (thinking) have no Chat Completions form; they still
	// cost their time, and count as reasoning tokens.
	return st.pace(newPacer(cost, 0), 0)
}

// open sends the first delta, which carries the role: Chat Completions
// names it once, in the message's first chunk, whatever comes first.
func (st *oaiStream) open(content json.RawMessage, calls []oaiToolCallDelta) error {
	st.first = oaiFirstDelta{Role: "assistant", Content: content, ToolCalls: calls, Refusal: jsonNull}
	st.opened = true
	return st.emit(&st.first, nil)
}

// pace waits out the per-token latency a delta of n more bytes pays for,
// so the stream's timing is the one the generation was given.
func (st *oaiStream) pace(p *pacer, n int) error {
	return clock.Sleep(st.ex.r.Context(), st.s.clock, time.Duration(p.next(n))*st.g.perToken)
}

// textBlock streams a text block as content deltas (refusal deltas, for
// a structured-outputs refusal), opening the message (content "", or null
// before a refusal) if nothing has yet.
func (st *oaiStream) textBlock(b *llm.Block, cost int) error {
	refusal := st.d.refusal(st.g)
	if !st.opened {
		first := jsonEmptyString
		if refusal {
			first = jsonNull
		}
		if err := st.open(first, nil); err != nil {
			return err
		}
	}
	p := newPacer(cost, len(b.Text))
	for _, piece := range st.g.textPieces(b.Text) {
		if err := st.pace(p, len(piece)); err != nil {
			return err
		}
		st.text = piece
		st.delta = oaiDeltaOut{Content: &st.text}
		if refusal {
			st.delta = oaiDeltaOut{Refusal: &st.text}
		}
		if err := st.emit(&st.delta, nil); err != nil {
			return err
		}
	}
	return nil
}

// toolBlock streams a tool call: id, type and name come once, in the
// call's first fragment, with empty arguments; the arguments follow in
// pieces. A call that opens the message does so with content null.
func (st *oaiStream) toolBlock(b *llm.Block, cost int) error {
	st.call[0] = oaiToolCallDelta{Index: st.tool, ID: b.ID, Type: "function", Function: oaiFunctionDelta{Name: b.Name}}
	var err error
	if !st.opened {
		err = st.open(jsonNull, st.call[:])
	} else {
		st.delta = oaiDeltaOut{ToolCalls: st.call[:]}
		err = st.emit(&st.delta, nil)
	}
	if err != nil {
		return err
	}
	// Arguments that are not a JSON object (a scenario's raw_input)
	// stream as they are, as a local model's do.
	args := b.Arguments()
	p := newPacer(cost, len(args))
	for _, piece := range st.g.jsonPieces(args) {
		if err := st.pace(p, len(piece)); err != nil {
			return err
		}
		st.call[0] = oaiToolCallDelta{Index: st.tool, Function: oaiFunctionDelta{Arguments: piece}}
		st.delta = oaiDeltaOut{ToolCalls: st.call[:]}
		if err := st.emit(&st.delta, nil); err != nil {
			return err
		}
	}
	st.tool++
	return nil
}

// usage sends the include_usage chunk: no choices, and the usage that
// every earlier chunk carried as null.
func (st *oaiStream) usage() error {
	st.chunk.Choices = st.chunk.Choices[:0]
	st.chunk.Usage = mustJSON(oaiUsageOut(st.g))
	return st.send()
}
