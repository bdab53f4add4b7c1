package agentdef

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// corpusDir is a copy of ../shared/corpus/claude-agents kept in the repo,
// so CI on a clean clone tests the same files (MIT, licenses beside them).
var corpusDir = filepath.Join("testdata", "corpus", "claude-agents")

func TestCorpusEveryFileLoads(t *testing.T) {
	t.Parallel()
	res := ParsePaths([]string{corpusDir})
	if len(res.Files) != 360 || res.Loaded() != 360 {
		errs, _ := res.Issues()
		t.Fatalf("loaded %d/%d, want 360/360; errors: %v", res.Loaded(), len(res.Files), errs)
	}
}

// The numbers below are the ones the corpus README states; the test
// computes them from what the loader parsed.
func TestCorpusCountsMatchTheREADME(t *testing.T) {
	t.Parallel()
	res := ParsePaths([]string{corpusDir})
	models := map[string]int{}
	color, toolsAbsent, toolsEmpty, toolsList := 0, 0, 0, 0
	names := map[string]int{}
	for _, f := range res.Files {
		d := f.Def
		if d == nil {
			t.Fatalf("%s did not load: %v", f.File, f.Errors)
		}
		m := d.Model
		if m == "" {
			m = "(absent)"
		}
		models[m]++
		if _, ok := d.Extra["color"]; ok {
			color++
		}
		switch {
		case d.DeclaredTools == nil:
			toolsAbsent++
			if d.Tools != nil {
				t.Errorf("%s: no tools declared but allowlist %v", f.File, d.Tools)
			}
		case len(d.DeclaredTools) == 0:
			toolsEmpty++
			if d.Tools == nil || len(d.Tools) != 0 {
				t.Errorf("%s: tools [] must mean no tools, got %#v", f.File, d.Tools)
			}
		default:
			toolsList++
		}
		seen := map[string]bool{}
		for _, n := range d.DeclaredTools {
			if !seen[n] {
				seen[n] = true
				names[n]++
			}
		}
	}
	wantModels := map[string]int{"sonnet": 176, "inherit": 77, "opus": 54, "haiku": 43, "fable": 2, "(absent)": 8}
	if len(models) != len(wantModels) {
		t.Errorf("models %v, want %v", models, wantModels)
	}
	for k, v := range wantModels {
		if models[k] != v {
			t.Errorf("model %s: %d files, want %d", k, models[k], v)
		}
	}
	if color != 9 {
		t.Errorf("color in %d files, want 9", color)
	}
	if toolsAbsent != 187 || toolsEmpty != 1 || toolsList != 172 {
		t.Errorf("tools absent/[]/list = %d/%d/%d, want 187/1/172", toolsAbsent, toolsEmpty, toolsList)
	}
	wantNames := map[string]int{"Read": 170, "Glob": 162, "Grep": 161, "Edit": 141, "Write": 140, "Bash": 127, "WebFetch": 39, "WebSearch": 37}
	for k, v := range wantNames {
		if names[k] != v {
			t.Errorf("tool %s in %d files, want %d", k, names[k], v)
		}
	}
	// "the names listed most are" these eight: nothing else is as common.
	for k, v := range names {
		if _, top := wantNames[k]; !top && v >= 37 {
			t.Errorf("tool %s in %d files would be among the most listed", k, v)
		}
	}
}

func TestCorpusNonStrictYAMLLoadsWithAWarning(t *testing.T) {
	t.Parallel()
	res := ParsePaths([]string{corpusDir})
	var lenient []string
	for _, f := range res.Files {
		for _, w := range f.Warnings {
			if strings.Contains(w.Msg, "read as Claude Code reads it") {
				// All eight are one-line descriptions with ": " in them.
				if f.Def == nil || w.Line != 3 || w.File != f.File || !strings.HasPrefix(w.Msg, "description: ") {
					t.Errorf("%s: warning %v, def %v", f.File, w, f.Def != nil)
				}
				lenient = append(lenient, filepath.Base(f.File))
			}
		}
	}
	slices.Sort(lenient)
	want := []string{"ab-test-analysis.md", "assumption-mapping.md", "backlog-grooming.md", "cohort-analysis.md",
		"first-principles-thinking.md", "gdpr-ccpa-compliance.md", "growth-loops.md", "hipaa-compliance.md"}
	if !slices.Equal(lenient, want) {
		t.Fatalf("files read as Claude Code reads them %v, want %v", lenient, want)
	}
	// The lenient read keeps the whole description, colons included.
	for _, f := range res.Files {
		if filepath.Base(f.File) == "backlog-grooming.md" {
			if !strings.Contains(f.Def.Description, "Triggers on: 'groom backlog'") {
				t.Fatalf("description cut: %q", f.Def.Description)
			}
		}
	}
}

func TestCorpusToolNamesMapOrWarn(t *testing.T) {
	t.Parallel()
	res := ParsePaths([]string{corpusDir})
	for _, f := range res.Files {
		for _, n := range f.Def.DeclaredTools {
			m, ok, pattern := MapToolName(n)
			if pattern {
				t.Errorf("%s: corpus has no argument patterns, got %s", f.File, n)
			}
			switch {
			case ok && IsMCPTool(n):
				if !slices.Contains(f.Def.Tools, n) || !slices.Contains(f.Def.UnresolvedTools(), n) {
					t.Errorf("%s: MCP tool %s not kept as unresolved: %v", f.File, n, f.Def.Tools)
				}
			case ok:
				if !slices.Contains(f.Def.Tools, m) {
					t.Errorf("%s: %s should map to %s in %v", f.File, n, m, f.Def.Tools)
				}
			default:
				found := false
				for _, w := range f.Warnings {
					if w.File == f.File && w.Line > 0 && strings.Contains(w.Msg, `"`+n+`"`) {
						found = true
					}
				}
				if !found {
					t.Errorf("%s: no warning naming unservable tool %q", f.File, n)
				}
			}
		}
	}
}
