package agentdef_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/tool/mcptool"
)

// env is a lookup over a fixed environment, so the tests run in parallel
// without touching the process's.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// A stdio server gets the base variables and what its env names, read
// only from the variables deputy.yaml allows; what it reads from those is
// a secret, the base variables are not.
func TestResolveStdio(t *testing.T) {
	t.Parallel()
	s := agentdef.MCPServer{Name: "calc", Type: mcptool.Stdio, Command: "${HOME}/bin/calc",
		Args: []string{"--key", "${CALC_KEY}"}, Env: map[string]string{"TOKEN": "${CALC_KEY}", "MODE": "${CALC_MODE:-fast}"}}
	got, err := s.Resolve(env(map[string]string{"HOME": "/h", "PATH": "/bin", "CALC_KEY": "k-secret-1", "OTHER": "x"}),
		[]string{"CALC_KEY", "CALC_MODE"}) // a reference with a default is read too: listed
	if err != nil {
		t.Fatal(err)
	}
	if got.Command != "/h/bin/calc" || !slices.Equal(got.Args, []string{"--key", "k-secret-1"}) {
		t.Errorf("command line %q %q", got.Command, got.Args)
	}
	for _, kv := range []string{"HOME=/h", "PATH=/bin", "TOKEN=k-secret-1", "MODE=fast"} {
		if !slices.Contains(got.Env, kv) {
			t.Errorf("env %q lacks %s", got.Env, kv)
		}
	}
	if slices.ContainsFunc(got.Env, func(kv string) bool { return strings.HasPrefix(kv, "OTHER=") }) {
		t.Errorf("env %q passes on a variable nobody named", got.Env)
	}
	if !slices.Contains(got.Secrets, "k-secret-1") || slices.Contains(got.Secrets, "/h") {
		t.Errorf("secrets %q: want the allowed variable's value, not the base's", got.Secrets)
	}
}

// A reference to a variable deputy.yaml does not allow is refused, the
// error naming the field and the variable, never a value.
func TestResolveRefusesUnlisted(t *testing.T) {
	t.Parallel()
	s := agentdef.MCPServer{Name: "web", Type: mcptool.HTTP, URL: "https://mcp.example.com",
		Headers: map[string]string{"X-Key": "${OPENAI_API_KEY}"}}
	_, err := s.Resolve(env(map[string]string{"OPENAI_API_KEY": "sk-very-secret"}), nil)
	if err == nil || !strings.Contains(err.Error(), `headers X-Key: ${OPENAI_API_KEY} may not be read`) ||
		strings.Contains(err.Error(), "sk-very-secret") {
		t.Fatalf("err = %v", err)
	}
	s.Headers = map[string]string{"X-Key": "${MISSING}"}
	if _, err := s.Resolve(env(nil), []string{"MISSING"}); err == nil || !strings.Contains(err.Error(), "MISSING") {
		t.Fatalf("unset variable: err = %v", err)
	}
}

func TestIsolationLooser(t *testing.T) {
	t.Parallel()
	order := []agentdef.Isolation{agentdef.IsolationNone, agentdef.IsolationSandbox, agentdef.IsolationContainer}
	for i, a := range order {
		for j, b := range order {
			if got := a.Looser(b); got != (i < j) {
				t.Errorf("%s.Looser(%s) = %v", a, b, got)
			}
		}
	}
	if agentdef.Isolation("").Looser(agentdef.IsolationNone) {
		t.Error("unset is none, not looser than it")
	}
}

// A skill loads as its instructions and file list; its files are read
// within its directory only, a large one cut with a marker.
func TestSkillLoadAndReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat("x", 300<<10)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &agentdef.Skill{Name: "pdf", Instructions: "  Use it.  ", Dir: dir, Files: []string{"big.txt", "notes.md"}}
	if got, want := s.Load(), "# Skill pdf\n\nUse it.\n\nFiles of this skill (read one with the file argument):\n- big.txt\n- notes.md\n"; got != want {
		t.Errorf("Load() = %q, want %q", got, want)
	}
	if got, err := s.ReadFile("notes.md"); err != nil || got != "short" {
		t.Errorf("ReadFile(notes.md) = %q, %v", got, err)
	}
	big, err := s.ReadFile("big.txt")
	if err != nil || len(big) > 256<<10 || !strings.Contains(big, "cut") {
		t.Errorf("ReadFile(big.txt): %d bytes, %v; want it cut to 256 KiB with a marker", len(big), err)
	}
	if _, err := s.ReadFile("../" + filepath.Base(dir) + "/notes.md"); err == nil {
		t.Error("a path out of the skill's directory was read")
	}
}

// What a child is told: its report's bound, its skills, and for a fork
// its type and task after the definition's prompt.
func TestChildPrompts(t *testing.T) {
	t.Parallel()
	d := &agentdef.Definition{Name: "explorer", SystemPrompt: " Explore. ", ReportCap: 1200}
	skills := []*agentdef.Skill{{Name: "pdf", Description: "Reads PDFs.", Instructions: "Use pdftotext."}}
	sys := d.SubagentSystem(skills)
	for _, want := range []string{"Explore.\n\nYou are a subagent", "within 1200 characters", "- pdf: Reads PDFs."} {
		if !strings.Contains(sys, want) {
			t.Errorf("SubagentSystem lacks %q:\n%s", want, sys)
		}
	}
	fork := d.ForkTask(skills, "find the bug")
	for _, want := range []string{"subagent of type explorer", "Explore.\n\n", "## Skill pdf\nUse pdftotext.",
		"within 1200 characters.\n\nYour task:\nfind the bug"} {
		if !strings.Contains(fork, want) {
			t.Errorf("ForkTask lacks %q:\n%s", want, fork)
		}
	}
}
