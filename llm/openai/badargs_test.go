package openai_test

import (
	"context"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/llm/openai"
	"github.com/deputy-run/deputy/llm/providertest"
)

// TestInvalidArgumentsGoBack: a call whose arguments were not a JSON object
// goes back with arguments "{}" (servers that re-parse replayed arguments
// refuse anything else), or byte for byte with EchoInvalidArguments.
func TestInvalidArgumentsGoBack(t *testing.T) {
	t.Parallel()
	const raw = `{"command": "echo hi"`
	for _, echo := range []bool{false, true} {
		var got []llm.Block
		_, root := providertest.StartServer(t, fake.Options{Responder: providertest.Respond(func(req *llm.Request, _ fake.RequestInfo) fake.Reply {
			got = req.Messages[1].ToolUses()
			return fake.Reply{Content: []llm.Block{llm.Text("ok")}}
		})})
		m, err := openai.New("fake", openai.Options{APIKey: "k", BaseURL: root + "/v1", EchoInvalidArguments: echo})
		if err != nil {
			t.Fatal(err)
		}
		req := &llm.Request{Messages: []llm.Message{
			llm.UserText("go"),
			{Role: llm.Assistant, Content: []llm.Block{llm.ToolCall("call_1", "bash", []byte(raw))}},
			{Role: llm.User, Content: []llm.Block{llm.ToolResult("call_1", "invalid arguments", true)}},
		}}
		if _, err := m.Generate(context.Background(), req, nil); err != nil {
			t.Fatalf("echo %v: %v", echo, err)
		}
		want := llm.ToolCall("call_1", "bash", []byte("{}"))
		if echo {
			want = llm.ToolCall("call_1", "bash", []byte(raw))
		}
		if len(got) != 1 || string(got[0].Input) != string(want.Input) || got[0].InvalidInput != want.InvalidInput {
			t.Errorf("echo %v: the server got %+v, want %+v", echo, got, want)
		}
	}
}
