package agentdef

import (
	"errors"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/permission"
)

func TestConfigPermissions(t *testing.T) {
	t.Parallel()
	src := `tiers:
  haiku: anthropic:claude-haiku-4-5
permissions:
  allow:
    - "Bash(go test:*)"
    - "Edit(/src/**)"
    - "Bash(unclosed"
    - 42
  ask: ["Bash(git push:*)"]
  deny:
    - "Read(./.env)"
  defaultMode: acceptEdits
`
	c, err := ParseConfig("deputy.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Permissions
	if p.File != "deputy.yaml" || p.Line != 3 || p.Mode != permission.ModeAcceptEdits {
		t.Fatalf("section %+v", p)
	}
	if len(p.Set.Allow) != 2 || len(p.Set.Ask) != 1 || len(p.Set.Deny) != 1 {
		t.Fatalf("rules %+v", p.Set)
	}
	if p.Set.Allow[1].Source != "deputy.yaml:6" || p.Set.Deny[0].Source != "deputy.yaml:11" {
		t.Errorf("sources %q %q", p.Set.Allow[1].Source, p.Set.Deny[0].Source)
	}
	if len(p.Skipped) != 2 || !strings.HasPrefix(p.Skipped[0].Error(), "deputy.yaml:7: ") ||
		!strings.HasPrefix(p.Skipped[1].Error(), "deputy.yaml:8: ") || !strings.Contains(p.Skipped[1].Error(), "not a string") {
		t.Fatalf("skipped %v", p.Skipped)
	}
	var se *permission.SettingsError
	if !errors.As(p.Skipped[0], &se) || se.Line != 7 {
		t.Fatalf("skipped is not a SettingsError: %v", p.Skipped[0])
	}
	// The rules decide.
	in := permission.Call{Tool: "bash", Input: []byte(`{"command":"git push origin"}`), Cwd: "/w"}
	if d := p.Set.Decide(in); d.Outcome != permission.Ask || d.Rule != "Bash(git push:*)" {
		t.Fatalf("decide %+v", d)
	}
}

// Bad input: each problem at its line, the file refused where the rules
// say so (fail closed on deny).
func TestConfigPermissionsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ src, want string }{
		{"permissions:\n  deny:\n    - \"Bash(rm:*)\"\n    - \"Read(a/**b)\"\n", "deputy.yaml:4: permissions.deny: permission rule \"Read(a/**b)\""},
		{"permissions:\n  deny:\n    - [x]\n", "deputy.yaml:3: permissions.deny: rule"},
		{"permissions:\n  deny: Bash(rm:*)\n", "deputy.yaml:2: permissions.deny: want a list of rules (a deny list"},
		{"permissions:\n  allow: Bash\n", "deputy.yaml:2: permissions.allow: want a list of rules"},
		{"permissions:\n  defaultMode: yolo\n", `deputy.yaml:2: permissions.defaultMode: unknown permission mode "yolo"`},
		{"permissions:\n  defaultMode: [plan]\n", "deputy.yaml:2: permissions.defaultMode: want a mode"},
		{"permissions:\n  allowed: [Bash]\n", `deputy.yaml:2: permissions: unknown field "allowed" (allow, ask, deny, defaultMode)`},
		{"permissions: [Bash]\n", "deputy.yaml:1: permissions: want a mapping (allow, ask, deny, defaultMode)"},
	} {
		_, err := ParseConfig("deputy.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.src, err, c.want)
		}
	}
	// No section: nothing, and the zero Set decides nothing.
	cfg, err := ParseConfig("deputy.yaml", []byte("tiers: {}\n"))
	if err != nil || cfg.Permissions.Line != 0 || cfg.Permissions.Mode != "" {
		t.Fatalf("%+v %v", cfg.Permissions, err)
	}
}
