package agentdef

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func def(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\nprompt of " + desc + "\n"
}

func TestCatalogPrecedence(t *testing.T) {
	t.Parallel()
	proj, user := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(user, "explorer.md"), def("explorer", "user explorer"))
	writeFile(t, filepath.Join(user, "mine.md"), def("mine", "user mine"))
	writeFile(t, filepath.Join(user, "shared.md"), def("shared", "user shared"))
	writeFile(t, filepath.Join(proj, ".claude", "agents", "shared.md"), def("shared", "project shared"))
	writeFile(t, filepath.Join(proj, ".deputy", "agents", "proj.md"), def("proj", "project only"))
	writeFile(t, filepath.Join(proj, ".deputy", "agents", "notes.txt"), "not a definition")

	c, res := Load(LoadOptions{ProjectDir: proj, UserDir: user})
	if errs, _ := res.Issues(); len(errs) != 0 || res.Loaded() != 5 || len(res.Files) != 5 {
		t.Fatalf("loaded %d/%d, errors %v", res.Loaded(), len(res.Files), errs)
	}
	for name, want := range map[string]struct {
		desc  string
		level Level
	}{
		"explorer":        {"user explorer", LevelUser},     // user beats built-in
		"shared":          {"project shared", LevelProject}, // project beats user
		"mine":            {"user mine", LevelUser},
		"proj":            {"project only", LevelProject},
		"reviewer":        {"", LevelBuiltin},
		"general-purpose": {"", LevelBuiltin},
		"fixer":           {"", LevelBuiltin},
	} {
		d, ok := c.Lookup(name)
		if !ok {
			t.Fatalf("%s missing", name)
		}
		if d.Source.Level != want.level || want.desc != "" && d.Description != want.desc {
			t.Errorf("%s: %q from %v, want %q from %v", name, d.Description, d.Source.Level, want.desc, want.level)
		}
	}
	if len(c.List()) != 7 {
		t.Errorf("list has %d, want 7", len(c.List()))
	}

	// Volatile beats everything, for the derived catalog only.
	v, err := c.With(&Definition{Name: "shared", Description: "volatile shared", SystemPrompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := v.Lookup("shared"); d.Description != "volatile shared" || d.Source.Level != LevelVolatile || d.MaxTurns != 30 {
		t.Errorf("volatile: %+v", d)
	}
	if d, _ := c.Lookup("shared"); d.Description != "project shared" {
		t.Errorf("With changed the base catalog: %q", d.Description)
	}
	if _, err := c.With(&Definition{Name: "x"}); err == nil || !strings.Contains(err.Error(), "description: missing") {
		t.Errorf("invalid volatile: %v", err)
	}
	if _, err := c.With(&Definition{Name: "x", Description: "a"}, &Definition{Name: "x", Description: "b"}); err == nil ||
		!strings.Contains(err.Error(), "given twice") {
		t.Errorf("duplicate volatile: %v", err)
	}
	if _, err := c.With(&Definition{Name: "x", Description: "a", Mode: "both"}); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Errorf("bad mode volatile: %v", err)
	}
}

func TestCatalogOneBadFileNeverStopsTheOthers(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	dir := filepath.Join(proj, ".claude", "agents")
	writeFile(t, filepath.Join(dir, "a.md"), def("alpha", "first"))
	writeFile(t, filepath.Join(dir, "b.md"), "---\nname: beta\nmode: sideways\n---\n")
	writeFile(t, filepath.Join(dir, "c.md"), def("gamma", "third"))
	c, res := Load(LoadOptions{ProjectDir: proj, NoBuiltins: true})
	if res.Loaded() != 2 || len(res.Files) != 3 {
		t.Fatalf("loaded %d/%d", res.Loaded(), len(res.Files))
	}
	errs, _ := res.Issues()
	bfile := filepath.Join(dir, "b.md")
	if !hasIssue(errs, 1, bfile+":1: description: missing") || !hasIssue(errs, 3, bfile+":3: mode") {
		t.Fatalf("errors %v", errs)
	}
	if _, ok := c.Lookup("beta"); ok {
		t.Error("a broken definition was registered")
	}
	if _, ok := c.Lookup("gamma"); !ok {
		t.Error("the file after a broken one was not loaded")
	}
}

func TestCatalogDuplicateNameWithinALevel(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	first := filepath.Join(proj, ".deputy", "agents", "one.md")
	second := filepath.Join(proj, ".claude", "agents", "two.md")
	writeFile(t, first, def("same", "from deputy dir"))
	writeFile(t, second, "---\ndescription: from claude dir\nname: same\n---\n")
	c, res := Load(LoadOptions{ProjectDir: proj, NoBuiltins: true})
	errs, _ := res.Issues()
	if len(errs) != 1 || errs[0].Error() != second+`:3: duplicate name "same": also defined in `+first+":2" {
		t.Fatalf("errors %v", errs)
	}
	if d, _ := c.Lookup("same"); d.Description != "from deputy dir" {
		t.Fatalf("kept %q", d.Description)
	}
	if res.Loaded() != 1 {
		t.Fatalf("loaded %d", res.Loaded())
	}
}

func TestParsePathsFilesAndDirs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "x", "a.md"), def("a", "one"))
	writeFile(t, filepath.Join(dir, "y", "a.md"), def("a", "two"))
	single := filepath.Join(t.TempDir(), "s.md")
	writeFile(t, single, def("s", "single"))
	res := ParsePaths([]string{dir, single, filepath.Join(dir, "missing")})
	if res.Loaded() != 3 || len(res.Files) != 3 || len(res.Errors) != 1 {
		t.Fatalf("loaded %d/%d, errors %v", res.Loaded(), len(res.Files), res.Errors)
	}
	_, warns := res.Issues()
	if !hasIssue(warns, 2, `name "a" is also defined in `+filepath.Join(dir, "x", "a.md")+":2") {
		t.Fatalf("warnings %v", warns)
	}
}

func TestBuiltins(t *testing.T) {
	t.Parallel()
	byName := map[string]*Definition{}
	for _, d := range Builtins() {
		byName[d.Name] = d
		if !strings.Contains(d.SystemPrompt, OutputContract) {
			t.Errorf("%s lacks the output contract", d.Name)
		}
		for _, p := range d.Check() {
			t.Errorf("%s: %v", d.Name, p)
		}
		for _, tl := range d.Tools {
			if tl == SpawnTool {
				t.Errorf("%s can spawn", d.Name)
			}
		}
	}
	gp, ex, rv, fx := byName["general-purpose"], byName["explorer"], byName["reviewer"], byName["fixer"]
	if gp == nil || ex == nil || rv == nil || fx == nil || len(byName) != 4 {
		t.Fatalf("built-ins: %v", byName)
	}
	if gp.Tools != nil {
		t.Error("general-purpose should take the parent's tools")
	}
	// The read-only types may ask their parent, which changes nothing in
	// the workspace; the fixer, a fork of the parent's plan, may not.
	readOnly := map[string]bool{"read_file": true, "glob": true, "grep": true, "web_fetch": true, "web_search": true, AskTool: true}
	if !gp.Allows(AskTool) || !ex.Allows(AskTool) || !rv.Allows(AskTool) || fx.Allows(AskTool) {
		t.Error("general-purpose, explorer and reviewer ask; fixer does not")
	}
	for _, d := range []*Definition{ex, rv} {
		for _, tl := range d.Tools {
			if !readOnly[tl] {
				t.Errorf("%s has write tool %s", d.Name, tl)
			}
		}
		if d.Mode != ModeIsolated || len(d.Tools) == 0 {
			t.Errorf("%s: %+v", d.Name, d)
		}
	}
	if ex.Model != TierHaiku || ex.ModePinned || !rv.ModePinned {
		t.Errorf("explorer model %q pinned %v, reviewer pinned %v", ex.Model, ex.ModePinned, rv.ModePinned)
	}
	if fx.Mode != ModeFork || !contains(fx.Tools, "edit_file") || !contains(fx.Tools, "write_file") {
		t.Errorf("fixer: %+v", fx)
	}
	// Copies: editing one does not change the next.
	Builtins()[1].Tools[0] = "bash"
	if Builtins()[1].Tools[0] != "read_file" {
		t.Error("Builtins shares its slices")
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestMergeRespectsLevels(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".deputy", "agents", "mine.md"), "---\nname: mine\ndescription: project's\n---\nP")
	c, _ := Load(LoadOptions{ProjectDir: dir})
	db := []*Definition{
		{Name: "explorer", Description: "from the database"},
		{Name: "mine", Description: "from the database"},
		{Name: "fresh", Description: "new in the database"},
		{Name: "bad", Description: "x", Mode: "sideways"},
	}
	m, errs := c.Merge(LevelDatabase, db)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "sideways") {
		t.Errorf("errs %v", errs)
	}
	get := func(n string) string {
		d, ok := m.Lookup(n)
		if !ok {
			return "(none)"
		}
		return d.Description + " @" + d.Source.Level.String()
	}
	for name, want := range map[string]string{
		"explorer": "from the database @database", // above the built-in
		"mine":     "project's @project",          // below the project's file
		"fresh":    "new in the database @database",
		"bad":      "(none)",
	} {
		if got := get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if d, _ := c.Lookup("explorer"); d.Source.Level != LevelBuiltin {
		t.Error("Merge changed the catalog it was called on")
	}
}
