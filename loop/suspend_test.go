package loop

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// asking is a suspending tool: its successful call ends the run.
type asking struct{ fn }

func (asking) Suspends() bool { return true }

func askTool(fail bool) asking {
	return asking{fn{name: "ask", run: func(context.Context, json.RawMessage) (string, error) {
		if fail {
			return "", errBad
		}
		return "[waiting]", nil
	}}}
}

var errBad = errors.New("bad question")

// A successful call to a suspending tool stops the run after its turn's
// batch: the other calls of the turn ran, and their results with the
// placeholder wait in Pending, outside the transcript, never emitted.
func TestSuspendingToolStopsTheRunAfterItsTurn(t *testing.T) {
	t.Parallel()
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("echo", `{"a":1}`, "ask", `{}`), say("never")}}
	var emitted []llm.Message
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(echo("echo", false), askTool(false)),
		OnEvent: func(e Event) {
			if e.Kind == EventMessage {
				emitted = append(emitted, e.Message)
			}
		}}, task("go"))
	if err != nil || res.StopReason != StopSuspended || res.Turns != 1 || res.ToolCalls != 2 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if len(res.Messages) != 2 || res.Messages[1].Role != llm.Assistant || len(emitted) != 1 {
		t.Fatalf("transcript %d messages, %d emitted: the pending results must stay out", len(res.Messages), len(emitted))
	}
	p := res.Pending
	if p == nil || p.Role != llm.User || len(p.Content) != 2 || p.Content[0].Text != `echo:{"a":1}` || p.Content[1].Text != "[waiting]" {
		t.Fatalf("pending %+v", p)
	}
	if len(m.requests()) != 1 {
		t.Errorf("%d model calls after a suspension", len(m.requests()))
	}
}

// A suspending call that fails is an ordinary error result: the run goes on.
func TestFailedSuspendingCallDoesNotStop(t *testing.T) {
	t.Parallel()
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("ask", `{}`), say("went on")}}
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(askTool(true))}, task("go"))
	if err != nil || res.StopReason != StopCompleted || res.Answer != "went on" || res.Pending != nil {
		t.Fatalf("res %+v err %v", res, err)
	}
}

// The inbox is asked at each turn boundary after the first: its notes join
// the tool results in the next request, and its stop ends the run there.
func TestInboxNotesAndStop(t *testing.T) {
	t.Parallel()
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){call("echo", `{}`), call("echo", `{}`), say("never")}}
	var asked []int
	inbox := func(_ context.Context, turn int) ([]string, StopReason, error) {
		asked = append(asked, turn)
		if turn == 2 {
			return []string{"[deputy] note: look at b.txt too"}, "", nil
		}
		return nil, StopSuspended, nil
	}
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(echo("echo", true)), Inbox: inbox}, task("go"))
	if err != nil || res.StopReason != StopSuspended || res.Turns != 2 {
		t.Fatalf("res %+v err %v", res, err)
	}
	// Paused after turn 2: its results wait in Pending, unsent.
	if p := res.Pending; p == nil || len(p.Content) != 1 || p.Content[0].Type != llm.TypeToolResult ||
		len(res.Messages) != 4 || res.Messages[3].Role != llm.Assistant {
		t.Fatalf("pending %+v, %d messages", res.Pending, len(res.Messages))
	}
	if len(asked) != 2 || asked[0] != 2 || asked[1] != 3 {
		t.Errorf("inbox asked at turns %v, want [2 3]", asked)
	}
	reqs := m.requests()
	second := reqs[1].Messages[len(reqs[1].Messages)-1]
	if len(reqs) != 2 || second.Role != llm.User || len(second.Content) != 2 || second.Content[0].Type != llm.TypeToolResult ||
		!strings.Contains(second.Content[1].Text, "look at b.txt") {
		t.Fatalf("second request's last message %+v", second)
	}
	checkTranscript(t, append(res.Messages, *res.Pending))
}

// Hold keeps a completing run going while it has notes: the reports of
// work that was still out.
func TestHoldContinuesWithNotes(t *testing.T) {
	t.Parallel()
	m := &script{steps: []func(*llm.Request) (*llm.Response, error){say("first"), say("second")}}
	held := 0
	hold := func(_ context.Context, turn int) ([]string, error) {
		held++
		if held == 1 {
			return []string{"[deputy] the background report"}, nil
		}
		return nil, nil
	}
	res, err := Run(context.Background(), Config{Model: m, Tools: tool.MustSet(), Hold: hold}, task("go"))
	if err != nil || res.StopReason != StopCompleted || res.Answer != "second" || res.Turns != 2 || held != 2 {
		t.Fatalf("res %+v err %v held %d", res, err, held)
	}
	reqs := m.requests()
	if last := reqs[1].Messages[len(reqs[1].Messages)-1]; last.Role != llm.User || !strings.Contains(last.Text(), "background report") {
		t.Fatalf("second request ends with %+v", last)
	}
	checkTranscript(t, res.Messages)
}
