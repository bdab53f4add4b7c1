package deputy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/permission"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadPermissionsMergesEveryFile(t *testing.T) {
	t.Parallel()
	proj, home := t.TempDir(), t.TempDir()
	shared := filepath.Join(proj, ".claude", "settings.json")
	local := filepath.Join(proj, ".claude", "settings.local.json")
	user := filepath.Join(home, ".claude", "settings.json")
	writeFile(t, shared, `{
  "permissions": {
    "allow": ["Bash(git:*)", "Edit(/src/**)"],
    "deny": ["Read(./.env)"],
    "defaultMode": "plan"
  }
}`)
	writeFile(t, local, `{"permissions": {"allow": ["Bash(npm test:*)", "Bash(oops"], "defaultMode": "acceptEdits"}}`)
	writeFile(t, user, `{"permissions": {"deny": ["Bash(git push --force:*)"], "ask": ["WebFetch"]}}`)
	ypath := filepath.Join(proj, "deputy.yaml")
	writeFile(t, ypath, "permissions:\n  ask:\n    - \"Bash(git push:*)\"\n  allow: [\"Nope(x)\"]\n")
	cfg, err := deputy.LoadConfig(ypath)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := deputy.LoadPermissions(proj, home, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []deputy.PermissionFile{
		{Path: ypath, Ask: 1},
		{Path: local, Allow: 1, Mode: permission.ModeAcceptEdits},
		{Path: shared, Allow: 2, Deny: 1, Mode: permission.ModePlan},
		{Path: user, Ask: 1, Deny: 1},
	}
	if len(ps.Files) != len(want) {
		t.Fatalf("files %+v", ps.Files)
	}
	for i := range want {
		if ps.Files[i] != want[i] {
			t.Errorf("file %d: %+v, want %+v", i, ps.Files[i], want[i])
		}
	}
	// deputy.yaml sets no mode: the highest settings file that does wins.
	if ps.Policy.Mode != permission.ModeAcceptEdits {
		t.Errorf("mode %s", ps.Policy.Mode)
	}
	if len(ps.Skipped) != 2 || !strings.HasPrefix(ps.Skipped[0].Error(), ypath+":4: ") ||
		!strings.HasPrefix(ps.Skipped[1].Error(), local+":1:") {
		t.Errorf("skipped %v", ps.Skipped)
	}
	c := func(command string) permission.Call {
		return permission.Call{Tool: "bash", Input: []byte(`{"command":` + quote(command) + `}`), Cwd: proj, ProjectDir: proj, Home: home}
	}
	for _, tc := range []struct {
		command string
		want    permission.Outcome
		rule    string
	}{
		{"git status", permission.Allow, "Bash(git:*)"},                   // the shared file's allow
		{"git push origin main", permission.Ask, "Bash(git push:*)"},      // deputy.yaml's ask over the allow
		{"git push --force", permission.Deny, "Bash(git push --force:*)"}, // the user's deny over both
		{"npm test", permission.Allow, "Bash(npm test:*)"},
		{"make", permission.Ask, ""}, // no rule: acceptEdits asks for bash
	} {
		d := ps.Policy.Decide(c(tc.command))
		if d.Outcome != tc.want || d.Rule != tc.rule {
			t.Errorf("%s: %v %q, want %v %q", tc.command, d.Outcome, d.Rule, tc.want, tc.rule)
		}
	}

	// deputy.yaml's defaultMode goes over every settings file's.
	writeFile(t, ypath, "permissions:\n  defaultMode: dontAsk\n")
	if cfg, err = deputy.LoadConfig(ypath); err != nil {
		t.Fatal(err)
	}
	if ps, err = deputy.LoadPermissions(proj, home, cfg); err != nil || ps.Policy.Mode != permission.ModeDontAsk {
		t.Fatalf("mode %s, %v", ps.Policy.Mode, err)
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// Nothing anywhere: default mode, no rules, no files. A bad deny rule in
// any settings file refuses the load with its file:line.
func TestLoadPermissionsNoneAndFailClosed(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	ps, err := deputy.LoadPermissions(proj, "", nil)
	if err != nil || ps.Policy.Mode != permission.ModeDefault || len(ps.Files) != 0 || len(ps.Policy.Set.Allow) != 0 {
		t.Fatalf("%+v %v", ps, err)
	}
	bad := filepath.Join(proj, ".claude", "settings.json")
	writeFile(t, bad, "{\"permissions\": {\n  \"deny\": [\"Bash(rm:*)\", \"Read(a/**b)\"]\n}}")
	_, err = deputy.LoadPermissions(proj, "", &deputy.Config{})
	if err == nil || !strings.Contains(err.Error(), bad+":2:") || !strings.Contains(err.Error(), "fails the load") {
		t.Fatalf("bad deny: %v", err)
	}
	writeFile(t, bad, `{"permissions": {"allow": ["Bash"],}}`)
	if _, err = deputy.LoadPermissions(proj, "", nil); err == nil || !strings.Contains(err.Error(), bad+":1:") {
		t.Fatalf("malformed JSON: %v", err)
	}
}
