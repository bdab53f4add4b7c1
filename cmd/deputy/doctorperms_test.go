package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// deputy doctor lists the settings files in force with their rule counts,
// the hooks per event with file:line, and what it could not read.
func TestDoctorReportsPermissionsAndHooks(t *testing.T) {
	t.Parallel()
	ws, home := t.TempDir(), t.TempDir()
	shared := filepath.Join(ws, ".claude", "settings.json")
	local := filepath.Join(ws, ".claude", "settings.local.json")
	user := filepath.Join(home, ".claude", "settings.json")
	writeFile(t, shared, `{
  "permissions": {
    "allow": ["Bash(git:*)", "Edit(/src/**)", "Bash(oops"],
    "deny": ["Read(./.env)"]
  },
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "./hooks/no-rm.sh", "timeout": 5}]}
    ],
    "Stop": [{"hooks": [{"type": "http", "url": "http://hook:s3cret@127.0.0.1:9/stop"}, {"type": "bogus"}]}]
  }
}
`)
	writeFile(t, local, `{"permissions": {"ask": ["Bash(git push:*)"], "defaultMode": "plan"}}`)
	writeFile(t, user, `{"permissions": {"deny": ["WebFetch(domain:example.com)"]}}`)
	writeFile(t, filepath.Join(ws, "deputy.yaml"), "permissions:\n  allow: [\"Bash(go test:*)\"]\n")
	env := []string{"HOME=" + home}

	out, errOut, code := deputy(t, ws, env, "doctor")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"permissions: mode plan (from " + local + ")",
		filepath.Join(ws, "deputy.yaml") + ": 1 allow, 0 ask, 0 deny",
		local + ": 0 allow, 1 ask, 0 deny",
		shared + ": 2 allow, 0 ask, 1 deny",
		user + ": 0 allow, 0 ask, 1 deny",
		"skipped (could not be read, the rest loaded): " + shared + `:3: permission rule "Bash(oops"`,
		"PreToolUse Bash: command ./hooks/no-rm.sh (timeout 5s) at " + shared + ":8",
		"Stop *: http http://hook:xxxxx@127.0.0.1:9/stop (timeout 60s) at " + shared + ":10",
		"hook skipped: " + shared + ":10: hooks.Stop[0].hooks[1].type",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("doctor prints an http hook's password:\n%s", out)
	}

	out, errOut, code = deputy(t, ws, env, "doctor", "--json")
	var rep struct {
		Permissions permsReport `json:"permissions"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("doctor --json: %v %d %s", err, code, errOut)
	}
	p := rep.Permissions
	if p.Mode != "plan" || p.ModeFrom != local || len(p.Files) != 4 || p.Files[2] != (permsFileJSON{Path: shared, Allow: 2, Deny: 1}) {
		t.Errorf("permissions %+v", p)
	}
	if len(p.Skipped) != 1 || p.Skipped[0].File != shared || p.Skipped[0].Line != 3 {
		t.Errorf("skipped %+v", p.Skipped)
	}
	if len(p.Hooks) != 2 || p.Hooks[0] != (hookJSON{Event: "PreToolUse", Matcher: "Bash", Type: "command", Command: "./hooks/no-rm.sh", TimeoutS: 5, Source: shared + ":8"}) {
		t.Errorf("hooks %+v", p.Hooks)
	}
	if len(p.HooksSkipped) != 1 || p.HooksSkipped[0].Line != 10 {
		t.Errorf("hooks skipped %+v", p.HooksSkipped)
	}

	// A deny rule that cannot be read: doctor says runs will not start,
	// with its file:line.
	writeFile(t, local, "{\"permissions\": {\n\"deny\": [\"Read(a/**b)\"]}}")
	out, errOut, code = deputy(t, ws, env, "doctor")
	if code != 0 || !strings.Contains(out, "permissions: not loaded, and no run starts here until this is fixed:") ||
		!strings.Contains(out, local+":2:") {
		t.Errorf("exit %d, bad deny rule not reported:\n%s%s", code, out, errOut)
	}
}
