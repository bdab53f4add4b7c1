package fstool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/tool/fstool"
)

func searchTree(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for p, c := range map[string]string{
		"main.go":            "package main\n// TODO: one\n",
		"a.txt":              "nothing\n",
		"src/x.go":           "package src\nfunc X() {} // TODO: two\n",
		"src/deep/y.go":      "package deep\n",
		"src/deep/z_test.go": "package deep // TODO: three\n",
		".git/config":        "TODO: never\n",
		"sub/.git/HEAD":      "TODO: never either\n",
		"img.png":            "\x89PNG\x00TODO\n",
	} {
		mustWrite(t, filepath.Join(ws, p), c)
	}
	mkdir(t, filepath.Join(ws, "emptydir"))
	mustWrite(t, filepath.Join(ws, "we[ird]", "f.txt"), "")
	if err := os.Symlink("src", filepath.Join(ws, "srclink")); err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestGlob(t *testing.T) {
	t.Parallel()
	ws := searchTree(t)
	set := newSet(t, ws)
	tests := []struct {
		pattern, want string
	}{
		{"**/*.go", "main.go\nsrc/deep/y.go\nsrc/deep/z_test.go\nsrc/x.go\n"},
		{"src/**/*_test.go", "src/deep/z_test.go\n"},
		{"*", "a.txt\nemptydir/\nimg.png\nmain.go\nsrc/\nsrclink\nsub/\nwe[ird]/\n"},
		{"src/*", "src/deep/\nsrc/x.go\n"},
		{"./src/*.go", "src/x.go\n"},
		{filepath.Join(ws, "src", "*.go"), "src/x.go\n"}, // absolute inside
		{"srclink/*.go", "srclink/x.go\n"},               // a named link inside is used
		{"**/HEAD", "no paths match **/HEAD"},            // .git skipped everywhere
		{".git/*", ".git/config\n"},                      // unless asked for
		{"{main,a}.*", "a.txt\nmain.go\n"},
		{"nope/**", "no paths match nope/** (nope does not exist)"},
		{`we\[ird\]/*`, "we[ird]/f.txt\n"}, // an escaped literal in the base
	}
	for _, tc := range tests {
		out, isErr := callTool(t, set, "glob", map[string]any{"pattern": tc.pattern})
		if isErr || out != tc.want {
			t.Errorf("glob %s = %q (err=%v), want %q", tc.pattern, out, isErr, tc.want)
		}
	}
	out, isErr := callTool(t, set, "glob", map[string]any{"pattern": "src/{a"})
	if !isErr || !strings.Contains(out, "invalid glob pattern") {
		t.Errorf("bad pattern: %q", out)
	}
}

func TestGlobCap(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for i := range 12 {
		mustWrite(t, filepath.Join(ws, fmt.Sprintf("f%02d.txt", i)), "")
	}
	set := newSetLimits(t, ws, fstool.Limits{GlobResults: 5})
	out, _ := callTool(t, set, "glob", map[string]any{"pattern": "*.txt"})
	want := "f00.txt\nf01.txt\nf02.txt\nf03.txt\nf04.txt\n[7 more paths not shown (12 in all); use a more specific pattern]\n"
	if out != want {
		t.Errorf("got %q", out)
	}
	set = newSetLimits(t, ws, fstool.Limits{WalkEntries: 4})
	out, _ = callTool(t, set, "glob", map[string]any{"pattern": "**"})
	if !strings.Contains(out, "[stopped after visiting 4 entries") {
		t.Errorf("walk cap: %q", out)
	}
}

func TestGrep(t *testing.T) {
	t.Parallel()
	ws := searchTree(t)
	mustWrite(t, filepath.Join(ws, "big.txt"), strings.Repeat("TODO big\n", 200))
	set := newSetLimits(t, ws, fstool.Limits{MaxFileBytes: 1000})
	tests := []struct {
		args    map[string]any
		want    string
		wantErr bool
	}{
		{map[string]any{"pattern": "TODO: \\w+"},
			"main.go:2: // TODO: one\nsrc/deep/z_test.go:1: package deep // TODO: three\nsrc/x.go:2: func X() {} // TODO: two\n" +
				"[skipped files: 1 binary, 1 larger than 1000 bytes]\n", false},
		{map[string]any{"pattern": "TODO", "path": "src/deep"}, "src/deep/z_test.go:1: package deep // TODO: three\n", false},
		{map[string]any{"pattern": "(?i)^PACKAGE SRC$", "path": "src/x.go"}, "src/x.go:1: package src\n", false},
		{map[string]any{"pattern": "TODO", "path": "srclink/x.go"}, "srclink/x.go:2: func X() {} // TODO: two\n", false},
		{map[string]any{"pattern": "TODO", "path": ".git"}, ".git/config:1: TODO: never\n", false},
		{map[string]any{"pattern": "absent", "path": "src"}, "no matches for \"absent\" in src\n", false},
		{map[string]any{"pattern": "TODO", "path": "img.png"}, "img.png is a binary file", true},
		{map[string]any{"pattern": "x", "path": "big.txt"}, "big.txt is 1800 bytes, more than grep searches (1000)", true},
		{map[string]any{"pattern": "a[", "path": "src"}, "invalid regular expression", true},
		{map[string]any{"pattern": "a", "path": "nope"}, "nope: no such file or directory", true},
	}
	for _, tc := range tests {
		out, isErr := callTool(t, set, "grep", tc.args)
		if isErr != tc.wantErr || (tc.wantErr && !strings.Contains(out, tc.want)) || (!tc.wantErr && out != tc.want) {
			t.Errorf("grep %v = %q (err=%v), want %q", tc.args, out, isErr, tc.want)
		}
	}
}

func TestGrepCaps(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "many.txt"), strings.Repeat("hit\n", 30))
	mustWrite(t, filepath.Join(ws, "wide.txt"), "hit "+strings.Repeat("ü", 400)+"\n")
	set := newSetLimits(t, ws, fstool.Limits{GrepResults: 10})
	out, _ := callTool(t, set, "grep", map[string]any{"pattern": "hit", "path": "many.txt"})
	if strings.Count(out, "many.txt:") != 10 || !strings.HasSuffix(out, "[10 of 30 matching lines shown; narrow the pattern or the path to see the rest]\n") {
		t.Errorf("cap: %q", out)
	}
	out, _ = callTool(t, set, "grep", map[string]any{"pattern": "hit", "path": "wide.txt"})
	// 300 bytes kept: "hit " and 148 two-byte characters (the 149th would split).
	want := "wide.txt:1: hit " + strings.Repeat("ü", 148) + " [... 504 more bytes on this line]\n"
	if out != want {
		t.Errorf("wide line:\n got %q\nwant %q", out, want)
	}
}
