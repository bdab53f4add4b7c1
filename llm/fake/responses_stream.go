package fake

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// The Responses API's stream: typed SSE events (the event name repeats
// the data's type), each numbered by sequence_number from 0, in the order
// of the streaming example in openai/openai-openapi: response.created,
// response.in_progress, then per output item output_item.added, its
// content (content_part.added, output_text.delta…, output_text.done,
// content_part.done; function_call_arguments.delta…, .done; or
// reasoning_summary_part.added, reasoning_summary_text.delta…, .done,
// reasoning_summary_part.done), output_item.done, and last
// response.completed (response.incomplete when max_output_tokens cut it).

// respHead starts every event.
type respHead struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

// Event payloads.
type (
	respResponseEvent struct {
		respHead
		Response *respObject `json:"response"`
	}
	respItemEvent struct {
		respHead
		OutputIndex int             `json:"output_index"`
		Item        json.RawMessage `json:"item"`
	}
	respPartEvent struct {
		respHead
		ItemID       string       `json:"item_id"`
		OutputIndex  int          `json:"output_index"`
		ContentIndex int          `json:"content_index"`
		Part         respTextPart `json:"part"`
	}
	respTextEvent struct {
		respHead
		ItemID       string            `json:"item_id"`
		OutputIndex  int               `json:"output_index"`
		ContentIndex int               `json:"content_index"`
		Delta        *string           `json:"delta,omitempty"`
		Text         *string           `json:"text,omitempty"`
		Logprobs     []json.RawMessage `json:"logprobs"`
	}
	respArgsEvent struct {
		respHead
		ItemID      string  `json:"item_id"`
		OutputIndex int     `json:"output_index"`
		Name        string  `json:"name,omitempty"`
		Delta       *string `json:"delta,omitempty"`
		Arguments   *string `json:"arguments,omitempty"`
		Input       *string `json:"input,omitempty"`
	}
	respSummaryPartEvent struct {
		respHead
		ItemID       string          `json:"item_id"`
		OutputIndex  int             `json:"output_index"`
		SummaryIndex int             `json:"summary_index"`
		Part         respSummaryPart `json:"part"`
	}
	respSummaryTextEvent struct {
		respHead
		ItemID       string  `json:"item_id"`
		OutputIndex  int     `json:"output_index"`
		SummaryIndex int     `json:"summary_index"`
		Delta        *string `json:"delta,omitempty"`
		Text         *string `json:"text,omitempty"`
	}
)

// emptyList is the empty logprobs list every text event carries.
var emptyList = []json.RawMessage{}

// respStreamer writes one Responses stream.
type respStreamer struct {
	s   *Server
	ex  *exchange
	run *respRun
	bw  *bodyWriter
	buf bytes.Buffer
	enc *frameEncoder
	seq int
	// The delta events live here and are refilled for each delta, so a
	// delta's encoding allocates nothing of its own.
	textEv    respTextEvent
	argsEv    respArgsEvent
	summaryEv respSummaryTextEvent
	piece     string
}

// head numbers the next event of type typ.
func (st *respStreamer) head(typ string) respHead {
	h := respHead{Type: typ, SequenceNumber: st.seq}
	st.seq++
	return h
}

// emit sends v (whose head names the event) as one frame.
func (st *respStreamer) emit(typ string, v any, last bool) error {
	st.buf.Reset()
	if err := st.enc.encode(v); err != nil {
		return err
	}
	return st.bw.event(typ, st.buf.Bytes(), last)
}

// pace waits out the per-token latency of a delta of n more bytes.
func (st *respStreamer) pace(p *pacer, n int) error {
	return clock.Sleep(st.ex.r.Context(), st.s.clock, time.Duration(p.next(n))*st.run.g.perToken)
}

func (s *Server) respStream(ex *exchange, run *respRun) {
	st := &respStreamer{s: s, ex: ex, run: run, bw: newBodyWriter(ex.w, run.g.fault)}
	st.bw.flushEach = run.g.perToken > 0
	st.enc = newFrameEncoder(&st.buf)
	st.bw.errFrame = st.failedFrame
	st.bw.badFrame = func() (string, []byte) {
		return "response.output_text.delta", []byte(`{"type":"response.output_text.delta","sequence_number":` + strconv.Itoa(st.seq-1) + `,"delta":"`)
	}
	ex.startHeaders(true)
	_ = st.stream() // a write error means the client left; a fault ends on purpose
}

// failedFrame is the error_event fault on this wire: the stream ends with
// response.failed, the response's status failed and its error a
// server_error, as the API ends a response the model failed. It takes
// the place, and the sequence number, of the event it displaces.
func (st *respStreamer) failedFrame() (string, []byte) {
	o := st.run.object("in_progress", 0)
	o.Status = "failed"
	o.Error = &respErrorOut{Code: "server_error", Message: "The server had an error processing your request. Sorry about that! You can retry your request, or contact us through our help center at help.openai.com if you keep seeing this error."}
	return "response.failed", mustJSON(respResponseEvent{respHead: respHead{Type: "response.failed", SequenceNumber: st.seq - 1}, Response: o})
}

// stream sends the whole stream.
func (st *respStreamer) stream() error {
	open := st.run.object("in_progress", 0)
	if err := st.emit("response.created", respResponseEvent{respHead: st.head("response.created"), Response: open}, false); err != nil {
		return err
	}
	if err := st.emit("response.in_progress", respResponseEvent{respHead: st.head("response.in_progress"), Response: open}, false); err != nil {
		return err
	}
	for i, it := range st.run.items {
		if err := st.item(i, it); err != nil {
			return err
		}
	}
	status := st.run.finalStatus()
	final := st.run.object(status, st.s.clock.Now().Unix())
	typ := "response." + status
	obj := mustJSON(final)
	// The response is stored once it is done, before its last event goes
	// out, so a client continuing from it at once finds it.
	st.s.respKeep(st.run, obj)
	return st.emit(typ, struct {
		respHead
		Response json.RawMessage `json:"response"`
	}{st.head(typ), obj}, true)
}

// item streams output item i: added, its content, done.
func (st *respStreamer) item(i int, it *respOutItem) error {
	if err := st.emit("response.output_item.added", respItemEvent{respHead: st.head("response.output_item.added"), OutputIndex: i, Item: it.json(false)}, false); err != nil {
		return err
	}
	var err error
	switch it.kind {
	case "message":
		err = st.message(i, it)
	case "function_call", "custom_tool_call":
		err = st.arguments(i, it)
	case "reasoning":
		err = st.reasoning(i, it)
	default:
		err = st.pace(newPacer(llm.EstimateOutput([]llm.Block{*it.block}), 0), 0)
	}
	if err != nil {
		return err
	}
	return st.emit("response.output_item.done", respItemEvent{respHead: st.head("response.output_item.done"), OutputIndex: i, Item: it.json(true)}, false)
}

// message streams a message's parts, each as output_text deltas.
func (st *respStreamer) message(i int, it *respOutItem) error {
	for j, text := range it.texts {
		if err := st.emit("response.content_part.added", respPartEvent{respHead: st.head("response.content_part.added"), ItemID: it.id, OutputIndex: i, ContentIndex: j, Part: textPart("")}, false); err != nil {
			return err
		}
		p := newPacer(llm.EstimateOutput([]llm.Block{llm.Text(text)}), len(text))
		for _, piece := range st.run.g.textPieces(text) {
			if err := st.pace(p, len(piece)); err != nil {
				return err
			}
			st.piece = piece
			st.textEv = respTextEvent{respHead: st.head("response.output_text.delta"), ItemID: it.id, OutputIndex: i, ContentIndex: j, Delta: &st.piece, Logprobs: emptyList}
			if err := st.emit(st.textEv.Type, &st.textEv, false); err != nil {
				return err
			}
		}
		done := respTextEvent{respHead: st.head("response.output_text.done"), ItemID: it.id, OutputIndex: i, ContentIndex: j, Text: &text, Logprobs: emptyList}
		if err := st.emit(done.Type, done, false); err != nil {
			return err
		}
		if err := st.emit("response.content_part.done", respPartEvent{respHead: st.head("response.content_part.done"), ItemID: it.id, OutputIndex: i, ContentIndex: j, Part: textPart(text)}, false); err != nil {
			return err
		}
	}
	return nil
}

// arguments streams a function call's arguments, or a custom tool call's
// input (response.custom_tool_call_input.delta and .done), in pieces cut
// anywhere.
func (st *respStreamer) arguments(i int, it *respOutItem) error {
	deltaType, doneType := "response.function_call_arguments.delta", "response.function_call_arguments.done"
	if it.kind == "custom_tool_call" {
		deltaType, doneType = "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done"
	}
	args := it.block.Arguments()
	p := newPacer(llm.EstimateOutput([]llm.Block{*it.block}), len(args))
	for _, piece := range st.run.g.jsonPieces(args) {
		if err := st.pace(p, len(piece)); err != nil {
			return err
		}
		st.piece = piece
		st.argsEv = respArgsEvent{respHead: st.head(deltaType), ItemID: it.id, OutputIndex: i, Delta: &st.piece}
		if err := st.emit(st.argsEv.Type, &st.argsEv, false); err != nil {
			return err
		}
	}
	done := respArgsEvent{respHead: st.head(doneType), ItemID: it.id, OutputIndex: i}
	if it.kind == "custom_tool_call" {
		done.Input = &args
	} else {
		done.Name, done.Arguments = it.block.Name, &args
	}
	return st.emit(done.Type, done, false)
}

// reasoning streams a reasoning item's summary parts; without a summary
// the item only costs its time.
func (st *respStreamer) reasoning(i int, it *respOutItem) error {
	cost := llm.EstimateOutput([]llm.Block{*it.block})
	if len(it.summary) == 0 {
		return st.pace(newPacer(cost, 0), 0)
	}
	for j, text := range it.summary {
		if err := st.emit("response.reasoning_summary_part.added", respSummaryPartEvent{respHead: st.head("response.reasoning_summary_part.added"), ItemID: it.id, OutputIndex: i, SummaryIndex: j, Part: respSummaryPart{Type: "summary_text"}}, false); err != nil {
			return err
		}
		p := newPacer(cost, len(text))
		for _, piece := range st.run.g.textPieces(text) {
			if err := st.pace(p, len(piece)); err != nil {
				return err
			}
			st.piece = piece
			st.summaryEv = respSummaryTextEvent{respHead: st.head("response.reasoning_summary_text.delta"), ItemID: it.id, OutputIndex: i, SummaryIndex: j, Delta: &st.piece}
			if err := st.emit(st.summaryEv.Type, &st.summaryEv, false); err != nil {
				return err
			}
		}
		done := respSummaryTextEvent{respHead: st.head("response.reasoning_summary_text.done"), ItemID: it.id, OutputIndex: i, SummaryIndex: j, Text: &text}
		if err := st.emit(done.Type, done, false); err != nil {
			return err
		}
		if err := st.emit("response.reasoning_summary_part.done", respSummaryPartEvent{respHead: st.head("response.reasoning_summary_part.done"), ItemID: it.id, OutputIndex: i, SummaryIndex: j, Part: respSummaryPart{Type: "summary_text", Text: text}}, false); err != nil {
			return err
		}
	}
	return nil
}
