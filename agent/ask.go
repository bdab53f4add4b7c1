package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/tool"
)

// Questions takes instances' questions (see Runner.Questions). Ask records
// the question of instance id, made by the tool call callID; it must be
// idempotent for one call (a run replayed after a crash asks again).
type Questions interface {
	Ask(ctx context.Context, id, callID, question string) error
}

// Waiting is the ask_parent result a suspended run leaves in its pending
// message; the next run puts the answer in its place.
const Waiting = "[deputy] Waiting for the answer."

var askSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"question":{"type":"string","minLength":1,"description":"The question, complete on its own: what you need to know, why, and the options you see."}` +
	`},"required":["question"],"additionalProperties":false}`)

// askTool is ask_parent. The call records the question and the run stops
// after its turn (tool.Suspending): the instance waits, with no model call
// and nothing running, until the answer starts its next run, where the
// answer is this call's result.
type askTool struct{ tree *tree }

func (askTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: agentdef.AskTool, InputSchema: askSchema, Description: "Ask who gave you this task a " +
		"question, when you cannot go on well without the answer (a choice only they can make, a fact only " +
		"they know). Your work stops until they answer, and the answer comes back as this tool's result. " +
		"Do not ask what you can find out yourself."}
}

// ReadOnly is false: the question is recorded.
func (askTool) ReadOnly() bool { return false }

// Resumable: asking again after a crash records the same question once.
func (askTool) Resumable() bool { return true }

// Suspends: a recorded question stops the run after its turn.
func (askTool) Suspends() bool { return true }

func (a askTool) Run(ctx context.Context, raw json.RawMessage) (string, error) {
	n := nodeFrom(ctx)
	call, _ := loop.CallFrom(ctx)
	if n == nil || call == nil {
		return "", errors.New("ask_parent runs only inside a deputy agent run")
	}
	in, err := tool.Decode[struct {
		Question string `json:"question"`
	}](raw)
	if err != nil {
		return "", err
	}
	q := strings.TrimSpace(in.Question)
	if q == "" {
		return "", errors.New("the question is empty")
	}
	// One question at a time: its answer takes the one placeholder.
	if t := call.Transcript; len(t) > 0 {
		for _, u := range t[len(t)-1].ToolUses() {
			if u.Name == agentdef.AskTool {
				if u.ID != call.ID {
					return "", errors.New("not asked: ask one question at a time (an earlier ask_parent call of this turn was sent)")
				}
				break
			}
		}
	}
	if err := a.tree.r.Questions.Ask(ctx, n.inst.ID, call.ID, q); err != nil {
		return "", err
	}
	return Waiting, nil
}
