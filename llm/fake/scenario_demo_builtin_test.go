package fake_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
)

// TestDemoWithBuiltinTools plays the demo scenario against deputy's real
// built-in tools in a temporary workspace, through tool.Set, so every input
// the demo sends is validated against the real schemas and runs for real.
func TestDemoWithBuiltinTools(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"main.go", "README.md", "pkg/util.go"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("package x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ts, err := builtin.Tools(builtin.Config{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(ts...)
	if err != nil {
		t.Fatal(err)
	}
	m := fake.NewModel(fake.DemoScenario(), fake.WithoutLatency())
	ctx := context.Background()
	const task = "Tidy up the README"
	req := &llm.Request{Model: "fake", Tools: set.Specs(), Messages: []llm.Message{llm.UserText(task)}}
	var final string
	for turn := 1; ; turn++ {
		if turn > 6 {
			t.Fatal("the demo did not end")
		}
		resp, err := m.Generate(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Messages = append(req.Messages, resp.Message())
		calls := resp.Message().ToolUses()
		if len(calls) == 0 {
			if turn != 5 {
				t.Errorf("ended at turn %d: %s", turn, resp.Message().Text())
			}
			final = resp.Message().Text()
			break
		}
		var results []llm.Block
		for _, c := range calls {
			out, isErr := set.Call(ctx, c.Name, c.Input)
			if isErr {
				t.Errorf("turn %d: %s %s failed: %s", turn, c.Name, c.Input, out)
			}
			results = append(results, llm.ToolResult(c.ID, out, isErr))
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.User, Content: results})
	}
	note, err := os.ReadFile(filepath.Join(dir, "deputy-demo.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(note), "Task: "+task) || !strings.Contains(string(note), "STATUS: reviewed") || strings.Contains(string(note), "DRAFT") {
		t.Errorf("deputy-demo.md:\n%s", note)
	}
	if !strings.Contains(final, `You asked: "`+task+`"`) {
		t.Errorf("final answer:\n%s", final)
	}
	t.Logf("note:\n%s\nfinal:\n%s", note, final)
}
