package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/store"
)

// corpus is the in-repo copy of the Claude Code definitions corpus.
var corpus, _ = filepath.Abs(filepath.Join("..", "..", "agentdef", "testdata", "corpus", "claude-agents"))

func TestAgentsValidateCorpus(t *testing.T) {
	t.Parallel()
	out, errOut, code := deputy(t, t.TempDir(), nil, "agents", "validate", corpus)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, lastLines(out, 5), errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[len(lines)-1] != "loaded 360/360" {
		t.Fatalf("last line %q", lines[len(lines)-1])
	}
	if strings.Contains(out, "error:") {
		t.Fatalf("errors:\n%s", out)
	}
	// The 8 files with an unquoted ": " in a one-line description.
	if n := strings.Count(out, "read as Claude Code reads it"); n != 8 {
		t.Fatalf("%d warnings of values read as Claude Code reads them, want 8", n)
	}
}

// The counts the corpus README states, computed from the CLI's JSON.
func TestAgentsListJSONReproducesCorpusCounts(t *testing.T) {
	t.Parallel()
	out, errOut, code := deputy(t, t.TempDir(), nil, "agents", "list", "--json", corpus)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var defs []struct {
		Name          string         `json:"name"`
		Description   string         `json:"description"`
		Model         string         `json:"model"`
		DeclaredTools *[]string      `json:"declared_tools"`
		Extra         map[string]any `json:"extra"`
		Source        struct {
			Level string `json:"level"`
			File  string `json:"file"`
		} `json:"source"`
	}
	if err := json.Unmarshal([]byte(out), &defs); err != nil {
		t.Fatal(err)
	}
	if len(defs) != 360 {
		t.Fatalf("%d definitions", len(defs))
	}
	models, names := map[string]int{}, map[string]int{}
	color, absent, empty, list := 0, 0, 0, 0
	for _, d := range defs {
		if d.Name == "" || d.Description == "" || d.Source.Level != "file" || !strings.HasPrefix(d.Source.File, corpus) {
			t.Fatalf("definition %+v", d)
		}
		models[d.Model]++
		if _, ok := d.Extra["color"]; ok {
			color++
		}
		switch {
		case d.DeclaredTools == nil:
			absent++
		case len(*d.DeclaredTools) == 0:
			empty++
		default:
			list++
			for _, n := range *d.DeclaredTools {
				names[n]++
			}
		}
	}
	want := map[string]int{"sonnet": 176, "inherit": 77, "opus": 54, "haiku": 43, "fable": 2, "": 8}
	for k, v := range want {
		if models[k] != v {
			t.Errorf("model %q: %d, want %d", k, models[k], v)
		}
	}
	if len(models) != len(want) || color != 9 || absent != 187 || empty != 1 || list != 172 {
		t.Errorf("models %v color %d tools absent/[]/list %d/%d/%d", models, color, absent, empty, list)
	}
	for k, v := range map[string]int{"Read": 170, "Glob": 162, "Grep": 161, "Edit": 141, "Write": 140, "Bash": 127, "WebFetch": 39, "WebSearch": 37} {
		if names[k] != v {
			t.Errorf("tool %s in %d files, want %d", k, names[k], v)
		}
	}
}

func TestAgentsProjectCatalogAndErrors(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	dir := filepath.Join(proj, ".claude", "agents")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"good.md":   "---\nname: helper\ndescription: Helps\ntools: Read, TeamCreate\n---\nHelp.\n",
		"nodesc.md": "---\nname: broken\n---\n",
		"dup.md":    "---\nname: helper\ndescription: again\n---\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := deputy(t, proj, nil, "agents", "validate")
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"error: .claude/agents/good.md:2: duplicate name \"helper\": also defined in .claude/agents/dup.md:2",
		"error: .claude/agents/nodesc.md:1: description: missing",
		"warning: .claude/agents/good.md:4: tools: \"TeamCreate\" is not a tool deputy can serve",
		"loaded 1/3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	out, errOut, code := deputy(t, proj, nil, "agents", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"helper\n", "general-purpose\n", "reviewer\n", "mode:             isolated (pinned)", "source:           project .claude/agents/dup.md:2"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "duplicate name") {
		t.Errorf("list stderr lacks the errors: %s", errOut)
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// storedDefinitions is what the workspace's database holds, name to
// source; nil when there is no database at all.
func storedDefinitions(t *testing.T, ws string) map[string]string {
	t.Helper()
	db := filepath.Join(ws, ".deputy", "deputy.db")
	if _, err := os.Stat(db); os.IsNotExist(err) {
		return nil
	}
	st, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defs, err := st.Definitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range defs {
		out[d.Name] = d.Source
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// One bad file stores nothing: a put is all or nothing, so a fixed rerun
// is the whole change.
func TestAgentsPutIsAllOrNothing(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	good := filepath.Join(ws, "helper.md")
	bad := filepath.Join(ws, "broken.md")
	writeFile(t, good, "---\nname: helper\ndescription: helps\ntools: Read, Grep\n---\nYou help.\n")
	writeFile(t, bad, "---\nname: broken\ndescription: b\nmode: sideways\n---\n")
	out, errOut, code := deputy(t, ws, nil, "agents", "put", good, bad)
	if code != exitUsage || strings.Contains(out, "stored") || !strings.Contains(errOut, "broken.md:4: mode:") ||
		!strings.Contains(errOut, "nothing stored") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if got := storedDefinitions(t, ws); len(got) != 0 {
		t.Fatalf("stored %v", got)
	}
	if out, errOut, code := deputy(t, ws, nil, "agents", "put", good); code != 0 || !strings.Contains(out, "stored helper") {
		t.Fatalf("put: exit %d: %s %s", code, out, errOut)
	}
	// Putting it again is fine (an upsert).
	if _, errOut, code := deputy(t, ws, nil, "agents", "put", good); code != 0 {
		t.Fatalf("second put: exit %d: %s", code, errOut)
	}
	if got := storedDefinitions(t, ws); len(got) != 1 || got["helper"] == "" {
		t.Fatalf("stored %v", got)
	}
}

// Two files of one name in one put used to be stored one after the other,
// the second winning silently (issue 16, item 9).
func TestAgentsPutRefusesTwoFilesOfOneName(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	old := "---\nname: helper\ndescription: the stored one\n---\nOld.\n"
	writeFile(t, filepath.Join(ws, "old.md"), old)
	if _, errOut, code := deputy(t, ws, nil, "agents", "put", "old.md"); code != 0 {
		t.Fatalf("put: exit %d: %s", code, errOut)
	}
	writeFile(t, filepath.Join(ws, "a.md"), "---\nname: helper\ndescription: from a\n---\nA.\n")
	writeFile(t, filepath.Join(ws, "b.md"), "---\ndescription: from b\nname: helper\n---\nB.\n")
	writeFile(t, filepath.Join(ws, "other.md"), "---\nname: other\ndescription: fine\n---\nO.\n")
	out, errOut, code := deputy(t, ws, nil, "agents", "put", "a.md", "other.md", "b.md")
	if code != exitUsage || strings.Contains(out, "stored") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	for _, want := range []string{`b.md:3: name "helper" is also defined in a.md:2`, "1 of 3 files", "nothing stored"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if got := storedDefinitions(t, ws); len(got) != 1 || got["helper"] != old {
		t.Fatalf("stored %v, want only the old helper", got)
	}
}

// A definition whose front matter is not YAML is refused with file:line
// by every way in: validate on the catalog's directory and on a path,
// list, and put (issue 16, item 9: "tools: [read_file, glob" loaded as
// [glob] with a warning).
func TestAgentsBrokenFrontMatterRefusedWithFileAndLine(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	writeFile(t, filepath.Join(proj, ".claude", "agents", "broken.md"),
		"---\nname: broken\ndescription: reads\ntools: [read_file, glob\nmodel: haiku\n---\nRead.\n")
	writeFile(t, filepath.Join(proj, ".claude", "agents", "good.md"), "---\nname: good\ndescription: fine\n---\nGood.\n")
	const want = ".claude/agents/broken.md:4: tools: not valid YAML"

	out, _, code := deputy(t, proj, nil, "agents", "validate")
	if code != 1 || !strings.Contains(out, "error: "+want) || !strings.Contains(out, "loaded 1/2") {
		t.Fatalf("validate: exit %d\n%s", code, out)
	}
	out, _, code = deputy(t, proj, nil, "agents", "validate", filepath.Join(".claude", "agents"))
	if code != 1 || !strings.Contains(out, "error: "+want) || !strings.Contains(out, "loaded 1/2") {
		t.Fatalf("validate PATH: exit %d\n%s", code, out)
	}
	out, errOut, code := deputy(t, proj, nil, "agents", "list")
	if code != 0 || strings.Contains(out, "broken") || !strings.Contains(out, "good\n") || !strings.Contains(errOut, "error: "+want) {
		t.Fatalf("list: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	out, errOut, code = deputy(t, proj, nil, "agents", "put", filepath.Join(".claude", "agents", "good.md"), filepath.Join(".claude", "agents", "broken.md"))
	if code != exitUsage || strings.Contains(out, "stored") || !strings.Contains(errOut, want) {
		t.Fatalf("put: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if got := storedDefinitions(t, proj); len(got) != 0 {
		t.Fatalf("stored %v", got)
	}
}
