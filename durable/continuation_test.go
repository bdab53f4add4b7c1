package durable

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

// The message a run continues with: the pending results with the answer
// in ask_parent's place, then the notes; Interrupted for calls a crash cut;
// only the notes after a user message.
func TestContinuation(t *testing.T) {
	ask := llm.ToolUse("t1", agentdef.AskTool, json.RawMessage(`{}`))
	read := llm.ToolUse("t2", "read_file", json.RawMessage(`{}`))
	asked := []llm.Message{llm.UserText("task"), {Role: llm.Assistant, Content: []llm.Block{read, ask}}}
	pending, _ := json.Marshal(llm.Message{Role: llm.User, Content: []llm.Block{
		llm.ToolResult("t2", "file text", false), llm.ToolResult("t1", agent.Waiting, false)}})
	mail := []store.Mail{
		{ID: 1, Kind: MailQuestion, Body: "which?"},
		{ID: 2, Kind: mailPending, Body: string(pending)},
		{ID: 3, Kind: MailAnswer, Sender: Operator, Body: "this one"},
		{ID: 4, Kind: MailNote, Sender: Operator, Body: "hurry"},
		{ID: 5, Kind: "relay", Body: "not for a new run"},
	}
	root, child := &instance.Record{ID: "r"}, &instance.Record{ID: "c", Parent: "r"}

	m, ids := continuation(root, asked, mail)
	if len(ids) != 4 || m == nil || len(m.Content) != 3 || m.Content[0].Text != "file text" ||
		m.Content[1].Text != "this one" || m.Content[1].IsError || !strings.Contains(m.Content[2].Text, "hurry") {
		t.Fatalf("root: %+v, consumed %v", m, ids)
	}
	if m, _ := continuation(child, asked, mail); !strings.Contains(m.Content[1].Text, "operator, speaking for your parent: this one") {
		t.Errorf("a child answered by the operator is not told: %q", m.Content[1].Text)
	}
	// Resumed without an answer: the placeholder says so, as an error.
	if m, _ := continuation(root, asked, mail[:2]); !m.Content[1].IsError || !strings.Contains(m.Content[1].Text, "No answer came") {
		t.Errorf("no answer: %+v", m.Content[1])
	}
	// A crash cut the calls: nothing pending, each is Interrupted.
	if m, _ := continuation(root, asked, nil); len(m.Content) != 2 || m.Content[0].Text != Interrupted || !m.Content[0].IsError {
		t.Errorf("cut calls: %+v", m)
	}
	// After a user message, notes come as a message of their own.
	if m, ids := continuation(root, asked[:1], mail[3:4]); m == nil || len(m.Content) != 1 || len(ids) != 1 {
		t.Errorf("notes after a user message: %+v %v", m, ids)
	}
	if m, ids := continuation(root, asked[:1], nil); m != nil || len(ids) != 0 {
		t.Errorf("nothing came: %+v %v", m, ids)
	}
}
