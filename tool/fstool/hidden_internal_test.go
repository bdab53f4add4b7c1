package fstool

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A directory swapped for a symlink into a hidden one between the check
// of a path and its opening (a program racing a tool call) is caught on
// the file actually opened.
func TestHiddenCaughtAfterOpen(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the opened file's path comes from /proc")
	}
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".deputy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".deputy", "deputy.db"), []byte("transcripts"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := NewWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	w = w.Hide(".deputy/")
	r, err := w.open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := w.hider(r)
	rel, err := w.resolve(r, "a/deputy.db")
	if err != nil || h.check(r, rel, "a/deputy.db") != nil {
		t.Fatalf("before the swap: %q %v", rel, err)
	}
	// The swap.
	if err := os.Remove(filepath.Join(ws, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".deputy", filepath.Join(ws, "a")); err != nil {
		t.Fatal(err)
	}
	f, err := r.Open(rel)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var he *HiddenError
	if err := h.opened(w, f, "a/deputy.db"); !errors.As(err, &he) || he.Hidden != ".deputy" {
		t.Fatalf("opened: %v", err)
	}
}
