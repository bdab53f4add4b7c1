package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// demoTools runs the demo's tool calls for real in dir, with the inputs the
// built-in tools take: real files, and a real shell for bash. fail names a
// tool that fails instead, to test the demo's error path.
type demoTools struct {
	dir  string
	fail string
}

func (d demoTools) run(ctx context.Context, name string, input json.RawMessage) (string, error) {
	var in struct {
		Path, Pattern, Command, Content, Old, New string
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return "", err
	}
	if name == d.fail {
		return "", fmt.Errorf("%s: permission denied", name)
	}
	switch name {
	case "glob":
		if in.Pattern != "**/*" {
			return "", fmt.Errorf("unexpected pattern %q", in.Pattern)
		}
		var out []string
		err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || p == d.dir {
				return err
			}
			rel, _ := filepath.Rel(d.dir, p)
			out = append(out, rel)
			return nil
		})
		return strings.Join(out, "\n") + "\n", err
	case "bash":
		cmd := exec.CommandContext(ctx, "sh", "-c", in.Command)
		cmd.Dir = d.dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	case "write_file":
		return "wrote " + in.Path, os.WriteFile(filepath.Join(d.dir, in.Path), []byte(in.Content), 0o644)
	case "edit_file":
		p := filepath.Join(d.dir, in.Path)
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		if n := strings.Count(string(b), in.Old); n != 1 {
			return "", fmt.Errorf("old string found %d times", n)
		}
		return "edited " + in.Path, os.WriteFile(p, []byte(strings.Replace(string(b), in.Old, in.New, 1)), 0o644)
	case "read_file":
		b, err := os.ReadFile(filepath.Join(d.dir, in.Path))
		return string(b), err
	}
	return "", fmt.Errorf("unknown tool %q", name)
}

// playDemo drives m like the agent loop: call the model, run its tool
// calls, send the results back, until it answers without tools.
func playDemo(t *testing.T, m llm.Model, task string, offered []llm.ToolSpec, tl demoTools) (turns int, final string) {
	t.Helper()
	turns, final, err := runDemo(m, task, offered, tl)
	if err != nil {
		t.Fatal(err)
	}
	return turns, final
}

// runDemo is playDemo for goroutines other than the test's.
func runDemo(m llm.Model, task string, offered []llm.ToolSpec, tl demoTools) (int, string, error) {
	ctx := context.Background()
	req := &llm.Request{Model: "fake", Tools: offered, Messages: []llm.Message{llm.UserText(task)}}
	for turn := 1; turn <= 10; turn++ {
		resp, err := m.Generate(ctx, req, nil)
		if err != nil {
			return turn, "", fmt.Errorf("turn %d: %w", turn, err)
		}
		req.Messages = append(req.Messages, resp.Message())
		calls := resp.Message().ToolUses()
		if len(calls) == 0 {
			if resp.StopReason != llm.StopEndTurn {
				return turn, "", fmt.Errorf("final stop reason %q", resp.StopReason)
			}
			return turn, resp.Message().Text(), nil
		}
		var results []llm.Block
		for _, c := range calls {
			if !json.Valid(c.Input) {
				return turn, "", fmt.Errorf("turn %d: invalid input %s", turn, c.Input)
			}
			out, err := tl.run(ctx, c.Name, c.Input)
			if err != nil {
				out = err.Error()
			}
			results = append(results, llm.ToolResult(c.ID, out, err != nil))
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.User, Content: results})
	}
	return 0, "", errors.New("the demo did not end")
}

var demoToolNames = []string{"read_file", "write_file", "edit_file", "glob", "grep", "bash"}

func TestDemoOnRealWorkspace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"main.go", "README.md", "pkg/util.go"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	task := "Tidy up the README"
	turns, final := playDemo(t, NewModel(DemoScenario(), WithoutLatency()), task, tools(demoToolNames...), demoTools{dir: dir})
	if turns != 5 {
		t.Errorf("%d turns, want 5", turns)
	}
	note, err := os.ReadFile(filepath.Join(dir, "deputy-demo.md"))
	if err != nil {
		t.Fatal(err)
	}
	// glob listed pkg, pkg/util.go, main.go, README.md (4 paths).
	for _, want := range []string{"Task: " + task, "listed 4 paths", "STATUS: reviewed by deputy's scripted model at turn 3"} {
		if !strings.Contains(string(note), want) {
			t.Errorf("deputy-demo.md lacks %q:\n%s", want, note)
		}
	}
	if strings.Contains(string(note), "DRAFT") {
		t.Errorf("marker not replaced:\n%s", note)
	}
	lines := strings.Count(string(note), "\n")
	for _, want := range []string{`You asked: "` + task + `"`, "listed 4 paths", fmt.Sprintf("read it back (%d lines)", lines), "deputy-demo.md"} {
		if !strings.Contains(final, want) {
			t.Errorf("final answer lacks %q:\n%s", want, final)
		}
	}
}

func TestDemoExplainsMissingTools(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// No tools at all: the first turn says what is missing.
	turns, final := playDemo(t, NewModel(DemoScenario(), WithoutLatency()), "do it", nil, demoTools{dir: dir})
	if turns != 1 || !strings.Contains(final, "needs the glob and bash tools") || !strings.Contains(final, `"do it"`) {
		t.Errorf("%d turns: %s", turns, final)
	}
	// Without edit_file, the demo stops at turn 3 and says so.
	var offered []string
	for _, n := range demoToolNames {
		if n != "edit_file" {
			offered = append(offered, n)
		}
	}
	turns, final = playDemo(t, NewModel(DemoScenario(), WithoutLatency()), "do it", tools(offered...), demoTools{dir: dir})
	if turns != 3 || !strings.Contains(final, "needs the edit_file tool") {
		t.Errorf("%d turns: %s", turns, final)
	}
}

func TestDemoStopsOnToolError(t *testing.T) {
	t.Parallel()
	turns, final := playDemo(t, NewModel(DemoScenario(), WithoutLatency()), "do it", tools(demoToolNames...),
		demoTools{dir: t.TempDir(), fail: "edit_file"})
	if turns != 4 || !strings.Contains(final, "stopped at turn 4") || !strings.Contains(final, "> edit_file: permission denied") {
		t.Errorf("%d turns: %s", turns, final)
	}
}

// TestDemoTakesAboutASecond plays the demo on a fake clock and measures
// the latency it simulates: visible, but a few seconds at most.
func TestDemoTakesAboutASecond(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Unix(0, 0))
	m := NewModel(DemoScenario(), WithModelClock(c))
	done := make(chan struct{})
	dir := t.TempDir()
	var err error
	go func() {
		defer close(done)
		_, _, err = runDemo(m, "Tidy up the README", tools(demoToolNames...), demoTools{dir: dir})
	}()
	took := driveClock(t, c, time.Millisecond, done)
	if err != nil {
		t.Fatal(err)
	}
	if now := c.Now().Sub(time.Unix(0, 0)); now != took {
		t.Fatalf("the clock is at %v but was moved %v", now, took)
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Errorf("the demo simulates %v of latency", took)
	}
}

func TestDemoIsAFreshCopy(t *testing.T) {
	t.Parallel()
	a, b := DemoScenario(), DemoScenario()
	if a == b || a.rules[0] == b.rules[0] {
		t.Error("DemoScenario returns shared state")
	}
}
