package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/mcpserver"
	"github.com/deputy-run/deputy/permission"
)

const approveScenario = `
rules:
  - match: {turn: 1}
    text: "counting"
    tool_calls: [{name: count, input: {n: 1}}]
  - match: {turn: 2}
    text: "done: {{index .ToolResults 0}}"
`

// count is side-effecting, so the default mode holds its calls.
type count struct{ ran *atomic.Int64 }

func (count) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "count", Description: "Counts.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}
}
func (count) ReadOnly() bool { return false }
func (c count) Run(context.Context, json.RawMessage) (string, error) {
	return fmt.Sprintf("count %d", c.ran.Add(1)), nil
}

// subagent_status shows the call a subagent waits on an approval for;
// subagent_approve runs it (once), or refuses it with a reason.
func TestMcpApprove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var ran atomic.Int64
	rt, err := deputy.Open(context.Background(), deputy.Options{ModelSpec: "fake", Scenario: []byte(approveScenario),
		DB: filepath.Join(dir, "deputy.db"), Workspace: dir, Tools: []deputy.Tool{count{&ran}},
		Permissions: &deputy.Permissions{Policy: permission.Policy{Mode: permission.ModeDefault}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mcpserver.Handler(rt, mcpserver.Options{Version: "test"}))
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		srv.Close()
		rt.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		session.Close()
		srv.Close()
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	r := &rig{rt: rt, session: session}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, approve := range []bool{true, false} {
		id, err := rt.Start(ctx, deputy.Task{Text: "count once"})
		if err != nil {
			t.Fatal(err)
		}
		if in, err := rt.Wait(ctx, id); err != nil || in.State != instance.Asking {
			t.Fatalf("held: %+v %v", in, err)
		}
		out, isErr := r.call(t, mcpserver.StatusTool, map[string]any{"id": id})
		if isErr || !strings.Contains(out, "it waits for approval of a count call") || !strings.Contains(out, `{"n":1}`) ||
			!strings.Contains(out, "subagent_approve") {
			t.Fatalf("status: %v %s", isErr, out)
		}
		before := ran.Load()
		args := map[string]any{"id": id, "approve": approve}
		if !approve {
			args["reason"] = "not today"
		}
		if out, isErr := r.call(t, mcpserver.ApproveTool, args); isErr {
			t.Fatalf("approve: %s", out)
		}
		in, err := rt.Wait(ctx, id)
		switch {
		case err != nil || in.State != instance.Completed:
			t.Fatalf("after the decision: %+v %v", in, err)
		case approve && (ran.Load() != before+1 || in.Report != fmt.Sprintf("done: count %d", before+1)):
			t.Fatalf("approved: ran %d (was %d), report %q", ran.Load(), before, in.Report)
		case !approve && (ran.Load() != before || !strings.Contains(in.Report, "not today")):
			t.Fatalf("denied: ran %d (was %d), report %q", ran.Load(), before, in.Report)
		}
		if out, isErr := r.call(t, mcpserver.ApproveTool, map[string]any{"id": id, "approve": true}); !isErr {
			t.Errorf("approved twice: %s", out)
		}
	}
}
