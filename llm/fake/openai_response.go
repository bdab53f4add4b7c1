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
		msg.Content = &s
	}
	out := oaiCompletion{
		ID: id, Object: "chat.completion", Created: created, Model: d.req.Model,
		Choices:     []oaiChoice{{Index: 0, Message: msg, FinishReason: oaiFinishReason(g.stop)}},
		Usage:       oaiUsageOut(g),
		ServiceTier: "default", SystemFingerprint: oaiFingerprint,
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
	bw    *bodyWriter
	chunk oaiChunk
	buf   bytes.Buffer
	enc   *frameEncoder

	first oaiFirstDelta
	delta oaiDeltaOut
	text  string
	call  [1]oaiToolCallDelta
}

// emit sends one chunk holding delta (and finish reason, if set).
func (st *oaiStream) emit(delta any, finish *string) error {
	st.chunk.Choices[0] = oaiChunkChoice{Index: 0, Delta: delta, FinishReason: finish}
	st.buf.Reset()
	if err := st.enc.encode(&st.chunk); err != nil {
		return err
	}
	return st.bw.event("", st.buf.Bytes(), false)
}

func (s *Server) openaiStream(ex *exchange, g *generation, d *oaiDecoded, id string, created int64) {
	st := &oaiStream{s: s, ex: ex, g: g, bw: newBodyWriter(ex.w, g.fault)}
	st.bw.flushEach = g.perToken > 0
	st.enc = newFrameEncoder(&st.buf)
	st.chunk = oaiChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: d.req.Model,
		ServiceTier: "default", SystemFingerprint: oaiFingerprint, Choices: make([]oaiChunkChoice, 1)}
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

func (st *oaiStream) run(includeUsage bool) error {
	g := st.g
	ctx := st.ex.r.Context()
	opened := false
	tool := 0
	for i := range g.content {
		b := &g.content[i]
		switch b.Type {
		case llm.TypeText:
			if !opened {
				st.first = oaiFirstDelta{Role: "assistant", Content: jsonEmptyString, Refusal: jsonNull}
				if err := st.emit(&st.first, nil); err != nil {
					return err
				}
				opened = true
			}
			p := newPacer(llm.EstimateOutput(g.content[i:i+1]), len(b.Text))
			for _, piece := range g.textPieces(b.Text) {
				if err := clock.Sleep(ctx, st.s.clock, time.Duration(p.next(len(piece)))*g.perToken); err != nil {
					return err
				}
				st.text = piece
				st.delta = oaiDeltaOut{Content: &st.text}
				if err := st.emit(&st.delta, nil); err != nil {
					return err
				}
			}
		case llm.TypeToolUse:
			// id, type and name come once, in the call's first fragment,
			// with empty arguments; the arguments follow in pieces.
			st.call[0] = oaiToolCallDelta{Index: tool, ID: b.ID, Type: "function", Function: oaiFunctionDelta{Name: b.Name}}
			var err error
			if !opened {
				st.first = oaiFirstDelta{Role: "assistant", Content: jsonNull, ToolCalls: st.call[:], Refusal: jsonNull}
				err = st.emit(&st.first, nil)
				opened = true
			} else {
				st.delta = oaiDeltaOut{ToolCalls: st.call[:]}
				err = st.emit(&st.delta, nil)
			}
			if err != nil {
				return err
			}
			// Arguments that are not a JSON object (a scenario's
			// raw_input) stream as they are, as a local model's do.
			args := b.Arguments()
			p := newPacer(llm.EstimateOutput(g.content[i:i+1]), len(args))
			for _, piece := range g.jsonPieces(args) {
				if err := clock.Sleep(ctx, st.s.clock, time.Duration(p.next(len(piece)))*g.perToken); err != nil {
					return err
				}
				st.call[0] = oaiToolCallDelta{Index: tool, Function: oaiFunctionDelta{Arguments: piece}}
				st.delta = oaiDeltaOut{ToolCalls: st.call[:]}
				if err := st.emit(&st.delta, nil); err != nil {
					return err
				}
			}
			tool++
		default:
			// Opaque blocks (thinking) have no Chat Completions form; they
			// still cost their time, and count as reasoning tokens.
			p := newPacer(llm.EstimateOutput(g.content[i:i+1]), 0)
			if err := clock.Sleep(ctx, st.s.clock, time.Duration(p.next(0))*g.perToken); err != nil {
				return err
			}
		}
	}
	if !opened {
		st.first = oaiFirstDelta{Role: "assistant", Content: jsonEmptyString, Refusal: jsonNull}
		if err := st.emit(&st.first, nil); err != nil {
			return err
		}
	}
	finish := oaiFinishReason(g.stop)
	st.delta = oaiDeltaOut{}
	if err := st.emit(&st.delta, &finish); err != nil {
		return err
	}
	if includeUsage {
		st.chunk.Choices = st.chunk.Choices[:0]
		st.chunk.Usage = mustJSON(oaiUsageOut(g))
		st.buf.Reset()
		if err := st.enc.encode(&st.chunk); err != nil {
			return err
		}
		if err := st.bw.event("", st.buf.Bytes(), false); err != nil {
			return err
		}
	}
	return st.bw.event("", []byte("[DONE]"), true)
}
