package providertest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
)

// BenchRequest is a mid-conversation turn, the shape per-turn benchmarks
// measure: a 2 KB system prompt, three tools, and ten messages of tool
// calls and results.
func BenchRequest() *llm.Request {
	req := &llm.Request{
		Model:     "fake-model",
		System:    strings.Repeat("You are a careful coding assistant. ", 56),
		Tools:     testTools,
		MaxTokens: 4096,
		Messages:  []llm.Message{llm.UserText("Refactor the parser and run the tests.")},
	}
	for i := range 4 {
		id := fmt.Sprintf("toolu_%02d", i)
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.Assistant, Content: []llm.Block{llm.Text("Reading the next file."), llm.ToolUse(id, "read_file", json.RawMessage(fmt.Sprintf(`{"path": "pkg/file%d.go"}`, i)))}},
			llm.Message{Role: llm.User, Content: []llm.Block{llm.ToolResult(id, strings.Repeat("func f() { return }\n", 20), false)}},
		)
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.Assistant, Content: []llm.Block{llm.Text("Now the tests.")}}, llm.UserText("Go on."))
	return req
}

// BenchReply is the answer every benchmark turn gets: some text and a tool
// call.
func BenchReply() Respond {
	r := fake.Reply{Content: []llm.Block{
		llm.Text(strings.Repeat("I will now run the test suite and look at the failures. ", 6)),
		llm.ToolUse("toolu_bench", "read_file", json.RawMessage(`{"path": "pkg/parser_test.go", "lines": [1, 200]}`)),
	}}
	return func(*llm.Request, fake.RequestInfo) fake.Reply { return r }
}
