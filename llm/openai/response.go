package openai

import (
	sdk "github.com/openai/openai-go/v3"

	"github.com/deputy-run/deputy/llm"
)

// textBlock is the key of the text block in streamState.order; tool calls
// are keyed by their index.
const textBlock = -1

// streamState follows one streamed completion: block numbering for deltas,
// tool-call indexes for servers that omit them, and whether it finished.
type streamState struct {
	// order lists the response's blocks as they first appeared: textBlock
	// or a tool-call index. Delta.Index is a position in it.
	order    []int
	finished bool
	// Missing-index repair: the call being streamed and the next free index.
	curIndex int64
	curID    string
	next     int64
	started  bool
}

// block returns the delta index of key, numbering it on first sight.
func (s *streamState) block(key int) (idx int, first bool) {
	for i, k := range s.order {
		if k == key {
			return i, false
		}
	}
	s.order = append(s.order, key)
	return len(s.order) - 1, true
}

// fixToolIndexes gives tool-call fragments without an index (old Ollama) one:
// a fragment continues the current call unless it carries a new id.
func (s *streamState) fixToolIndexes(c *sdk.ChatCompletionChunk) {
	for i := range c.Choices {
		if c.Choices[i].Index != 0 {
			continue
		}
		tcs := c.Choices[i].Delta.ToolCalls
		for j := range tcs {
			tc := &tcs[j]
			if tc.JSON.Index.Valid() {
				s.curIndex, s.started = tc.Index, true
				if tc.ID != "" {
					s.curID = tc.ID
				}
				s.next = max(s.next, tc.Index+1)
				continue
			}
			if !s.started || (tc.ID != "" && tc.ID != s.curID) {
				s.curIndex, s.curID, s.started = s.next, tc.ID, true
				s.next++
			}
			tc.Index = s.curIndex
		}
	}
}

// emit passes the chunk's fragments of choice 0 to fn.
func (s *streamState) emit(c *sdk.ChatCompletionChunk, fn func(llm.Delta)) {
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		if t := ch.Delta.Content + ch.Delta.Refusal; t != "" {
			idx, _ := s.block(textBlock)
			fn(llm.Delta{Index: idx, Type: llm.TypeText, Text: t})
		}
		for j := range ch.Delta.ToolCalls {
			tc := &ch.Delta.ToolCalls[j]
			idx, first := s.block(int(tc.Index))
			d := llm.Delta{Index: idx, Type: llm.TypeToolUse, Text: tc.Function.Arguments}
			if first {
				d.ID, d.Name = tc.ID, tc.Function.Name
			}
			if first || d.Text != "" {
				fn(d)
			}
		}
	}
}

// toResponse translates a completion's first choice. order, from a stream,
// is the order its blocks appeared in; nil means text first, then the tool
// calls.
func toResponse(cc *sdk.ChatCompletion, order []int) *llm.Response {
	r := &llm.Response{ID: cc.ID, Model: cc.Model, Usage: usage(&cc.Usage)}
	if len(cc.Choices) == 0 {
		r.StopReason = llm.StopEndTurn
		return r
	}
	ch := &cc.Choices[0]
	msg := &ch.Message
	text := msg.Content + msg.Refusal
	calls := msg.ToolCalls
	r.Content = make([]llm.Block, 0, len(calls)+1)
	toolUse := func(i int) llm.Block {
		tc := &calls[i]
		// Arguments that are not a JSON object (a local model's cut or
		// malformed call) are kept as sent, for the loop to answer with an
		// error result: see llm.ToolCall.
		return llm.ToolCall(tc.ID, tc.Function.Name, []byte(tc.Function.Arguments))
	}
	if order == nil {
		if text != "" {
			r.Content = append(r.Content, llm.Text(text))
		}
		for i := range calls {
			r.Content = append(r.Content, toolUse(i))
		}
	} else {
		for _, k := range order {
			switch {
			case k == textBlock:
				if text != "" {
					r.Content = append(r.Content, llm.Text(text))
				}
			case k >= 0 && k < len(calls):
				r.Content = append(r.Content, toolUse(k))
			}
		}
	}
	r.StopReason = stopReason(ch.FinishReason, len(calls) > 0)
	return r
}

// stopReason maps finish_reason onto deputy's vocabulary.
func stopReason(fr string, hasCalls bool) llm.StopReason {
	switch fr {
	case "tool_calls", "function_call":
		return llm.StopToolUse
	case "stop", "":
		if hasCalls {
			return llm.StopToolUse
		}
		return llm.StopEndTurn
	case "length":
		return llm.StopMaxTokens
	case "content_filter":
		return llm.StopRefusal
	}
	return llm.StopReason(fr)
}

// usage maps OpenAI's counts onto deputy's, whose InputTokens excludes
// cached (and cache-written) tokens.
func usage(u *sdk.CompletionUsage) llm.Usage {
	read := u.PromptTokensDetails.CachedTokens
	write := u.PromptTokensDetails.CacheWriteTokens
	in := u.PromptTokens - read - write
	if in < 0 {
		in, write = u.PromptTokens-read, 0
		if in < 0 {
			in, read = 0, u.PromptTokens
		}
	}
	return llm.Usage{InputTokens: in, OutputTokens: u.CompletionTokens, CacheReadTokens: read, CacheWriteTokens: write}
}
