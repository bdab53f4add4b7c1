package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// completions runs the shell's completion request for args and returns
// the candidates (the words before each tab) and the directive line.
func completions(t *testing.T, dir string, args ...string) (words []string, directive string) {
	t.Helper()
	out, errOut, code := deputy(t, dir, nil, append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d\n%s", args, code, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, ":") {
			directive = line
			continue
		}
		w, _, _ := strings.Cut(line, "\t")
		words = append(words, w)
	}
	return words, directive
}

// Completion offers instance ids (newest first, only those a command acts
// on), definition types and states; where nothing can be read it offers
// nothing, quietly, and creates no database.
func TestCompletion(t *testing.T) {
	t.Parallel()
	ws, first := recordRun(t)
	writeFile(t, filepath.Join(ws, ".deputy", "agents", "helper.md"), "---\nname: helper\ndescription: Helps.\n---\nYou help.\n")
	queued, _, _ := deputy(t, ws, nil, "run", "--model", "fake", "--detach", "later")
	queued = strings.TrimSpace(queued)

	ids, dir := completions(t, ws, "show", "")
	if len(ids) != 5 || ids[0] != queued || ids[4] != first || dir != ":4" {
		t.Errorf("show: %v %s; want 5 ids, the queued root first, the first run's last, no files", ids, dir)
	}
	if ids, _ := completions(t, ws, "cancel", ""); len(ids) != 1 || ids[0] != queued {
		t.Errorf("cancel offers %v; want only the active %s", ids, queued)
	}
	if ids, _ := completions(t, ws, "rm", ""); len(ids) != 4 || ids[len(ids)-1] != first {
		t.Errorf("rm offers %v; want the four ended instances", ids)
	}
	if ids, _ := completions(t, ws, "show", first, ""); len(ids) != 0 {
		t.Errorf("a second argument is offered %v", ids)
	}
	types, _ := completions(t, ws, "ps", "--type", "")
	for _, want := range []string{"explorer", "general-purpose", "helper"} {
		if !strings.Contains(" "+strings.Join(types, " ")+" ", " "+want+" ") {
			t.Errorf("--type offers %v, not %s", types, want)
		}
	}
	if states, _ := completions(t, ws, "ps", "--state", ""); len(states) != 8 || states[0] != "created" {
		t.Errorf("--state offers %v", states)
	}

	empty := t.TempDir()
	if ids, dir := completions(t, empty, "show", ""); len(ids) != 0 || dir != ":4" {
		t.Errorf("no database: %v %s", ids, dir)
	}
	if _, err := os.Stat(filepath.Join(empty, ".deputy")); !os.IsNotExist(err) {
		t.Errorf("completion created .deputy: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.db")
	writeFile(t, bad, "not a database")
	if ids, _ := completions(t, empty, "show", "--db", bad, ""); len(ids) != 0 {
		t.Errorf("a damaged database: %v", ids)
	}
}
