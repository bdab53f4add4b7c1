package tool_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
	"github.com/deputy-run/deputy/tool/fstool"
	"github.com/deputy-run/deputy/tool/web"
)

// harmless keeps a tool's spec (so its schema is what gets validated) but
// replaces what it does: the fuzzer must not run arbitrary shell commands
// or reach the network.
type harmless struct{ tool.Tool }

func (h harmless) Run(_ context.Context, input json.RawMessage) (string, error) {
	var v map[string]any
	if err := json.Unmarshal(input, &v); err != nil {
		return "", err
	}
	return "ok", nil
}

type noSearch struct{}

func (noSearch) Search(context.Context, string) ([]web.Result, error) { return nil, nil }

// FuzzCallArgs feeds arbitrary bytes as the input of every built-in tool
// through Set.Call, on a real temporary workspace: schema validation and
// the file tools themselves must never panic, and nothing outside the
// workspace may change. bash and web_fetch only have their schemas checked.
func FuzzCallArgs(f *testing.F) {
	root := f.TempDir()
	ws := filepath.Join(root, "ws")
	sentinel := filepath.Join(root, "outside.txt")
	for p, c := range map[string]string{
		filepath.Join(ws, "a.txt"):       "alpha\nbeta\n",
		filepath.Join(ws, "dir", "b.go"): "package b\n",
		sentinel:                         "SENTINEL\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(root, filepath.Join(ws, "up")); err != nil {
		f.Fatal(err)
	}
	tools, err := builtin.Tools(builtin.Config{
		Workspace: ws,
		Searcher:  noSearch{},
		// Small caps keep each call fast as the fuzzer fills the workspace.
		Files: fstool.Limits{WalkEntries: 2000, MaxFileBytes: 1 << 20},
	})
	if err != nil {
		f.Fatal(err)
	}
	for i, t := range tools {
		switch t.Spec().Name {
		case "bash", "web_fetch":
			tools[i] = harmless{t}
		}
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		f.Fatal(err)
	}
	if len(set.Names()) != 8 {
		f.Fatalf("expected all 8 built-ins, got %v", set.Names())
	}

	for _, seed := range []string{
		`{"path":"a.txt"}`, `{"path":"a.txt","offset":2,"limit":1}`, `{"path":"../outside.txt"}`,
		`{"path":"up/outside.txt","content":"x"}`, `{"path":"a.txt","old":"alpha","new":"gamma"}`,
		`{"pattern":"**/*.go"}`, `{"pattern":"[","path":"dir"}`, `{"pattern":"{a,b}/**"}`,
		`{"command":"rm -rf /","timeout_s":601}`, `{"url":"file:///etc/passwd"}`, `{"query":"q"}`,
		`{"path":"a.txt","offset":1e400}`, `{"path":"a.txt","limit":9223372036854775808}`,
		`{"path":"\u0000"}`, `{"path":"a.txt","path":"b"}`, `[]`, `null`, `""`, ``, `{`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	names := set.Names()
	f.Fuzz(func(t *testing.T, input []byte) {
		for _, name := range names {
			out, _ := set.Call(context.Background(), name, json.RawMessage(input))
			if strings.HasPrefix(out, "tool "+name+" crashed") {
				t.Fatalf("%s panicked on %q:\n%s", name, input, out)
			}
		}
		if b, err := os.ReadFile(sentinel); err != nil || string(b) != "SENTINEL\n" {
			t.Fatalf("the file outside the workspace changed (%q, %v) on input %q", b, err, input)
		}
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if n := e.Name(); n != "ws" && n != "outside.txt" {
				t.Fatalf("%s created outside the workspace on input %q", n, input)
			}
		}
	})
}
