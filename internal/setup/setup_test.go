package setup

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/llm"
)

// Any process opens a program's fan-out root's model (deputy worker
// resumes a fan-out a library started): it plans, then answers with the
// tool's result.
func TestModelsOpenThePlanner(t *testing.T) {
	t.Parallel()
	m, name, err := (&Models{}).Open(agent.PlannerModel)
	if err != nil || name != agent.PlannerModel {
		t.Fatalf("%v %q", err, name)
	}
	plan := `{"tasks":[{"id":"a","subagent_type":"explorer","task":"x"}]}`
	resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserText(plan)}}, nil)
	if err != nil || len(resp.Message().ToolUses()) != 1 || string(resp.Content[0].Input) != plan {
		t.Fatalf("plan: %+v %v", resp, err)
	}
	msgs := []llm.Message{llm.UserText(plan), resp.Message(),
		{Role: llm.User, Content: []llm.Block{llm.ToolResult("fan_out_1", `{"merged":"m"}`, false)}}}
	resp, err = m.Generate(context.Background(), &llm.Request{Messages: msgs}, nil)
	if err != nil || resp.Message().Text() != `{"merged":"m"}` || resp.StopReason != llm.StopEndTurn {
		t.Fatalf("answer: %+v %v", resp, err)
	}
}

// An empty deputy.yaml in the workspace (the placeholder a fenced child's
// sandbox mounts while it runs) does not hide ~/.deputy/deputy.yaml; a
// workspace deputy.yaml with content still wins, and an empty file named
// explicitly is read as given.
func TestLoadConfigEmptyWorkspaceFileIsAbsent(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".deputy", "deputy.yaml"), "tiers: {haiku: \"anthropic:claude-haiku-4-5\"}\n")
	write(filepath.Join(ws, "deputy.yaml"), "")
	c, err := LoadConfig(ws, "", "anthropic:claude-sonnet-4-5")
	if err != nil || c.Tiers[agent.TierHaiku] != "anthropic:claude-haiku-4-5" {
		t.Fatalf("an empty workspace deputy.yaml shadowed ~/.deputy's: %+v %v", c, err)
	}
	// The fake root's demo configuration is not reached either: ~/.deputy's applies.
	if c, err := LoadConfig(ws, "", "fake"); err != nil || c.Tiers[agent.TierHaiku] != "anthropic:claude-haiku-4-5" {
		t.Fatalf("fake root: %+v %v", c, err)
	}
	if c, err := LoadConfig(ws, filepath.Join(ws, "deputy.yaml"), "anthropic:claude-sonnet-4-5"); err != nil || len(c.Tiers) != 0 {
		t.Fatalf("explicit empty file: %+v %v", c, err)
	}
	write(filepath.Join(ws, "deputy.yaml"), "tiers: {haiku: \"openai:gpt-5-mini\"}\n")
	if c, err := LoadConfig(ws, "", "anthropic:claude-sonnet-4-5"); err != nil || c.Tiers[agent.TierHaiku] != "openai:gpt-5-mini" {
		t.Fatalf("the workspace's own: %+v %v", c, err)
	}
}
