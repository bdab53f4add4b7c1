package agentdef

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseDefinition: any bytes give either a definition that passes
// Check or errors, every issue with file:line, never a panic.
func FuzzParseDefinition(f *testing.F) {
	for _, p := range []string{
		"voltagent/categories/08-business-product/backlog-grooming.md", // not strict YAML
		"wshobson/plugins/agent-teams/agents/team-lead.md",             // team tools, model fable
	} {
		b, err := os.ReadFile(filepath.Join(corpusDir, p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("---\nname: a\ndescription: b\ntools:\n  - Read\nbudget:\n  wallTime: 1m\n---\nx"))
	f.Add([]byte("---\na: &x [1]\nb: *x\n---\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---\nname: a\ndescription: d\ntools: [read_file, glob\n  x: y\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := ParseDefinition("f.md", data)
		if p.Def == nil {
			if len(p.Errors) == 0 {
				t.Fatal("no definition and no error")
			}
		} else {
			if len(p.Errors) != 0 {
				t.Fatalf("definition with errors %v", p.Errors)
			}
			for _, pr := range p.Def.Check() {
				if !pr.Warning {
					t.Fatalf("loaded definition fails Check: %v", pr)
				}
			}
		}
		for _, i := range append(p.Errors, p.Warnings...) {
			if !strings.HasPrefix(i.Error(), "f.md:") || i.Line < 1 {
				t.Fatalf("issue without file:line: %v", i)
			}
		}
		ParseSkill("s/SKILL.md", data)
		ParseConfig("deputy.yaml", data)
	})
}
