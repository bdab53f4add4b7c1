package deputy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/sandbox"
	"github.com/deputy-run/deputy/tool"
)

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

// builtinSet is what a root of a runtime whose RunTools is BuiltinTools
// holds in a run of spec.
func builtinSet(t *testing.T, spec durable.Spec) *tool.Set {
	t.Helper()
	set, err := toolsOf(&Options{RunTools: BuiltinTools})(spec)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// A fenced child's file tools, which run in deputy's process outside its
// sandbox, cannot read .deputy/ (the database of every run, the token, the
// definitions) any more than its programs can: named it is refused, walked
// over it is absent.
func TestFencedChildFileToolsHideDeputyDir(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	ws := deputyWorkspace(t)
	fc, err := fenceOf(durable.Spec{Workspace: ws}).Fence(context.Background(), "i-1",
		&agentdef.Definition{Name: "boxed", Isolation: agentdef.IsolationSandbox})
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

// An unfenced agent's built-in file tools (a root's here) do not read the
// database or the token either; its definitions they may read and write.
func TestRootFileToolsHideSecrets(t *testing.T) {
	t.Parallel()
	ws := deputyWorkspace(t)
	set := builtinSet(t, durable.Spec{Workspace: ws})
	for _, p := range []string{".deputy/deputy.db", ".deputy/token"} {
		if out, isErr := callSet(t, set, "read_file", `{"path":"`+p+`"}`); !isErr || !strings.Contains(out, "is hidden") {
			t.Errorf("read_file %s: %q", p, out)
		}
	}
	// A workspace-wide grep skips .deputy/ as it skips .git/; named, it is searched.
	if out, isErr := callSet(t, set, "grep", `{"pattern":"SECRET","path":".deputy"}`); isErr || out != ".deputy/agents/a.md:4: SECRET definition\n" {
		t.Errorf("grep: %q", out)
	}
	if out, isErr := callSet(t, set, "write_file", `{"path":".deputy/agents/b.md","content":"---\nname: b\n---\n"}`); isErr {
		t.Errorf("write_file a definition: %q", out)
	}
}

// A root holds RunTools' for the workspace its spec records, then Tools; a
// name in both is an error naming it, and a workspace that is gone is one
// naming the directory.
func TestRootToolsAreRunToolsThenTools(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	o := &Options{RunTools: BuiltinTools, Tools: []Tool{namedTool("wordcount")}}
	set, err := toolsOf(o)(durable.Spec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Names(), ","); got != "read_file,write_file,edit_file,glob,grep,bash,web_fetch,wordcount" {
		t.Errorf("held %s", got)
	}
	o.Tools = []Tool{namedTool("bash")}
	if _, err := toolsOf(o)(durable.Spec{Workspace: ws}); err == nil || !strings.Contains(err.Error(), "bash") {
		t.Errorf("a name held twice: %v", err)
	}
	gone := filepath.Join(ws, "gone")
	if _, err := toolsOf(o)(durable.Spec{Workspace: gone}); err == nil || !strings.Contains(err.Error(), gone+" is not a directory") {
		t.Errorf("a workspace that is gone: %v", err)
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
	cfg, err := FindConfig(ws)
	if err != nil {
		t.Fatal(err)
	}
	spec := durable.Spec{Workspace: ws, Config: cfg}
	const cmd = `{"command":"echo \"granted=$SETUP_GRANTED ungranted=$SETUP_UNGRANTED\""}`
	const want = "granted=granted-value ungranted=\n[exit code: 0]"

	if out, isErr := callSet(t, builtinSet(t, spec), "bash", cmd); isErr || out != want {
		t.Errorf("root's bash: %q", out)
	}

	requireSandbox(t)
	fc, err := fenceOf(spec).Fence(context.Background(), "i-1", &agentdef.Definition{Name: "boxed", Isolation: agentdef.IsolationSandbox})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Release()
	if out, isErr := callSet(t, fc.Tools, "bash", cmd); isErr || out != want {
		t.Errorf("fenced child's bash: %q", out)
	}
}

// namedTool is a tool that does nothing, called its name.
type namedTool string

func (n namedTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: string(n), Description: "Does nothing.", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (namedTool) ReadOnly() bool                                       { return true }
func (namedTool) Run(context.Context, json.RawMessage) (string, error) { return "", nil }

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
