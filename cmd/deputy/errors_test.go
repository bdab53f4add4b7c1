package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No message says "deputy:" twice: failing commands of every kind print
// each of their lines with the prefix once at most.
func TestNoMessageSaysDeputyTwice(t *testing.T) {
	t.Parallel()
	ws, id := recordRun(t)
	notDB := filepath.Join(t.TempDir(), "not-a-db")
	if err := os.WriteFile(notDB, []byte("this is no database"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := [][]string{
		{"run", "--model", "fake", "--workspace", "/does/not/exist", "x"},
		{"run", "--model", "nosuch:model", "x"},
		{"run", "--model", "anthropic:claude-sonnet-4-5", "x"}, // no key
		{"run", "--model", "fake", "--scenario", "/does/not/exist.yaml", "x"},
		{"run", "--model", "fake", "--config", "/does/not/exist.yaml", "x"},
		{"run", "--bogus-flag"},
		{"show", "i-nosuch"},
		{"show", "--db", notDB, id},
		{"ps", "--db", filepath.Join(t.TempDir(), "none.db")},
		{"ps", "--state", "sleeping"},
		{"pause", id},
		{"rm", "i-nosuch"},
		{"prune"},
		{"prune", "--before", "yesterday"},
		{"merge", id},
		{"agents", "validate", "/does/not/exist.md"},
		{"mcp"},
		{"nosuchcommand"},
	}
	for _, args := range cases {
		_, errOut, code := deputy(t, ws, nil, args...)
		if code == 0 {
			t.Errorf("%v: exit 0; the case does not fail", args)
		}
		for _, line := range strings.Split(errOut, "\n") {
			if strings.Count(line, "deputy:") > 1 {
				t.Errorf("%v: %q", args, line)
			}
		}
	}
}

// The library's "deputy: " prefix under the CLI's own context goes.
func TestErrLineSaysDeputyOnce(t *testing.T) {
	t.Parallel()
	lib := errors.New("deputy: workspace /x is not a directory")
	for err, want := range map[error]string{
		lib:                                    "deputy: workspace /x is not a directory",
		fmt.Errorf("deputy: %w", lib):          "deputy: workspace /x is not a directory",
		fmt.Errorf("stopped: %w", lib):         "deputy: stopped: workspace /x is not a directory",
		errors.New("no instance \"deputy:x\""): "deputy: no instance \"deputy:x\"",
	} {
		if got := errLine(err); got != want {
			t.Errorf("errLine(%q) = %q, want %q", err, got, want)
		}
	}
}
