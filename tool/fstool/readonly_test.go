package fstool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/fstool"
)

// Read-only paths refuse write_file and edit_file, however the path is
// spelled (a symlink into them included); reading them still works.
func TestReadOnlyPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git", filepath.Join(dir, "g")); err != nil {
		t.Fatal(err)
	}
	ws, err := fstool.NewWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(fstool.Tools(ws.ReadOnly(".git", "deputy.yaml"), fstool.Limits{})...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"write_file", map[string]any{"path": ".git/hooks/post-checkout", "content": "#!/bin/sh\nid\n"}},
		{"write_file", map[string]any{"path": "g/config", "content": "x"}},
		{"write_file", map[string]any{"path": "./sub/../.git/config", "content": "x"}},
		{"write_file", map[string]any{"path": "deputy.yaml", "content": "x"}},
		{"edit_file", map[string]any{"path": ".git/config", "old": "[core]", "new": "[core]\npager = id"}},
	} {
		if out, isErr := callTool(t, set, c.name, c.args); !isErr || !strings.Contains(out, "read-only here") {
			t.Errorf("%s %v: %q", c.name, c.args["path"], out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".git", "config")); string(b) != "[core]\n" {
		t.Errorf(".git/config is %q", b)
	}
	if out, isErr := callTool(t, set, "read_file", map[string]any{"path": ".git/config"}); isErr || !strings.Contains(out, "[core]") {
		t.Errorf("read_file: %q", out)
	}
	if out, isErr := callTool(t, set, "write_file", map[string]any{"path": "gitignore.txt", "content": "x"}); isErr {
		t.Errorf("a path merely starting with .git: %q", out)
	}
}
