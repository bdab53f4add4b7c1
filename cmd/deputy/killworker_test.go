package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killScenario's root runs one bash call that leaves a job in a session of
// its own and one in the background, and appends to files two seconds
// later; after the call it answers with the call's result.
const killScenario = `name: killworker
rules:
  - match: {turn: 1, tools: [bash]}
    tool_calls:
      - name: bash
        input:
          command: "(setsid bash -c 'sleep 2; echo setsid >> late.txt' &); (sleep 2; echo background >> late.txt) & touch started; sleep 2; echo foreground >> late.txt"
  - match: {turn: 2}
    text: "after the call: {{index .ToolResults 0}}"
`

// inDir lists the live processes whose working directory is dir: the
// command's, which all run in the workspace.
func inDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err != nil || cwd != dir {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			live = append(live, strings.TrimSpace(string(stat)))
		}
	}
	return live
}

// Issue 16, item 7, as it was found: a worker is SIGKILLed while the bash
// call it started is running; the call's processes, those that left its
// process group included, die with it, so the side effect it was about to
// have never happens, and the worker that resumes the run (which tells
// the model the call was interrupted) is telling the truth.
func TestKilledWorkersBashDiesWithIt(t *testing.T) {
	t.Parallel()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "s.yaml"), []byte(killScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	// The run is stored and dies before its first turn, for a worker to
	// take up.
	if _, errOut, code := deputy(t, ws, []string{"DEPUTY_FAILPOINT=before:turn-1/generate"},
		"run", "--model", "fake", "--scenario", "s.yaml", "-q", "run the command"); code != -1 {
		t.Fatalf("the run was not killed by its failpoint: exit %d\n%s", code, errOut)
	}

	w := exec.Command(bin, "worker", "-q", "--scenario", "s.yaml")
	w.Dir = ws
	w.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEPUTY_FAKE_LATENCY=off"}
	var errBuf strings.Builder
	w.Stderr = &errBuf
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(ws, "started")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = w.Process.Kill()
			_ = w.Wait()
			t.Fatalf("the worker never ran the bash call:\n%s", errBuf.String())
		}
	}
	if live := inDir(t, ws); len(live) < 4 {
		t.Logf("the command's processes before the kill: %v", live)
	}
	_ = w.Process.Signal(syscall.SIGKILL)
	_ = w.Wait()
	for deadline := time.Now().Add(5 * time.Second); len(inDir(t, ws)) > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if live := inDir(t, ws); len(live) > 0 {
		t.Errorf("the killed worker's command outlived it: %v", live)
	}
	// No process of the command is left to write (each has the
	// workspace as its directory, and the poll above saw none): what the
	// file can show is a write made before the kill.
	late := filepath.Join(ws, "late.txt")
	if b, err := os.ReadFile(late); err == nil {
		t.Fatalf("the command wrote after its worker was killed: %q", b)
	}

	// The resumed run reports the call as interrupted, and nothing runs it
	// behind the model's back.
	if _, errOut, code := deputy(t, ws, nil, "worker", "--until-idle", "-q", "--scenario", "s.yaml"); code != 0 {
		t.Fatalf("worker: %d %s", code, errOut)
	}
	if b, err := os.ReadFile(late); err == nil {
		t.Errorf("the command wrote after its run was resumed: %q", b)
	}
}
