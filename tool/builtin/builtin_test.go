package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func names(tools []tool.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Spec().Name)
	}
	return out
}

func TestToolsOrderAndReadOnly(t *testing.T) {
	t.Parallel()
	tools, err := builtin.Tools(builtin.Config{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"read_file", "write_file", "edit_file", "glob", "grep", "bash", "web_fetch"}
	if got := names(tools); !slices.Equal(got, want) {
		t.Fatalf("without a search backend: %v", got)
	}
	readOnly := map[string]bool{"read_file": true, "glob": true, "grep": true, "web_fetch": true, "web_search": true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"results":[{"title":"T","url":"https://r.example/","content":"about %s"}]}`, r.URL.Query().Get("q"))
	}))
	defer srv.Close()
	set, err := builtin.Set(builtin.Config{Workspace: t.TempDir(), SearchURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); !slices.Equal(got, append(want, "web_search")) {
		t.Fatalf("with a search backend: %v", got)
	}
	for _, spec := range set.Specs() {
		if got := set.ReadOnly(spec.Name); got != readOnly[spec.Name] {
			t.Errorf("%s: ReadOnly = %v", spec.Name, got)
		}
		var schema struct {
			Type                 string         `json:"type"`
			AdditionalProperties *bool          `json:"additionalProperties"`
			Required             []string       `json:"required"`
			Properties           map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(spec.InputSchema, &schema); err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		if schema.Type != "object" || schema.AdditionalProperties == nil || *schema.AdditionalProperties ||
			len(schema.Required) == 0 || len(spec.Description) < 40 {
			t.Errorf("%s: schema or description incomplete: %s", spec.Name, spec.InputSchema)
		}
		for name, p := range schema.Properties {
			if d, _ := p.(map[string]any)["description"].(string); d == "" {
				t.Errorf("%s.%s has no description", spec.Name, name)
			}
		}
	}
	out, isErr := set.Call(context.Background(), "web_search", json.RawMessage(`{"query":"deputy"}`))
	if isErr || out != "1. T\n   https://r.example/\n   about deputy\n" {
		t.Errorf("web_search: %q", out)
	}
}

func TestToolsConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []builtin.Config{
		{},
		{Workspace: filepath.Join(t.TempDir(), "missing")},
		{Workspace: t.TempDir(), SearchURL: "not a url"},
	} {
		if _, err := builtin.Tools(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// The tools share one workspace: what write_file creates, bash and
// read_file see, and bash runs there.
func TestToolsShareTheWorkspace(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	set, err := builtin.Set(builtin.Config{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	call := func(name, args string) string {
		t.Helper()
		out, isErr := set.Call(context.Background(), name, json.RawMessage(args))
		if isErr {
			t.Fatalf("%s %s: %s", name, args, out)
		}
		return out
	}
	call("write_file", `{"path":"notes/todo.md","content":"one\ntwo\n"}`)
	call("edit_file", `{"path":"notes/todo.md","old":"two","new":"three"}`)
	if out := call("bash", `{"command":"pwd; cat notes/todo.md; echo four >> notes/todo.md"}`); out != ws+"\none\nthree\n[exit code: 0]" {
		t.Errorf("bash: %q", out)
	}
	if out := call("read_file", `{"path":"notes/todo.md","offset":3}`); out != "     3\tfour\n" {
		t.Errorf("read_file: %q", out)
	}
	if out := call("grep", `{"pattern":"^th"}`); out != "notes/todo.md:2: three\n" {
		t.Errorf("grep: %q", out)
	}
	if out := call("glob", `{"pattern":"**/*.md"}`); !strings.HasPrefix(out, "notes/todo.md\n") {
		t.Errorf("glob: %q", out)
	}
}

// deputy's database and token are hidden from every agent's file tools,
// with no configuration: a prompt-injected model could otherwise read
// every run's transcripts and the server's token and pass them on.
// Definitions stay reachable; Hidden adds paths (a fenced child's whole
// .deputy/).
func TestToolsHideDeputysSecrets(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for rel, body := range map[string]string{".deputy/deputy.db": "SQLite format 3 SECRET transcripts",
		".deputy/deputy.db-wal": "SECRET wal", ".deputy/token": "SECRET-token", ".deputy/agents/a.md": "---\nname: a\n---\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, rel), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	call := func(set *tool.Set, name, args string) (string, bool) {
		t.Helper()
		return set.Call(context.Background(), name, json.RawMessage(args))
	}
	set, err := builtin.Set(builtin.Config{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".deputy/deputy.db", ".deputy/deputy.db-wal", ".deputy/token"} {
		if out, isErr := call(set, "read_file", `{"path":"`+p+`"}`); !isErr || !strings.Contains(out, "is hidden") {
			t.Errorf("read_file %s: %q", p, out)
		}
	}
	if out, isErr := call(set, "grep", `{"pattern":"SECRET"}`); isErr || !strings.HasPrefix(out, "no matches") {
		t.Errorf("grep: %q", out)
	}
	if out, isErr := call(set, "glob", `{"pattern":".deputy/**"}`); isErr || out != ".deputy/agents/\n.deputy/agents/a.md\n" {
		t.Errorf("glob: %q", out)
	}
	if out, isErr := call(set, "read_file", `{"path":".deputy/agents/a.md"}`); isErr {
		t.Errorf("read_file a definition: %q", out)
	}
	set, err = builtin.Set(builtin.Config{Workspace: ws, Hidden: []string{".deputy/"}})
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := call(set, "read_file", `{"path":".deputy/agents/a.md"}`); !isErr || !strings.Contains(out, "is hidden") {
		t.Errorf("read_file with .deputy/ hidden: %q", out)
	}
	if out, isErr := call(set, "glob", `{"pattern":"**"}`); isErr || !strings.HasPrefix(out, "no paths match") {
		t.Errorf("glob with .deputy/ hidden: %q", out)
	}
}

// BashPassEnv is the operator's grant: bash gets those names of BashEnv
// beyond its allowlist, and still never deputy's own.
func TestToolsBashPassEnv(t *testing.T) {
	t.Parallel()
	set, err := builtin.Set(builtin.Config{Workspace: t.TempDir(),
		BashEnv:     []string{"PATH=" + os.Getenv("PATH"), "GRANTED=g", "UNGRANTED=u", "DEPUTY_TOKEN=t"},
		BashPassEnv: []string{"GRANTED", "DEPUTY_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	out, isErr := set.Call(context.Background(), "bash", json.RawMessage(`{"command":"echo \"$GRANTED/$UNGRANTED/$DEPUTY_TOKEN\""}`))
	if isErr || out != "g//\n[exit code: 0]" {
		t.Errorf("got %q", out)
	}
}
