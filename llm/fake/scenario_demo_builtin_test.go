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
// It runs on a workspace with files and on an empty one, where glob answers
// "no paths match" and the demo must not count that line as a path.
func TestDemoWithBuiltinTools(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		files []string
		note  string // what the note says about the glob
		final string // what the final answer says about it
	}{
		// glob **/* lists directories too: main.go, README.md, pkg/, pkg/util.go.
		{"files", []string{"main.go", "README.md", "pkg/util.go"},
			"`glob **/*` listed 4 paths in this workspace", "glob `**/*` listed 4 paths, and bash"},
		{"empty", nil,
			"`glob **/*` found no files in this workspace", "glob `**/*` found no files, and bash"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, f := range c.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), []byte("package x\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			const task = "Tidy up the README"
			note, final := playDemoBuiltin(t, dir, task)
			if !strings.Contains(note, "Task: "+task) || !strings.Contains(note, "STATUS: reviewed") || strings.Contains(note, "DRAFT") {
				t.Errorf("deputy-demo.md:\n%s", note)
			}
			if !strings.Contains(note, c.note) {
				t.Errorf("deputy-demo.md does not say %q:\n%s", c.note, note)
			}
			if !strings.Contains(final, `You asked: "`+task+`"`) || !strings.Contains(final, c.final) {
				t.Errorf("final answer does not say %q:\n%s", c.final, final)
			}
			t.Logf("note:\n%s\nfinal:\n%s", note, final)
		})
	}
}

// playDemoBuiltin plays the demo on dir with the built-in tools and returns
// the note it wrote and its final answer.
func playDemoBuiltin(t *testing.T, dir, task string) (note, final string) {
	t.Helper()
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
	req := &llm.Request{Model: "fake", Tools: set.Specs(), Messages: []llm.Message{llm.UserText(task)}}
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
	b, err := os.ReadFile(filepath.Join(dir, "deputy-demo.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), final
}
