package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/deputy-run/deputy/llm"
)

// Compaction configures how a long transcript is shortened: when the prompt
// passes Threshold of the context window, the older turns are summarized by
// the model into one message and the newest KeepTurns turns stay verbatim.
type Compaction struct {
	// Threshold is a share of the context window; default 0.7. A negative
	// value turns compaction off.
	Threshold float64
	// ContextWindow overrides the table in llm.ContextWindow, in tokens.
	ContextWindow int
	// KeepTurns is how many recent turns stay verbatim; default 2.
	KeepTurns int
	// SummaryTokens caps the summary's length; default 2048.
	SummaryTokens int
}

const (
	defaultCompactThreshold = 0.7
	defaultKeepTurns        = 2
	defaultSummaryTokens    = 2048
	// renderBlockChars caps each block of the transcript shown to the
	// summarizer: the summary needs the gist of a long tool output, and the
	// summarizing call must itself fit in the window.
	renderBlockChars = 4000
)

// SummaryPrefix starts the text block that replaces compacted turns, so a
// reader of the transcript (and the model) knows what it is.
const SummaryPrefix = "[Summary of earlier turns, compacted by deputy to fit the context window]\n"

const summarizeSystem = "You compress an agent's working transcript. Write a faithful, dense summary " +
	"that lets the agent continue the task without the original turns: the goal, what was done " +
	"(files read or changed, commands run, with their key results), what was learned, decisions made, " +
	"and what remains. Keep exact paths, names, numbers and error messages. No preamble."

// compactIfNeeded summarizes older turns when the next prompt would pass the
// threshold. The first user message (the task) is kept verbatim as the head
// of the new transcript, and the kept turns start with an assistant message,
// so every tool_use still has its tool_result right after it.
func (r *run) compactIfNeeded(ctx context.Context, res *Result) error {
	c := r.cfg.Compaction
	threshold := c.Threshold
	if threshold == 0 {
		threshold = defaultCompactThreshold
	}
	if threshold < 0 {
		return nil
	}
	window := c.ContextWindow
	if window <= 0 {
		window = llm.ContextWindow(r.cfg.ModelName)
	}
	if float64(r.promptEstimate(res)) < threshold*float64(window) {
		return nil
	}
	keep := c.KeepTurns
	if keep <= 0 {
		keep = defaultKeepTurns
	}
	cut := cutPoint(res.Messages, keep)
	if cut <= 1 {
		cut = cutPoint(res.Messages, 1)
	}
	if cut <= 1 {
		return nil // a single huge turn: nothing older to summarize
	}
	summaryTokens := c.SummaryTokens
	if summaryTokens <= 0 {
		summaryTokens = defaultSummaryTokens
	}
	req := &llm.Request{
		Model:     r.cfg.ModelName,
		System:    summarizeSystem,
		Messages:  []llm.Message{llm.UserText(render(res.Messages[:cut], window))},
		MaxTokens: summaryTokens,
	}
	resp, err := r.steps.Model(ctx, res.Turns, StepCompact, func(ctx context.Context) (*llm.Response, error) {
		return r.model.Generate(ctx, req, nil)
	})
	if err == nil && resp == nil {
		err = errors.New("the model returned no response and no error")
	}
	if err != nil {
		return fmt.Errorf("turn %d: compaction: %w", res.Turns, err)
	}
	r.spend(res, resp.Usage)

	// The new summary covers any earlier one (the summarizer saw it), so
	// the head is the task's own blocks plus exactly one summary.
	first := res.Messages[0]
	head := llm.Message{Role: llm.User, Content: make([]llm.Block, 0, len(first.Content)+1)}
	for _, b := range first.Content {
		if b.Type != llm.TypeText || !strings.HasPrefix(b.Text, SummaryPrefix) {
			head.Content = append(head.Content, b)
		}
	}
	head.Content = append(head.Content, llm.Text(SummaryPrefix+resp.Message().Text()))
	msgs := make([]llm.Message, 0, 1+len(res.Messages)-cut)
	msgs = append(msgs, head)
	msgs = append(msgs, res.Messages[cut:]...)
	res.Messages = msgs
	r.emitted = len(msgs)            // the kept messages were emitted before
	r.lastPrompt, r.sinceLast = 0, 0 // re-estimate from scratch next time
	r.emit(Event{Kind: EventCompaction, Turn: res.Turns, Compacted: cut - 1, Kept: len(msgs) - 1, Usage: resp.Usage, Message: head})
	return nil
}

// promptEstimate is the size of the next prompt: the last response's prompt
// and output as the provider counted them, plus an estimate of what was
// appended since (tool results). Before the first response, or after a
// compaction, the whole request is estimated.
func (r *run) promptEstimate(res *Result) int64 {
	if r.lastPrompt > 0 {
		return r.lastPrompt + int64(r.sinceLast)
	}
	req := llm.Request{System: r.cfg.System, Tools: r.cfg.Tools.Specs(), Messages: res.Messages}
	return int64(llm.EstimateRequest(&req))
}

// cutPoint returns the index of the assistant message that starts the
// newest keep turns, or 0 when there are not more turns than that.
func cutPoint(msgs []llm.Message, keep int) int {
	seen := 0
	for i := len(msgs) - 1; i > 0; i-- {
		if msgs[i].Role == llm.Assistant {
			if seen++; seen == keep+1 {
				// msgs[i] is the newest turn that is summarized; the kept
				// part starts at the next assistant message.
				for j := i + 1; j < len(msgs); j++ {
					if msgs[j].Role == llm.Assistant {
						return j
					}
				}
			}
		}
	}
	return 0
}

// render writes a transcript as plain text for the summarizer, each block
// capped, the whole capped to half the context window.
func render(msgs []llm.Message, window int) string {
	var b strings.Builder
	budget := window * 2 // characters: half the window at ~4 chars a token
	for _, m := range msgs {
		for i := range m.Content {
			blk := &m.Content[i]
			switch blk.Type {
			case llm.TypeText:
				fmt.Fprintf(&b, "[%s] %s\n", m.Role, clip(blk.Text))
			case llm.TypeToolUse:
				fmt.Fprintf(&b, "[tool call %s] %s\n", blk.Name, clip(blk.Arguments()))
			case llm.TypeToolResult:
				status := "result"
				if blk.IsError {
					status = "error"
				}
				fmt.Fprintf(&b, "[tool %s] %s\n", status, clip(blk.Text))
			}
		}
	}
	s := b.String()
	if len(s) > budget {
		s = s[runeStart(s, len(s)-budget):] // the newest part matters most
	}
	return "Summarize this transcript of an agent's work so far:\n\n" + s
}

func clip(s string) string {
	if len(s) <= renderBlockChars {
		return s
	}
	head, tail := runeStart(s, renderBlockChars/2), runeStart(s, len(s)-renderBlockChars/2)
	return s[:head] + fmt.Sprintf(" […%d bytes…] ", tail-head) + s[tail:]
}

// runeStart moves i forward to the start of a UTF-8 sequence, so slicing
// there never splits a character.
func runeStart(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}
