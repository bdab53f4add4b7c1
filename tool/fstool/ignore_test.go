package fstool_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ignoredTree writes a project with what git ignores in it: root and
// nested .gitignore files, a negation, an anchored and a directory-only
// pattern, .git/info/exclude, and deputy's own .deputy. Every file holds
// "needle", so grep finds each one it searches.
func ignoredTree(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	files := map[string]string{
		".gitignore":                "# build output\n*.log\n!keep.log\nbuild/\n/rootonly.txt\nnode_modules\r\n",
		".git/info/exclude":         "notes-*.md\n",
		".git/HEAD":                 "ref: refs/heads/main needle\n",
		".deputy/agents/x.md":       "needle\n",
		"src/.gitignore":            "generated.go\n!debug.log\n",
		"src/main.go":               "package main // needle\n",
		"src/generated.go":          "package main // needle\n",
		"src/debug.log":             "needle\n",
		"src/trace.log":             "needle\n",
		"src/rootonly.txt":          "needle\n",
		"src/lib/generated.go":      "package lib // needle\n",
		"app.log":                   "needle\n",
		"keep.log":                  "needle\n",
		"rootonly.txt":              "needle\n",
		"build/out.txt":             "needle\n",
		"docs/build.md":             "needle\n",
		"notes-mine.md":             "needle\n",
		"node_modules/pkg/index.js": "needle\n",
	}
	for p, content := range files {
		mustWrite(t, filepath.Join(ws, p), content)
	}
	return ws
}

// What git itself would list and search in the tree.
var notIgnored = []string{
	".gitignore", "docs/build.md", "keep.log",
	"src/.gitignore", "src/debug.log", "src/main.go", "src/rootonly.txt",
}

func TestGlobAndGrepHonourGitignore(t *testing.T) {
	t.Parallel()
	ws := ignoredTree(t)
	set := newSet(t, ws)
	out, isErr := callTool(t, set, "glob", map[string]any{"pattern": "**/*"})
	if isErr {
		t.Fatal(out)
	}
	if got := files(out); !slices.Equal(got, notIgnored) {
		t.Errorf("glob **/* files = %q\nwant %q", got, notIgnored)
	}
	out, isErr = callTool(t, set, "grep", map[string]any{"pattern": "needle"})
	if isErr {
		t.Fatal(out)
	}
	var searched []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, _, _ := strings.Cut(line, ":")
		searched = append(searched, name)
	}
	slices.Sort(searched)
	want := slices.DeleteFunc(slices.Clone(notIgnored), func(p string) bool {
		return filepath.Base(p) == ".gitignore" // they hold no needle
	})
	if !slices.Equal(searched, want) {
		t.Errorf("grep searched %q\nwant %q", searched, want)
	}
}

// include_ignored lists and searches what git ignores, and still never
// .git or .deputy.
func TestIncludeIgnored(t *testing.T) {
	t.Parallel()
	ws := ignoredTree(t)
	set := newSet(t, ws)
	out, _ := callTool(t, set, "glob", map[string]any{"pattern": "**/*", "include_ignored": true})
	got := files(out)
	for _, want := range []string{"app.log", "build/out.txt", "node_modules/pkg/index.js", "notes-mine.md", "rootonly.txt", "src/generated.go", "src/trace.log"} {
		if !slices.Contains(got, want) {
			t.Errorf("include_ignored: %s not listed in %q", want, got)
		}
	}
	out, _ = callTool(t, set, "grep", map[string]any{"pattern": "needle", "include_ignored": true})
	for _, want := range []string{"app.log:1:", "build/out.txt:1:", "src/lib/generated.go:1:"} {
		if !strings.Contains(out, want) {
			t.Errorf("grep include_ignored: %s missing from %q", want, out)
		}
	}
	for _, o := range []string{strings.Join(got, "\n"), out} {
		if strings.Contains(o, ".git/") || strings.Contains(o, ".deputy") {
			t.Errorf("listed .git or .deputy: %q", o)
		}
	}
}

// A path the model names is searched even when git ignores it, as git
// lists an ignored path given to it; the rules still apply below a path
// that is not itself ignored, the .gitignore files above it included.
func TestNamedPathsAndNestedRules(t *testing.T) {
	t.Parallel()
	ws := ignoredTree(t)
	set := newSet(t, ws)
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"pattern": "needle", "path": "build"}, "build/out.txt:1: needle\n"},
		{map[string]any{"pattern": "needle", "path": "app.log"}, "app.log:1: needle\n"},
		{map[string]any{"pattern": "needle", "path": "src/lib"}, "no matches for \"needle\" in src/lib\n"},
		{map[string]any{"pattern": "needle", "path": "src"}, "src/debug.log:1: needle\nsrc/main.go:1: package main // needle\nsrc/rootonly.txt:1: needle\n"},
	} {
		if out, isErr := callTool(t, set, "grep", c.args); isErr || out != c.want {
			t.Errorf("grep %v = %q, want %q", c.args, out, c.want)
		}
	}
	if out, _ := callTool(t, set, "glob", map[string]any{"pattern": "node_modules/**/*.js"}); out != "node_modules/pkg/index.js\n" {
		t.Errorf("glob into an ignored directory it names = %q", out)
	}
	if out, _ := callTool(t, set, "glob", map[string]any{"pattern": "src/*"}); files(out) == nil || slices.Contains(files(out), "src/generated.go") {
		t.Errorf("glob src/* = %q: src/.gitignore must apply", out)
	}
}

// The same tree through git itself: what `git ls-files --others
// --exclude-standard` lists (the untracked files git does not ignore) is
// what glob lists. Skipped without a git binary.
func TestGitignoreAgreesWithGit(t *testing.T) {
	t.Parallel()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git binary")
	}
	ws := ignoredTree(t)
	// A real repository under the tree's .git (init keeps the files there).
	cmd := exec.Command(gitBin, "init", "-q", ws)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	cmd = exec.Command(gitBin, "-C", ws, "ls-files", "--others", "--exclude-standard")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	listed, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var fromGit []string
	for _, p := range strings.Fields(string(listed)) {
		if !strings.HasPrefix(p, ".deputy/") { // git knows nothing of deputy's state
			fromGit = append(fromGit, p)
		}
	}
	slices.Sort(fromGit)
	out, _ := callTool(t, newSet(t, ws), "glob", map[string]any{"pattern": "**/*"})
	if got := files(out); !slices.Equal(got, fromGit) {
		t.Errorf("glob lists %q\ngit lists  %q", got, fromGit)
	}
}

// files is the file paths of a glob listing, sorted, directories left out.
func files(out string) []string {
	var fs []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" && !strings.HasSuffix(l, "/") && !strings.HasPrefix(l, "no paths match") {
			fs = append(fs, l)
		}
	}
	slices.Sort(fs)
	return fs
}
