package llm

import (
	"encoding/json"
	"testing"
)

func TestMessageText(t *testing.T) {
	t.Parallel()
	m := Message{Role: Assistant, Content: []Block{Text("a"), ToolUse("t1", "x", json.RawMessage(`{}`)), Text("b"), Text("c")}}
	if got := m.Text(); got != "abc" {
		t.Fatalf("got %q", got)
	}
	if got := (Message{Content: []Block{ToolUse("t", "x", nil), Text("only")}}).Text(); got != "only" {
		t.Fatalf("got %q", got)
	}
	if got := (Message{}).Text(); got != "" {
		t.Fatalf("got %q", got)
	}
	if uses := m.ToolUses(); len(uses) != 1 || uses[0].ID != "t1" {
		t.Fatalf("tool uses %+v", uses)
	}
}

func TestBlockJSONKeepsToolInputAndOpaqueBytes(t *testing.T) {
	t.Parallel()
	in := Message{Role: Assistant, Content: []Block{
		Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"hm","signature":"c2ln"}`)),
		ToolUse("toolu_1", "grep", json.RawMessage(`{"z":1,"a":"x"}`)),
	}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Message
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if string(out.Content[0].Raw) != string(in.Content[0].Raw) || string(out.Content[1].Input) != `{"z":1,"a":"x"}` {
		t.Fatalf("round trip changed bytes: %s", data)
	}
}

func TestUsageAndAPIError(t *testing.T) {
	t.Parallel()
	u := Usage{InputTokens: 1, OutputTokens: 2}
	u.Add(Usage{InputTokens: 10, CacheReadTokens: 100, CacheWriteTokens: 1000})
	if u.Prompt() != 1111 || u.Total() != 1113 {
		t.Fatalf("usage %+v", u)
	}
	for _, c := range []struct {
		e    APIError
		temp bool
	}{{APIError{StatusCode: 429, Type: "rate_limit_error"}, true}, {APIError{StatusCode: 429, Type: "insufficient_quota"}, false},
		{APIError{StatusCode: 529}, true}, {APIError{StatusCode: 400}, false}, {APIError{StatusCode: 401}, false}} {
		if c.e.Temporary() != c.temp {
			t.Errorf("%+v: Temporary() = %v", c.e, !c.temp)
		}
	}
}

func TestContextWindowAndEstimates(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]int{"anthropic:claude-sonnet-4-5": 200_000, "gpt-4o-mini": 128_000,
		"gpt-4": 8_192, "gpt-4.1": 1_047_576, "ollama:llama3.1:8b": 128_000, "mystery": DefaultContextWindow} {
		if got := ContextWindow(model); got != want {
			t.Errorf("%s: %d, want %d", model, got, want)
		}
	}
	if EstimateTokens("") != 0 || EstimateTokens("abcd") != 1 || EstimateTokens("abcde") != 2 {
		t.Fatal("EstimateTokens is not ceil(bytes/4)")
	}
	req := &Request{System: "sys", Messages: []Message{UserText("hello world")}}
	if n := EstimateRequest(req); n <= EstimateMessages(req.Messages) {
		t.Fatalf("request estimate %d does not count the system prompt", n)
	}
}

// TestToolCall: arguments that are a JSON object are Input byte for byte;
// blank ones are {}; anything else is kept as sent in InvalidInput, says
// why it cannot be used, and marshals (an invalid json.RawMessage would
// fail every json.Marshal of the block, as a durable step output's did).
func TestToolCall(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args, input, invalid, why string
	}{
		{args: ` {"a": 1} `, input: ` {"a": 1} `},
		{args: "", input: "{}"},
		{args: " \n", input: "{}"},
		{args: `{"command": "echo hi"`, invalid: `{"command": "echo hi"`, why: "arguments are not valid JSON: unexpected end of JSON input"},
		{args: `not json at all`, invalid: `not json at all`, why: "arguments are not valid JSON: invalid character 'o' in literal null (expecting 'u')"},
		{args: `{"a":1} {"b":2}`, invalid: `{"a":1} {"b":2}`, why: "arguments are not valid JSON: invalid character '{' after top-level value"},
		{args: `"x"`, invalid: `"x"`, why: "arguments must be a JSON object, not a string"},
		{args: `[1]`, invalid: `[1]`, why: "arguments must be a JSON object, not an array"},
		{args: `null`, invalid: `null`, why: "arguments must be a JSON object, not null"},
		{args: `12`, invalid: `12`, why: "arguments must be a JSON object, not a number"},
	} {
		b := ToolCall("id", "bash", []byte(c.args))
		if string(b.Input) != c.input || b.InvalidInput != c.invalid {
			t.Errorf("%q: input %q invalid %q, want %q %q", c.args, b.Input, b.InvalidInput, c.input, c.invalid)
		}
		why := ""
		if err := b.InputError(); err != nil {
			why = err.Error()
		}
		if why != c.why {
			t.Errorf("%q: InputError %q, want %q", c.args, why, c.why)
		}
		if c.invalid != "" && b.Arguments() != c.args {
			t.Errorf("%q: Arguments %q", c.args, b.Arguments())
		}
		raw, err := json.Marshal(Message{Role: Assistant, Content: []Block{b}})
		if err != nil {
			t.Errorf("%q: marshal: %v", c.args, err)
			continue
		}
		var back Message
		if err := json.Unmarshal(raw, &back); err != nil || back.Content[0].InvalidInput != c.invalid || (len(back.Content[0].Input) == 0) != (c.input == "") {
			t.Errorf("%q: round trip %s: %+v %v", c.args, raw, back, err)
		}
	}
}
