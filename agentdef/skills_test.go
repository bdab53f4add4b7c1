package agentdef

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadSkills(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	roots := ProjectSkillDirs(proj)
	writeFile(t, filepath.Join(roots[0], "pdf", "SKILL.md"), "---\nname: pdf\ndescription: Read PDFs\n---\nUse pdftotext.\n")
	writeFile(t, filepath.Join(roots[0], "pdf", "scripts", "extract.py"), "print(1)\n")
	writeFile(t, filepath.Join(roots[0], "pdf", "REFERENCE.md"), "ref\n")
	// Shadowed by the .deputy skill of the same name.
	writeFile(t, filepath.Join(roots[1], "pdf", "SKILL.md"), "---\nname: pdf\ndescription: other\n---\n")
	// Name from the directory when the front matter has none.
	writeFile(t, filepath.Join(roots[1], "review", "SKILL.md"), "---\ndescription: Review code\n---\nSteps.\n")
	writeFile(t, filepath.Join(roots[1], "broken", "SKILL.md"), "---\nname: broken\n---\n")
	writeFile(t, filepath.Join(roots[1], "notaskill", "README.md"), "x")

	skills, errs, _ := LoadSkills(roots...)
	if len(skills) != 2 {
		t.Fatalf("skills %v", skills)
	}
	pdf := skills["pdf"]
	if pdf.Description != "Read PDFs" || pdf.Instructions != "Use pdftotext." ||
		!slices.Equal(pdf.Files, []string{"REFERENCE.md", "scripts/extract.py"}) {
		t.Errorf("pdf: %+v", pdf)
	}
	if r := skills["review"]; r == nil || r.Name != "review" || r.Instructions != "Steps." {
		t.Errorf("review: %+v", r)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), filepath.Join("broken", "SKILL.md")+":1: description: missing") {
		t.Errorf("errors %v", errs)
	}
	granted, missing := GrantedSkills(skills, []string{"review", "nope"})
	if len(granted) != 1 || granted[0].Name != "review" || !slices.Equal(missing, []string{"nope"}) {
		t.Errorf("granted %v missing %v", granted, missing)
	}
	if g, _ := GrantedSkills(skills, nil); len(g) != 0 {
		t.Error("skills granted without being named")
	}
}
