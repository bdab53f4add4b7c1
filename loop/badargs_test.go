package loop

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// anyArgs is a tool whose arguments are all optional, the kind a call
// with unusable arguments must still not run as {}.
type anyArgs struct{ runs *atomic.Int64 }

func (anyArgs) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (anyArgs) ReadOnly() bool { return true }
func (a anyArgs) Run(context.Context, json.RawMessage) (string, error) {
	a.runs.Add(1)
	return "pong", nil
}

// TestInvalidArgumentsAreAnErrorResult: a call whose arguments are not a
// JSON object is not run; it is answered with an error quoting what was
// sent, and the run goes on to the model's next turn.
func TestInvalidArgumentsAreAnErrorResult(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
		if len(req.Messages) == 1 {
			return &llm.Response{StopReason: llm.StopToolUse, Content: []llm.Block{
				llm.ToolCall("t1", "ping", []byte(`{"x": `)), llm.ToolCall("t2", "ping", []byte(`{}`))}}, nil
		}
		return &llm.Response{StopReason: llm.StopEndTurn, Content: []llm.Block{llm.Text("done")}}, nil
	})
	res, err := Run(context.Background(), Config{Model: model, Tools: tool.MustSet(anyArgs{&runs})}, []llm.Message{llm.UserText("go")})
	if err != nil || res.StopReason != StopCompleted || res.Answer != "done" {
		t.Fatalf("run: %v %s %q", err, res.StopReason, res.Answer)
	}
	if runs.Load() != 1 {
		t.Errorf("ping ran %d times, want once (the good call only)", runs.Load())
	}
	r := res.Messages[2].Content
	if !r[0].IsError || !strings.HasPrefix(r[0].Text, `invalid arguments for ping: arguments are not valid JSON: unexpected end of JSON input; you sent: {"x": `) {
		t.Errorf("bad call's result %+v", r[0])
	}
	if r[1].IsError || r[1].Text != "pong" {
		t.Errorf("good call's result %+v", r[1])
	}
}
