package anthropic

import (
	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/deputy-run/deputy/llm"
)

// MaxBreakpoints is the API's limit on cache_control markers per request; a
// fifth is a 400.
const MaxBreakpoints = 4

// placeBreakpoints marks the prompt-cache breakpoints deputy uses, in prefix
// order (tools, system, messages):
//
//  1. the last tool definition: tools change rarely, so this entry serves
//     every turn and every sibling subagent with the same tools;
//  2. the end of the system prompt;
//  3. the previous turn's newest message: the user message just before the
//     last assistant message, which is where the previous request's
//     breakpoint 4 was. The API's lookup walks back only about 20 blocks
//     from a breakpoint; a turn with many parallel tool calls adds more than
//     that, and this marker still lands exactly on last turn's entry;
//  4. the newest message, moving forward each turn: this turn writes the
//     entry the next turn reads.
//
// Never more than MaxBreakpoints. A block that cannot carry cache_control
// (thinking, other opaque blocks) is skipped for the nearest earlier one in
// the same message.
func placeBreakpoints(p *sdk.MessageNewParams, req *llm.Request, cc sdk.CacheControlEphemeralParam) {
	n := 0
	if k := len(p.Tools); k > 0 && p.Tools[k-1].OfTool != nil {
		p.Tools[k-1].OfTool.CacheControl = cc
		n++
	}
	if k := len(p.System); k > 0 {
		p.System[k-1].CacheControl = cc
		n++
	}
	last := len(p.Messages) - 1
	if last < 0 {
		return
	}
	if prev := previousTurnEnd(req.Messages); prev >= 0 && n < MaxBreakpoints-1 {
		if markMessage(&p.Messages[prev], cc) {
			n++
		}
	}
	if n < MaxBreakpoints {
		markMessage(&p.Messages[last], cc)
	}
}

// previousTurnEnd returns the index of the message that was newest in the
// previous request of a loop: the user message right before the last
// assistant message (the newest message itself, when it is an assistant
// prefill), or -1.
func previousTurnEnd(msgs []llm.Message) int {
	for i := len(msgs) - 1; i >= 1; i-- {
		if msgs[i].Role == llm.Assistant {
			if msgs[i-1].Role == llm.User {
				return i - 1
			}
			return -1
		}
	}
	return -1
}

// markMessage puts cc on the last block of m that can carry it.
func markMessage(m *sdk.MessageParam, cc sdk.CacheControlEphemeralParam) bool {
	var blocks []sdk.ContentBlockParamUnion
	switch {
	case m.OfUser != nil:
		blocks = m.OfUser.Content
	case m.OfAssistant != nil:
		blocks = m.OfAssistant.Content
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		b := &blocks[i]
		switch {
		case b.OfText != nil:
			if b.OfText.Text == "" {
				continue // the API refuses cache_control on empty text
			}
			b.OfText.CacheControl = cc
		case b.OfToolUse != nil:
			b.OfToolUse.CacheControl = cc
		case b.OfToolResult != nil:
			b.OfToolResult.CacheControl = cc
		default:
			continue
		}
		return true
	}
	return false
}
