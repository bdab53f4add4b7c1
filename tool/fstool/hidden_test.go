package fstool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/fstool"
)

const secretText = "transcript of another run: SECRET-4242\n"

// hiddenWorkspace is a workspace with deputy's .deputy/ (a database and a
// token holding secretText, a definition) and ways to reach it: a
// symlinked directory, a symlinked file, a hard link.
func hiddenWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, ".deputy", "deputy.db"), "SQLite format 3 "+secretText)
	mustWrite(t, filepath.Join(ws, ".deputy", "token"), secretText)
	mustWrite(t, filepath.Join(ws, ".deputy", "agents", "a.md"), "---\nname: a\n---\nSECRET-4242 in a definition\n")
	mustWrite(t, filepath.Join(ws, "src", "main.go"), "package main\n")
	for link, target := range map[string]string{"d": ".deputy", "src/tok": "../.deputy/token", "abs": filepath.Join(ws, ".deputy")} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(ws, ".deputy", "token"), filepath.Join(ws, "hardlink")); err != nil {
		t.Fatal(err)
	}
	return ws
}

func hiddenSet(t *testing.T, ws string, hide ...string) *tool.Set {
	t.Helper()
	w, err := fstool.NewWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(fstool.Tools(w.Hide(hide...), fstool.Limits{})...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// A hidden directory does not exist for any file tool: named, however
// spelled (through symlinks, an absolute path), it is refused
// saying why; walked over, it is skipped; nothing is written into it.
func TestHiddenPaths(t *testing.T) {
	t.Parallel()
	ws := hiddenWorkspace(t)
	set := hiddenSet(t, ws, ".deputy/")
	refused := func(name string, args map[string]any) {
		t.Helper()
		out, isErr := callTool(t, set, name, args)
		if !isErr || !strings.Contains(out, "is hidden from the file tools: .deputy holds deputy's own data") {
			t.Errorf("%s %v: %q", name, args, out)
		}
		if strings.Contains(out, "SECRET") {
			t.Errorf("%s %v leaked: %q", name, args, out)
		}
	}
	for _, p := range []string{".deputy/deputy.db", ".deputy/token", "./src/../.deputy/token", filepath.Join(ws, ".deputy", "token"),
		"d/token", "abs/token", "src/tok", ".deputy/agents/a.md", ".deputy/missing"} {
		refused("read_file", map[string]any{"path": p})
		refused("edit_file", map[string]any{"path": p, "old": "SECRET", "new": "x"})
		refused("write_file", map[string]any{"path": p, "content": "x"})
	}
	refused("write_file", map[string]any{"path": ".deputy/agents/planted.md", "content": "x"})
	for _, p := range []string{".deputy", "d", ".deputy/agents", "d/token"} {
		refused("grep", map[string]any{"pattern": "SECRET", "path": p})
		refused("glob", map[string]any{"pattern": p + "/*"})
	}
	// Walks: the hidden tree is not listed, not searched, not even
	// counted as skipped. (The hard link is another name of a file, not
	// of the hidden directory: see TestHiddenFiles.)
	out, isErr := callTool(t, set, "grep", map[string]any{"pattern": "SECRET"})
	if isErr || out != "hardlink:1: "+secretText {
		t.Errorf("grep over the workspace: %q", out)
	}
	out, isErr = callTool(t, set, "glob", map[string]any{"pattern": "**"})
	if isErr || strings.Contains(out, ".deputy") || !strings.Contains(out, "src/main.go") {
		t.Errorf("glob **: %q", out)
	}
	for _, pat := range []string{"**/token", "**/*.db", "{.deputy,src}/**", ".*/**"} {
		if out, isErr := callTool(t, set, "glob", map[string]any{"pattern": pat}); isErr || strings.Contains(out, ".deputy") {
			t.Errorf("glob %s: %q", pat, out)
		}
	}
	if got := readFile(t, filepath.Join(ws, ".deputy", "token")); got != secretText {
		t.Errorf("the token was changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, ".deputy", "agents", "planted.md")); err == nil {
		t.Error("write_file created a file in the hidden directory")
	}
	// The rest works as before.
	if out, isErr := callTool(t, set, "read_file", map[string]any{"path": "src/main.go"}); isErr || !strings.Contains(out, "package main") {
		t.Errorf("read_file src/main.go: %q", out)
	}
	if out, isErr := callTool(t, set, "write_file", map[string]any{"path": ".deputyish", "content": "x"}); isErr {
		t.Errorf("a name merely starting with .deputy: %q", out)
	}
}

// Hiding single files (deputy's secrets for unfenced agents) leaves the
// rest of their directory readable and writable. A hidden file is
// recognized by its identity too: a hard link to it is as hidden, named
// or walked over.
func TestHiddenFiles(t *testing.T) {
	t.Parallel()
	ws := hiddenWorkspace(t)
	set := hiddenSet(t, ws, ".deputy/deputy.db", ".deputy/token")
	for _, p := range []string{".deputy/token", "d/token", "src/tok", "hardlink", ".deputy/deputy.db"} {
		if out, isErr := callTool(t, set, "read_file", map[string]any{"path": p}); !isErr || !strings.Contains(out, "is hidden") {
			t.Errorf("read_file %s: %q", p, out)
		}
	}
	// A walk of the workspace leaves .deputy out (deputy's state, not the
	// project's); named, its files that are not hidden are searched.
	out, isErr := callTool(t, set, "grep", map[string]any{"pattern": "SECRET"})
	if isErr || out != "no matches for \"SECRET\" in .\n" {
		t.Errorf("grep: %q", out)
	}
	out, isErr = callTool(t, set, "grep", map[string]any{"pattern": "SECRET", "path": ".deputy"})
	if isErr || out != ".deputy/agents/a.md:4: SECRET-4242 in a definition\n" {
		t.Errorf("grep .deputy: %q", out)
	}
	for _, c := range []struct{ name, path string }{{"edit_file", "hardlink"}, {"write_file", "hardlink"}, {"edit_file", ".deputy/token"}} {
		args := map[string]any{"path": c.path, "old": "SECRET", "new": "x"}
		if c.name == "write_file" {
			args = map[string]any{"path": c.path, "content": "x"}
		}
		if out, isErr := callTool(t, set, c.name, args); !isErr || !strings.Contains(out, "is hidden") {
			t.Errorf("%s %s: %q", c.name, c.path, out)
		}
	}
	out, isErr = callTool(t, set, "glob", map[string]any{"pattern": ".deputy/**"})
	if isErr || out != ".deputy/agents/\n.deputy/agents/a.md\n" {
		t.Errorf("glob .deputy/**: %q", out)
	}
	if out, isErr := callTool(t, set, "write_file", map[string]any{"path": ".deputy/agents/b.md", "content": "---\nname: b\n---\n"}); isErr {
		t.Errorf("write_file a definition: %q", out)
	}
}
