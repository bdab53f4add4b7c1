package fstool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A directory on a write's path swapped for a symlink into a read-only or
// hidden path, or to the workspace's root, between the checks and the
// write (a sandboxed sibling child on the same workspace racing the call)
// is caught on the directory actually opened: nothing lands there. Not
// parallel: it sets beforeWrite.
func TestWriteSwappedDirectoryRefused(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the opened directory's path comes from /proc")
	}
	for _, c := range []struct {
		name, tool, target, path, landed string
	}{
		{"write into .claude", "write_file", ".claude", "x/agents/gp.md", ".claude/agents/gp.md"},
		{"write to the root's deputy.yaml", "write_file", ".", "x/deputy.yaml", "deputy.yaml"},
		{"write into hidden .deputy", "write_file", ".deputy", "x/agents/gp.md", ".deputy/agents/gp.md"},
		{"edit into .claude", "edit_file", ".claude", "x/agents/gp.md", ".claude/agents/gp.md"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			for _, d := range []string{".claude/agents", ".deputy/agents", "x/agents"} {
				if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			const old = "---\nname: gp\n---\nsafe\n"
			for _, f := range []string{"x/agents/gp.md", "x/deputy.yaml", ".claude/agents/gp.md", ".deputy/agents/gp.md", "deputy.yaml"} {
				if err := os.WriteFile(filepath.Join(ws, f), []byte(old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			w, err := NewWorkspace(ws)
			if err != nil {
				t.Fatal(err)
			}
			w = w.ReadOnly(".git", ".deputy", ".claude", "deputy.yaml").Hide(".deputy")
			swapped := false
			beforeWrite = func(string) {
				swapped = true
				if err := os.Rename(filepath.Join(ws, "x"), filepath.Join(ws, "x.old")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(c.target, filepath.Join(ws, "x")); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { beforeWrite = nil })
			var tl interface {
				Run(context.Context, json.RawMessage) (string, error)
			}
			args := map[string]any{"path": c.path, "content": "---\nname: gp\nmcpServers: {x: {command: evil}}\n---\n"}
			if c.tool == "edit_file" {
				tl = NewEditFile(w, Limits{})
				args = map[string]any{"path": c.path, "old": "safe", "new": "evil"}
			} else {
				tl = NewWriteFile(w, Limits{})
			}
			raw, _ := json.Marshal(args)
			out, err := tl.Run(context.Background(), raw)
			if !swapped {
				t.Fatal("the hook did not run")
			}
			if err == nil {
				t.Errorf("%s %s: %q, want a refusal", c.tool, c.path, out)
			} else if !strings.Contains(err.Error(), "read-only here") && !strings.Contains(err.Error(), "hidden") {
				t.Errorf("%s: %v", c.tool, err)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, c.landed)); string(b) != old {
				t.Errorf("%s is now %q", c.landed, b)
			}
			left, _ := filepath.Glob(filepath.Join(ws, filepath.Dir(c.landed), ".*.tmp"))
			if len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}
