package agent

import (
	"errors"
	"fmt"

	"github.com/deputy-run/deputy/llm"
)

// ForkPlaceholder is the tool_result a fork child sees for each sibling tool
// call of the turn that spawned it: the parent runs those calls, the child
// must not wait for them or run them again, and the transcript still needs a
// result after every tool_use to be valid.
const ForkPlaceholder = "running in the parent; not visible here"

// ForkTranscript builds a fork child's messages from the parent's transcript,
// whose last message is the assistant turn holding the spawn call spawnID.
//
// Every message before that turn is reused as is (the same values, so the
// child's request serializes byte for byte like the parent's up to there and
// hits the parent's prompt cache). In the spawning turn the spawn call is cut
// out and everything else stays; the next user message holds a placeholder
// result for each sibling call, in call order, then the task as text. When
// the spawn call was the turn's only block, the turn is dropped and the task
// is appended to the end of the previous user message instead, so roles
// still alternate and the cached prefix still reaches that message.
//
// task is the complete text the child starts on (the caller adds the
// definition's instructions and output contract to it). The parent's slices
// and blocks are never modified; the reused prefix shares the parent's block
// arrays, so the child's loop must only append to its transcript, as it
// does to any transcript.
func ForkTranscript(parent []llm.Message, spawnID, task string) ([]llm.Message, error) {
	if spawnID == "" {
		return nil, errors.New("fork transcript: empty spawn call id")
	}
	if task == "" {
		// Providers refuse empty text blocks; better a clear error here.
		return nil, errors.New("fork transcript: empty task")
	}
	n := len(parent)
	if n == 0 {
		return nil, errors.New("fork transcript: parent transcript is empty")
	}
	last := parent[n-1]
	if last.Role != llm.Assistant {
		return nil, fmt.Errorf("fork transcript: last message (%d) is %q, want the assistant turn holding spawn call %s", n-1, last.Role, spawnID)
	}

	at := -1
	for i, b := range last.Content {
		if b.Type == llm.TypeToolUse && b.ID == spawnID {
			if at >= 0 {
				return nil, fmt.Errorf("fork transcript: spawn call id %s appears twice in the last assistant turn", spawnID)
			}
			at = i
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("fork transcript: no tool_use %s in the last assistant turn", spawnID)
	}

	prefix := parent[:n-1] // only read; the child gets fresh slices below

	if len(last.Content) == 1 {
		return forkLone(prefix, task)
	}

	kept := make([]llm.Block, 0, len(last.Content)-1)
	kept = append(kept, last.Content[:at]...)
	kept = append(kept, last.Content[at+1:]...)

	var user []llm.Block
	for _, b := range kept {
		if b.Type == llm.TypeToolUse {
			user = append(user, llm.ToolResult(b.ID, ForkPlaceholder, false))
		}
	}
	user = append(user, llm.Text(task))

	out := make([]llm.Message, 0, n+1)
	out = append(out, prefix...)
	out = append(out,
		llm.Message{Role: llm.Assistant, Content: kept},
		llm.Message{Role: llm.User, Content: user},
	)
	return out, nil
}

// forkLone handles a spawning turn that held nothing but the spawn call:
// an assistant message with no blocks is invalid, so the turn goes and the
// task joins the user message before it.
func forkLone(prefix []llm.Message, task string) ([]llm.Message, error) {
	if len(prefix) == 0 {
		return []llm.Message{llm.UserText(task)}, nil
	}
	prev := prefix[len(prefix)-1]
	if prev.Role != llm.User {
		return nil, fmt.Errorf("fork transcript: message %d is %q, want user before the spawning turn", len(prefix)-1, prev.Role)
	}
	content := make([]llm.Block, 0, len(prev.Content)+1)
	content = append(content, prev.Content...)
	content = append(content, llm.Text(task))

	out := make([]llm.Message, 0, len(prefix))
	out = append(out, prefix[:len(prefix)-1]...)
	out = append(out, llm.Message{Role: llm.User, Content: content})
	return out, nil
}
