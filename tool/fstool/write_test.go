package fstool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noTempFiles fails if a write left its temporary file behind.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".deputy-") {
			t.Errorf("temporary file left: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	set := newSet(t, ws)

	out, isErr := callTool(t, set, "write_file", map[string]any{"path": "a/b/c.txt", "content": "héllo\n"})
	if isErr || out != "created a/b/c.txt: wrote 7 bytes" {
		t.Fatalf("%q %v", out, isErr)
	}
	if got := readFile(t, filepath.Join(ws, "a/b/c.txt")); got != "héllo\n" {
		t.Errorf("content %q", got)
	}

	// Overwriting keeps the file's permissions exactly (no umask games).
	p := filepath.Join(ws, "script.sh")
	mustWrite(t, p, "old")
	if err := os.Chmod(p, 0o751); err != nil {
		t.Fatal(err)
	}
	out, isErr = callTool(t, set, "write_file", map[string]any{"path": "script.sh", "content": ""})
	if isErr || out != "overwrote script.sh: wrote 0 bytes" {
		t.Fatalf("%q %v", out, isErr)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o751 || fi.Size() != 0 {
		t.Errorf("after overwrite: %v %v", fi.Mode(), err)
	}

	// The rename is atomic: a reader holding the old file keeps the old
	// content, which an in-place truncate-and-write would destroy.
	mustWrite(t, filepath.Join(ws, "held.txt"), "before")
	held, err := os.Open(filepath.Join(ws, "held.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if out, isErr := callTool(t, set, "write_file", map[string]any{"path": "held.txt", "content": "after"}); isErr {
		t.Fatal(out)
	}
	buf := make([]byte, 16)
	n, _ := held.Read(buf)
	if string(buf[:n]) != "before" {
		t.Errorf("old inode changed: %q (not an atomic replace)", buf[:n])
	}
	if got := readFile(t, filepath.Join(ws, "held.txt")); got != "after" {
		t.Errorf("new content %q", got)
	}

	mkdir(t, filepath.Join(ws, "dir"))
	out, isErr = callTool(t, set, "write_file", map[string]any{"path": "dir", "content": "x"})
	if !isErr || !strings.Contains(out, "dir is a directory") {
		t.Errorf("dir: %q %v", out, isErr)
	}
	out, isErr = callTool(t, set, "write_file", map[string]any{"path": "script.sh/x", "content": "x"})
	if !isErr || !strings.Contains(out, "not a directory") {
		t.Errorf("file as parent: %q %v", out, isErr)
	}
	out, isErr = callTool(t, set, "write_file", map[string]any{"path": "x"})
	if !isErr || !strings.Contains(out, "missing property 'content'") {
		t.Errorf("no content: %q %v", out, isErr)
	}
	noTempFiles(t, ws)
}

func TestEditFile(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	set := newSet(t, ws)
	p := filepath.Join(ws, "main.go")
	mustWrite(t, p, "package main\n\nfunc a() {\n\treturn\n}\n\nfunc b() {\n\treturn\n}\n")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}

	out, isErr := callTool(t, set, "edit_file", map[string]any{"path": "main.go", "old": "\treturn\n", "new": "\treturn // x\n"})
	if !isErr || !strings.Contains(out, "occurs 2 times in main.go") || !strings.Contains(out, "more surrounding context") {
		t.Errorf("ambiguous: %q %v", out, isErr)
	}
	out, isErr = callTool(t, set, "edit_file", map[string]any{"path": "main.go", "old": "func c()", "new": "x"})
	if !isErr || !strings.Contains(out, "old text not found in main.go") {
		t.Errorf("absent: %q %v", out, isErr)
	}
	out, isErr = callTool(t, set, "edit_file", map[string]any{"path": "main.go", "old": "func b() {\n\treturn\n", "new": "func b() {\n\tprintln()\n\treturn\n"})
	if isErr || !strings.Contains(out, "edited main.go at line 7: replaced 2 lines with 3") {
		t.Fatalf("edit: %q %v", out, isErr)
	}
	want := "package main\n\nfunc a() {\n\treturn\n}\n\nfunc b() {\n\tprintln()\n\treturn\n}\n"
	if got := readFile(t, p); got != want {
		t.Errorf("content:\n%s", got)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	// Deleting text: new may be empty.
	if out, isErr := callTool(t, set, "edit_file", map[string]any{"path": "main.go", "old": "\tprintln()\n", "new": ""}); isErr {
		t.Fatal(out)
	}
	if got := readFile(t, p); strings.Contains(got, "println") {
		t.Errorf("not deleted: %s", got)
	}

	out, isErr = callTool(t, set, "edit_file", map[string]any{"path": "main.go", "old": "x", "new": "x"})
	if !isErr || !strings.Contains(out, "identical") {
		t.Errorf("identical: %q", out)
	}
	out, isErr = callTool(t, set, "edit_file", map[string]any{"path": "main.go", "old": "", "new": "x"})
	if !isErr || !strings.Contains(out, "at /old") {
		t.Errorf("empty old: %q", out)
	}
	mustWrite(t, filepath.Join(ws, "win.txt"), "a\r\nb\r\n")
	out, _ = callTool(t, set, "edit_file", map[string]any{"path": "win.txt", "old": "a\nb", "new": "c"})
	if !strings.Contains(out, "CRLF") {
		t.Errorf("crlf hint missing: %q", out)
	}
	mustWrite(t, filepath.Join(ws, "bin"), "a\x00b")
	out, _ = callTool(t, set, "edit_file", map[string]any{"path": "bin", "old": "a", "new": "c"})
	if !strings.Contains(out, "binary") {
		t.Errorf("binary: %q", out)
	}
	out, _ = callTool(t, set, "edit_file", map[string]any{"path": "none.txt", "old": "a", "new": "c"})
	if !strings.Contains(out, "none.txt: no such file or directory") {
		t.Errorf("missing: %q", out)
	}
	noTempFiles(t, ws)
}
