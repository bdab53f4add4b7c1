package openai_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/providertest"
)

// TestCallArgumentsOnBothWires: a tool call goes back with the same
// arguments on Chat Completions and on Responses: the model's JSON as it
// was, "{}" for arguments that were not a JSON object (their text with
// EchoInvalidArguments), and an Input that is not JSON at all is refused
// before anything is sent, naming its block.
func TestCallArgumentsOnBothWires(t *testing.T) {
	t.Parallel()
	const raw = `{"command": "echo hi"`
	for _, responses := range []bool{false, true} {
		for _, c := range []struct {
			name string
			echo bool
			sent llm.Block
			want string // the arguments the server got
		}{
			{"json", false, llm.ToolCall("call_1", "bash", []byte(`{"command":"ls","n":[1,2]}`)), `{"command":"ls","n":[1,2]}`},
			{"invalid", false, llm.ToolCall("call_1", "bash", []byte(raw)), "{}"},
			{"invalid echoed", true, llm.ToolCall("call_1", "bash", []byte(raw)), raw},
			{"no input", false, llm.Block{Type: llm.TypeToolUse, ID: "call_1", Name: "bash"}, "{}"},
		} {
			got, err := sendCall(t, responses, c.echo, c.sent)
			if err != nil {
				t.Errorf("responses=%v %s: %v", responses, c.name, err)
				continue
			}
			if len(got) != 1 || got[0].ID != "call_1" || arguments(got[0]) != c.want {
				t.Errorf("responses=%v %s: the server got %+v, want arguments %s", responses, c.name, got, c.want)
			}
		}
		bad := llm.Block{Type: llm.TypeToolUse, ID: "call_1", Name: "bash", Input: json.RawMessage(`{"command":`)}
		got, err := sendCall(t, responses, false, bad)
		if err == nil || !strings.Contains(err.Error(), "block 0: tool_use call_1 (bash): input is not valid JSON") || got != nil {
			t.Errorf("responses=%v, Input not JSON: %v (the server got %+v), want it refused naming the block", responses, err, got)
		}
	}
}

// sendCall sends a conversation whose assistant turn is call, on the wire
// responses says, and returns the tool calls the server decoded from it
// (nil if no request came).
func sendCall(t *testing.T, responses, echo bool, call llm.Block) ([]llm.Block, error) {
	t.Helper()
	var got []llm.Block
	_, root := providertest.StartServer(t, fake.Options{Responder: providertest.Respond(func(req *llm.Request, _ fake.RequestInfo) fake.Reply {
		got = req.Messages[1].ToolUses()
		return fake.Reply{Content: []llm.Block{llm.Text("ok")}}
	})})
	m, err := openai.New("fake", openai.Options{APIKey: "k", BaseURL: root + "/v1", EchoInvalidArguments: echo, Responses: responses})
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Messages: []llm.Message{
		llm.UserText("go"),
		{Role: llm.Assistant, Content: []llm.Block{call}},
		{Role: llm.User, Content: []llm.Block{llm.ToolResult("call_1", "done", false)}},
	}}
	_, err = m.Generate(context.Background(), req, nil)
	return got, err
}

// arguments is a decoded call's arguments as text: its invalid text, or
// its JSON input.
func arguments(b llm.Block) string {
	if b.InvalidInput != "" {
		return b.InvalidInput
	}
	return string(b.Input)
}
