package setup

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/fence"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/sandbox"
	"github.com/deputy-run/deputy/tool"
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
	if err != nil || c.Tiers[agentdef.TierHaiku] != "anthropic:claude-haiku-4-5" {
		t.Fatalf("an empty workspace deputy.yaml shadowed ~/.deputy's: %+v %v", c, err)
	}
	// The fake root's demo configuration is not reached either: ~/.deputy's applies.
	if c, err := LoadConfig(ws, "", "fake"); err != nil || c.Tiers[agentdef.TierHaiku] != "anthropic:claude-haiku-4-5" {
		t.Fatalf("fake root: %+v %v", c, err)
	}
	if c, err := LoadConfig(ws, filepath.Join(ws, "deputy.yaml"), "anthropic:claude-sonnet-4-5"); err != nil || len(c.Tiers) != 0 {
		t.Fatalf("explicit empty file: %+v %v", c, err)
	}
	write(filepath.Join(ws, "deputy.yaml"), "tiers: {haiku: \"openai:gpt-5-mini\"}\n")
	if c, err := LoadConfig(ws, "", "anthropic:claude-sonnet-4-5"); err != nil || c.Tiers[agentdef.TierHaiku] != "openai:gpt-5-mini" {
		t.Fatalf("the workspace's own: %+v %v", c, err)
	}
}

// deputyWorkspace is a workspace holding deputy's database, its token and
// a definition, each with a secret in it.
func deputyWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for rel, body := range map[string]string{".deputy/deputy.db": "SQLite format 3\x00 SECRET transcripts",
		".deputy/token": "SECRET-token\n", ".deputy/agents/a.md": "---\nname: a\n---\nSECRET definition\n", "main.go": "package main\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func callSet(t *testing.T, set *tool.Set, name, args string) (string, bool) {
	t.Helper()
	return set.Call(context.Background(), name, json.RawMessage(args))
}

// A fenced child's file tools, which run in deputy's process outside its
// sandbox, cannot read .deputy/ (the database of every run, the token, the
// definitions) any more than its programs can: named it is refused, walked
// over it is absent.
func TestFencedChildFileToolsHideDeputyDir(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	ws := deputyWorkspace(t)
	f := Fence()(durable.Spec{Workspace: ws})
	fc, err := f.Fence(context.Background(), "i-1", &agentdef.Definition{Name: "boxed", Isolation: agentdef.IsolationSandbox})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Release()
	for _, c := range [][2]string{
		{"read_file", `{"path":".deputy/deputy.db"}`},
		{"read_file", `{"path":".deputy/token"}`},
		{"read_file", `{"path":".deputy/agents/a.md"}`},
		{"grep", `{"pattern":"SECRET","path":".deputy"}`},
		{"grep", `{"pattern":"SECRET","path":".deputy/token"}`},
		{"glob", `{"pattern":".deputy/**"}`},
	} {
		if out, isErr := callSet(t, fc.Tools, c[0], c[1]); !isErr || !strings.Contains(out, "is hidden") || strings.Contains(out, "SECRET") {
			t.Errorf("%s %s: %q", c[0], c[1], out)
		}
	}
	if out, isErr := callSet(t, fc.Tools, "grep", `{"pattern":"SECRET"}`); isErr || !strings.HasPrefix(out, "no matches") {
		t.Errorf("grep over the workspace: %q", out)
	}
	// (The box's placeholders for absent protected paths are listed.)
	if out, isErr := callSet(t, fc.Tools, "glob", `{"pattern":"**"}`); isErr || strings.Contains(out, ".deputy") || !strings.Contains(out, "main.go\n") {
		t.Errorf("glob **: %q", out)
	}
}

// An unfenced agent's file tools (a root's here) do not read the database
// or the token either; its definitions they may read and write.
func TestRootFileToolsHideSecrets(t *testing.T) {
	t.Parallel()
	ws := deputyWorkspace(t)
	set, err := Tools()(durable.Spec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".deputy/deputy.db", ".deputy/token"} {
		if out, isErr := callSet(t, set, "read_file", `{"path":"`+p+`"}`); !isErr || !strings.Contains(out, "is hidden") {
			t.Errorf("read_file %s: %q", p, out)
		}
	}
	if out, isErr := callSet(t, set, "grep", `{"pattern":"SECRET"}`); isErr || out != ".deputy/agents/a.md:4: SECRET definition\n" {
		t.Errorf("grep: %q", out)
	}
	if out, isErr := callSet(t, set, "write_file", `{"path":".deputy/agents/b.md","content":"---\nname: b\n---\n"}`); isErr {
		t.Errorf("write_file a definition: %q", out)
	}
}

// deputy.yaml's bash.env reaches programs end to end: parsed from the
// file, recorded in the run's spec, granted by a root's bash and by a
// fenced child's, through the sandbox's own allowlist too; a variable it
// does not name reaches neither.
func TestBashEnvGrantReachesPrograms(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "deputy.yaml"), []byte("bash:\n  env: [SETUP_GRANTED]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SETUP_GRANTED", "granted-value")
	t.Setenv("SETUP_UNGRANTED", "ungranted-value")
	cfg, err := LoadConfig(ws, "", "anthropic:claude-sonnet-4-5")
	if err != nil {
		t.Fatal(err)
	}
	spec := durable.Spec{Workspace: ws, Config: cfg}
	const cmd = `{"command":"echo \"granted=$SETUP_GRANTED ungranted=$SETUP_UNGRANTED\""}`
	const want = "granted=granted-value ungranted=\n[exit code: 0]"

	set, err := Tools()(spec)
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := callSet(t, set, "bash", cmd); isErr || out != want {
		t.Errorf("root's bash: %q", out)
	}

	requireSandbox(t)
	fc, err := Fence()(spec).Fence(context.Background(), "i-1", &agentdef.Definition{Name: "boxed", Isolation: agentdef.IsolationSandbox})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Release()
	if out, isErr := callSet(t, fc.Tools, "bash", cmd); isErr || out != want {
		t.Errorf("fenced child's bash: %q", out)
	}
}

// A workspace where a fenced child's tripwire fired (fence.UntrustedFile)
// is not loaded: the start fails naming the files and what to do.
func TestRunnerRefusesUntrustedWorkspace(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	planted := filepath.Join(ws, ".claude", "agents", "general-purpose.md")
	if err := os.MkdirAll(filepath.Dir(planted), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planted, []byte("---\nname: general-purpose\ndescription: x\n---\nplanted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Runner(ws, &agentdef.Config{}, &Models{}, nil); err != nil {
		t.Fatalf("before the tripwire: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".deputy"), 0o700); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(ws, fence.UntrustedFile)
	if err := os.WriteFile(marker, []byte("# header\n2026-01-02T03:04:05Z\ti-1\t"+planted+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Runner(ws, &agentdef.Config{}, &Models{}, nil)
	var ue *fence.UntrustedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), planted) || !strings.Contains(err.Error(), "remove "+marker) {
		t.Fatalf("after the tripwire: %v", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Runner(ws, &agentdef.Config{}, &Models{}, nil); err != nil {
		t.Fatalf("after the review: %v", err)
	}
}

// requireSandbox skips a test that needs bubblewrap where it cannot run,
// and fails it in CI, which installs it (DEPUTY_REQUIRE_ISOLATION).
func requireSandbox(t *testing.T) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		if os.Getenv("DEPUTY_REQUIRE_ISOLATION") != "" {
			t.Fatal(err)
		}
		t.Skip("bubblewrap cannot run here:", err)
	}
}
