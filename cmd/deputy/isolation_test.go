package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/fence"
	"github.com/deputy-run/deputy/tool/shell/tether"
)

// git runs git in dir with a fixed identity, failing the test on error.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c",
		"commit.gpgsign=false"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

const worktreeScenario = `
rules:
  - match: {system: "You edit in your own worktree", last_user: "break it", turn: 1}
    tool_calls: [{name: write_file, input: {path: "broken.txt", content: "broken\n"}}]
  - match: {system: "You edit in your own worktree", tool_result: "broken.txt"}
    fault: {kind: server_error}
  - match: {system: "You edit in your own worktree", turn: 1}
    tool_calls: [{name: write_file, input: {path: "notes.txt", content: "edited\n"}}]
  - match: {system: "You edit in your own worktree"}
    text: "wrote notes.txt"
  - match: {turn: 1, last_user: "break"}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: editor, task: "break it"}}]
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: editor, task: "edit notes"}}]
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

const editorDef = `---
name: editor
description: Edits files in its own git worktree.
tools: read_file, write_file
worktree: true
---
You edit in your own worktree.
`

// A worktree child works on its own branch: the parent's tree sees nothing
// until deputy merge; a failed child leaves nothing behind, not even its
// branch; a workspace that is not a repository is refused, saying why.
func TestWorktreeChildThroughTheCLI(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(ws, ".deputy", "agents"), 0o755))
	must(os.WriteFile(filepath.Join(ws, ".deputy", "agents", "editor.md"), []byte(editorDef), 0o644))
	must(os.WriteFile(filepath.Join(ws, "s.yaml"), []byte(worktreeScenario), 0o644))
	must(os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("original\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, ".gitignore"), []byte(".deputy/deputy.db*\n"), 0o644))

	// Not a repository yet.
	out, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "--scenario", "s.yaml", "-q", "edit")
	if code != 0 || !strings.Contains(out, "is not a git repository: worktree isolation needs one") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}

	git(t, ws, "init", "-q", "-b", "main")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "start")

	out, errOut, code = deputy(t, ws, nil, "run", "--model", "fake", "--scenario", "s.yaml", "-q", "--json", "edit")
	var res struct {
		Answer    string
		Instances []struct{ ID, Type, State string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Instances) != 2 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	child := res.Instances[1].ID
	if !strings.Contains(res.Answer, "branch deputy/"+child+": 1 file, +1 -1") {
		t.Fatalf("the relay does not name the branch:\n%s", res.Answer)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "original\n" {
		t.Fatalf("the child's edit reached the parent's tree before the merge: %q", b)
	}
	if list := git(t, ws, "worktree", "list"); strings.Count(list, "\n") != 1 {
		t.Errorf("the worktree was not removed:\n%s", list)
	}
	out, errOut, code = deputy(t, ws, nil, "merge", child)
	if code != 0 || !strings.Contains(out, "merged deputy/"+child) {
		t.Fatalf("merge: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "edited\n" {
		t.Fatalf("after the merge notes.txt is %q", b)
	}

	head := git(t, ws, "rev-parse", "HEAD")
	out, errOut, code = deputy(t, ws, nil, "run", "--model", "fake", "--scenario", "s.yaml", "-q", "--json", "break")
	if json.Unmarshal([]byte(out), &res) != nil || len(res.Instances) != 2 || res.Instances[1].State != "failed" {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "edited\n" || git(t, ws, "rev-parse", "HEAD") != head {
		t.Fatalf("a failed child changed the parent's tree: %q", b)
	}
	if branches := git(t, ws, "branch", "--list", "deputy/*"); strings.Contains(branches, res.Instances[1].ID) {
		t.Errorf("a failed child's branch stayed:\n%s", branches)
	}
	if st := git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("the parent's tree is not clean:\n%s", st)
	}
}

// A run killed with SIGKILL while a worktree child works leaves the
// worktree with the child's uncommitted edit; the worker resumes the child
// in that same worktree (not a second one), it completes, its work lands
// on its branch, and the worktree is gone. The parent's tree never sees
// the edit before a merge.
func TestWorktreeChildResumesAfterSIGKILL(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for name, body := range map[string]string{".deputy/agents/editor.md": editorDef, "s.yaml": worktreeScenario,
		"notes.txt": "original\n", ".gitignore": ".deputy/deputy.db*\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, ws, "init", "-q", "-b", "main")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "start")

	_, errOut, code := deputy(t, ws, []string{"DEPUTY_FAILPOINT=before:child:turn-2/generate"},
		"run", "--model", "fake", "--scenario", "s.yaml", "-q", "edit")
	if code != -1 { // killed by its own failpoint
		t.Fatalf("the run was not killed: exit %d\n%s", code, errOut)
	}
	list := git(t, ws, "worktree", "list")
	if strings.Count(list, "\n") != 2 {
		t.Fatalf("no worktree left by the dead run:\n%s", list)
	}
	if _, errOut, code := deputy(t, ws, nil, "worker", "--until-idle", "-q", "--scenario", "s.yaml"); code != 0 {
		t.Fatalf("worker: %d %s", code, errOut)
	}
	if list := git(t, ws, "worktree", "list"); strings.Count(list, "\n") != 1 {
		t.Errorf("the child's worktree is still there:\n%s", list)
	}
	br := strings.TrimSpace(git(t, ws, "branch", "--list", "deputy/*"))
	if !strings.HasPrefix(br, "deputy/i-") || strings.Contains(br, "\n") {
		t.Fatalf("branches: %q", br)
	}
	if got := git(t, ws, "show", br+":notes.txt"); got != "edited\n" {
		t.Errorf("the branch holds %q", got)
	}
	if n := strings.Count(git(t, ws, "log", "--oneline", "main.."+br), "\n"); n != 1 {
		t.Errorf("%d commits on the branch, want the child's one", n)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "original\n" {
		t.Errorf("notes.txt is %q", b)
	}
}

// deputy doctor says how unfenced tools' programs are tethered to deputy:
// the mode a tethered start finds on this machine, in the text (with what
// it means) and in the JSON.
func TestDoctorReportsTether(t *testing.T) {
	t.Parallel()
	cmd, release, err := tether.Start(func() *exec.Cmd { return exec.Command("true") },
		func(c *exec.Cmd) error { return c.Start() })
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	release()
	want := tether.Mode() // what works here, as this process found it
	ws := t.TempDir()
	out, errOut, code := deputy(t, ws, nil, "doctor")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "unfenced tools are tethered by: "+want) || !strings.Contains(out, " tether ") {
		t.Errorf("doctor does not say %q:\n%s", want, out)
	}
	if want == tether.ModePIDNamespace && !strings.Contains(out, "die with deputy, even SIGKILLed") {
		t.Errorf("doctor does not say what the mode means:\n%s", out)
	}
	out, errOut, code = deputy(t, ws, nil, "doctor", "--json")
	var rep struct {
		Tether string `json:"tether"`
		Items  []struct {
			Name string `json:"Name"`
			OK   bool   `json:"OK"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("doctor --json: %v %d %s", err, code, errOut)
	}
	if rep.Tether != want {
		t.Errorf("json tether %q, want %q", rep.Tether, want)
	}
	found := false
	for _, it := range rep.Items {
		if it.Name == "tether" {
			found = true
			if it.OK != (want == tether.ModePIDNamespace || want == tether.ModeUserPIDNamespace) {
				t.Errorf("tether item OK=%v for %q", it.OK, want)
			}
		}
	}
	if !found {
		t.Errorf("no tether item: %s", out)
	}
}

// A fired tripwire's marker refuses every run; doctor names it and the fix.
func TestDoctorReportsUntrustedWorkspace(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	out, errOut, code := deputy(t, ws, nil, "doctor")
	if code != 0 || !strings.Contains(out, "no fence tripwire has fired here") {
		t.Fatalf("exit %d, clean workspace not reported trusted:\n%s%s", code, out, errOut)
	}
	marker := filepath.Join(ws, fence.UntrustedFile)
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, []byte(".claude/agents/general-purpose.md\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = deputy(t, ws, nil, "doctor")
	if code != 0 || !strings.Contains(out, ".claude/agents/general-purpose.md") || !strings.Contains(out, "then remove "+marker) {
		t.Errorf("exit %d, doctor does not name the marker's path and the fix:\n%s%s", code, out, errOut)
	}
}
