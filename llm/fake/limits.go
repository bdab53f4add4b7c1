package fake

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/deputy-run/deputy/llm"
)

// wireLimits are a request's generation limits: what ends an answer early.
// The server reads them off the wire; the scripted model off the
// llm.Request (requestLimits). Both then end the answer with endAnswer, so
// the same scenario stops the same way in process and over HTTP.
type wireLimits struct {
	maxTokens int // -1: no limit
	stop      []string
}

// requestLimits are the limits of an in-process request. llm.Request has no
// way to say "zero tokens", so MaxTokens <= 0 means no limit, as it does for
// the provider adapters (which then send their default).
func requestLimits(req *llm.Request) wireLimits {
	lim := wireLimits{maxTokens: -1, stop: req.StopSequences}
	if req.MaxTokens > 0 {
		lim.maxTokens = req.MaxTokens
	}
	return lim
}

// endAnswer decides where generated content ends and why, as the real APIs
// do, and is the one place both the server and the scripted model do it:
//
//   - Unless the reply pins a stop reason, the first stop sequence found in a
//     text block ends the content there: stop_reason stop_sequence, with
//     the sequence (not included in the text) in stopSeq.
//   - max_tokens always applies, pinned reason or not, because a real API
//     never returns more than the request allowed and clients budget on
//     it: content longer than the limit (by llm.EstimateOutput) is cut and
//     the stop reason becomes max_tokens. A limit reached before a stop
//     sequence wins over it, as it would in generation.
//   - Otherwise the pinned reason stands, or the default: tool_use when the
//     content calls a tool, end_turn when not.
//
// content is never modified: when a cut is needed, the result is a copy.
func endAnswer(content []llm.Block, pinned llm.StopReason, lim wireLimits) (out []llm.Block, stop llm.StopReason, stopSeq string) {
	out, stop = content, pinned
	if stop == "" {
		if cut, seq, ok := cutAtStopSequence(out, lim.stop); ok {
			out, stop, stopSeq = cut, llm.StopSequence, seq
		}
	}
	if cut, ok := cutAtMaxTokens(out, lim.maxTokens); ok {
		return cut, llm.StopMaxTokens, ""
	}
	if stop == "" {
		stop = llm.StopEndTurn
		for i := range out {
			if out[i].Type == llm.TypeToolUse {
				stop = llm.StopToolUse
			}
		}
	}
	return out, stop, stopSeq
}

// cutAtStopSequence ends the content at the earliest stop sequence in the
// first text block holding one; later blocks are dropped.
func cutAtStopSequence(content []llm.Block, stops []string) ([]llm.Block, string, bool) {
	if len(stops) == 0 {
		return content, "", false
	}
	for i := range content {
		b := &content[i]
		if b.Type != llm.TypeText {
			continue
		}
		at, seq := -1, ""
		for _, st := range stops {
			if st == "" {
				continue
			}
			if j := strings.Index(b.Text, st); j >= 0 && (at < 0 || j < at) {
				at, seq = j, st
			}
		}
		if at >= 0 {
			out := slices.Clone(content[:i+1])
			out[i].Text = b.Text[:at]
			return out, seq, true
		}
	}
	return content, "", false
}

// cutAtMaxTokens ends the content where the output reaches maxTokens: a
// text block is cut at a rune boundary (four bytes a token, the estimate's
// rule), a block of another kind that does not fit is dropped with
// everything after it.
func cutAtMaxTokens(content []llm.Block, maxTokens int) ([]llm.Block, bool) {
	if maxTokens < 0 || llm.EstimateOutput(content) <= maxTokens {
		return content, false
	}
	left := maxTokens
	for i := range content {
		t := llm.EstimateOutput(content[i : i+1])
		if t <= left {
			left -= t
			continue
		}
		b := &content[i]
		if b.Type == llm.TypeText && left > 0 {
			cut := min(left*4, len(b.Text))
			for cut > 0 && !utf8.RuneStart(b.Text[cut]) {
				cut--
			}
			out := slices.Clone(content[:i+1])
			out[i].Text = b.Text[:cut]
			return out, true
		}
		return slices.Clone(content[:i]), true
	}
	return content, false // unreachable: the total exceeded maxTokens
}
