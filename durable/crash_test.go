//go:build unix

package durable_test

// The crash test: `deputy run` with a parent and two children is killed
// with SIGKILL at every step boundary in turn (the DEPUTY_FAILPOINT
// failpoint: before a step, after its work but before its checkpoint, and
// after the checkpoint) and at random moments, and `deputy worker` resumes it each
// time. Every instance must end in a terminal state, the transcript must
// have no missing and no duplicated turns, and the shell command that
// appends to a file (a side effect the store cannot undo) must never run
// twice. It runs on SQLite and on Postgres.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
)

const crashScenario = `
latency: {first_byte: 30ms}
rules:
  - match: {system: "read-only explorer", turn: 1}
    tool_calls: [{name: glob, input: {pattern: "*"}}]
  - match: {system: "read-only explorer"}
    text: "Conclusion: {{lines (index .ToolResults 0)}} entries."
  - match: {turn: 1}
    tool_calls:
      - {name: bash, input: {command: "echo call-1 >> count.txt"}}
      - {name: read_file, input: {path: seed.txt}}
  - match: {turn: 2}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "look one"}}
      - {name: spawn_subagent, input: {subagent_type: explorer, task: "look two"}}
  - match: {turn: 3}
    tool_calls:
      - {name: bash, input: {command: "echo call-3 >> count.txt"}}
      - {name: write_file, input: {path: out.txt, content: "done"}}
  - match: {turn: 4}
    text: "finished"
`

// boundaries are the root run's steps, in order (see steps.go), then its
// children's.
var boundaries = []string{
	"load", "start",
	"turn-1/generate", "turn-1/call-1-bash/start", "turn-1/call-1-bash", "turn-1/call-2-read_file",
	"turn-2/generate", "turn-2/call-1-spawn_subagent", "turn-2/call-2-spawn_subagent", // resumable: no start markers
	"turn-3/inbox", "turn-3/generate", "turn-3/call-1-bash/start", "turn-3/call-1-bash",
	"turn-3/call-2-write_file/start", "turn-3/call-2-write_file",
	"turn-4/generate", "turn-5/hold", "finish", // hold: before a turn 5 that never comes
	// A child's own steps, in its own workflow (the first child to reach
	// the step dies there).
	"child:load", "child:start", "child:turn-1/generate", "child:turn-1/call-1-glob", "child:turn-2/generate",
	"child:turn-3/hold", "child:end",
}

func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	bin := buildDeputy(t)
	s, err := fake.ParseScenario([]byte(crashScenario), "crash.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake.NewServer(fake.Options{Responder: s}))
	t.Cleanup(hs.Close)

	seed := uint64(time.Now().UnixNano())
	t.Logf("random kill times from seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	for _, db := range []string{"sqlite", "postgres"} {
		// Drawn here, in order, so the parallel subtests share no generator.
		kills := make([]time.Duration, 20)
		for i := range kills {
			kills[i] = time.Duration(rng.IntN(900)) * time.Millisecond
		}
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			for _, b := range boundaries {
				for _, when := range []string{"before:", "during:", "after:"} {
					fp := when + b
					t.Run(fp, func(t *testing.T) {
						t.Parallel()
						c := newCrashCase(t, bin, hs.URL, db)
						if !c.run(map[string]string{"DEPUTY_FAILPOINT": fp}, 0) {
							t.Fatalf("deputy run never reached its failpoint")
						}
						c.resumeAndCheck(true)
					})
				}
			}
			for i, after := range kills {
				t.Run(fmt.Sprintf("random-%02d-%v", i, after), func(t *testing.T) {
					t.Parallel()
					c := newCrashCase(t, bin, hs.URL, db)
					c.run(nil, after)
					c.resumeAndCheck(false)
				})
			}
		})
	}
}

type crashCase struct {
	t       *testing.T
	bin, ws string
	env     []string
}

func newCrashCase(t *testing.T, bin, llmURL, db string) *crashCase {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "seed.txt"), []byte("seed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dbURL := filepath.Join(t.TempDir(), "deputy.db")
	if db == "postgres" {
		dbURL = pgtest.URL(t)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEPUTY_DB=" + dbURL,
		"ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL=" + llmURL}
	return &crashCase{t: t, bin: bin, ws: ws, env: env}
}

func (c *crashCase) cmd(extra map[string]string, args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = c.ws
	cmd.Env = append([]string(nil), c.env...)
	for k, v := range extra {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// run starts `deputy run`; it dies at its failpoint, or is killed after
// killAfter (when not zero), or ends by itself. It reports whether the
// process was killed.
func (c *crashCase) run(extra map[string]string, killAfter time.Duration) bool {
	cmd := c.cmd(extra, "run", "-q", "--model", "anthropic:fake", "--workspace", c.ws, "do the crash test")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	if killAfter > 0 {
		// The random moment is the point of this case, not a wait for a
		// condition.
		tm := time.AfterFunc(killAfter, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer tm.Stop()
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
		return true
	}
	if err != nil && killAfter == 0 {
		c.t.Fatalf("deputy run neither died at its failpoint nor succeeded: %v\n%s", err, out.String())
	}
	return false
}

// resumeAndCheck runs a worker until nothing is active, then checks the
// promises. mustExist: the run got far enough to record its root.
func (c *crashCase) resumeAndCheck(mustExist bool) {
	t := c.t
	w := c.cmd(nil, "worker", "-q", "--until-idle", "--workspace", c.ws)
	if out, err := w.CombinedOutput(); err != nil {
		t.Fatalf("deputy worker: %v\n%s", err, out)
	}
	out, err := c.cmd(nil, "ps", "--all", "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("deputy ps: %v\n%s", err, out)
	}
	var list []struct {
		ID, Parent, State string
		Turns             int
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("ps output: %v\n%s", err, out)
	}
	if len(list) == 0 {
		if mustExist {
			t.Fatal("no instance was recorded")
		}
		return // killed before the root was recorded: nothing started, nothing lost
	}
	var root string
	for _, in := range list {
		switch in.State {
		case "completed", "failed", "timed_out", "cancelled":
		default:
			t.Errorf("instance %s ended in state %q", in.ID, in.State)
		}
		if in.Parent == "" {
			root = in.ID
			if in.State != "completed" || in.Turns != 4 {
				t.Errorf("root %+v, want completed after 4 turns", in)
			}
		}
	}
	if len(list) != 3 {
		t.Errorf("%d instances, want the root and two children (a spawn ran twice, or a child was lost)", len(list))
	}
	for _, in := range list {
		// A child cut by the crash resumes from its last step, and its
		// parent's replayed spawn call reattaches to it.
		if in.Parent != "" && (in.State != "completed" || in.Turns != 2) {
			t.Errorf("child %+v, want completed after 2 turns", in)
		}
	}
	out, err = c.cmd(nil, "show", "--json", root).CombinedOutput()
	if err != nil {
		t.Fatalf("deputy show: %v\n%s", err, out)
	}
	var shown struct {
		Transcript []llm.Message `json:"transcript"`
	}
	if err := json.Unmarshal(out, &shown); err != nil {
		t.Fatal(err)
	}
	bashOK := checkTranscript(t, shown.Transcript, 4)
	counts, _ := os.ReadFile(filepath.Join(c.ws, "count.txt"))
	for _, call := range []string{"call-1", "call-3"} {
		n := strings.Count(string(counts), call)
		if n > 1 {
			t.Errorf("%s ran %d times", call, n)
		}
		if bashOK[call] && n != 1 {
			t.Errorf("%s succeeded in the transcript but ran %d times", call, n)
		}
	}
}

// checkTranscript checks turns are whole and unique: roles alternate, as
// many assistant turns as turns, every tool_use answered exactly once. It
// returns which bash calls the transcript shows as run (not interrupted).
func checkTranscript(t *testing.T, msgs []llm.Message, turns int) map[string]bool {
	t.Helper()
	assistants := 0
	uses, results := map[string]string{}, map[string]int{}
	ran := map[string]bool{}
	for i, m := range msgs {
		if i > 0 && m.Role == msgs[i-1].Role {
			t.Errorf("messages %d and %d are both %s", i-1, i, m.Role)
		}
		if m.Role == llm.Assistant {
			assistants++
		}
		for _, b := range m.Content {
			switch b.Type {
			case llm.TypeToolUse:
				if _, dup := uses[b.ID]; dup {
					t.Errorf("tool_use %s appears twice", b.ID)
				}
				uses[b.ID] = string(b.Input)
			case llm.TypeToolResult:
				results[b.ToolUseID]++
				if in := uses[b.ToolUseID]; strings.Contains(in, "subagent_type") && !strings.Contains(b.Text, "Conclusion: ") {
					t.Errorf("a spawn's result is not its child's report: %q", b.Text)
				}
				if in := uses[b.ToolUseID]; strings.Contains(in, "call-") && !strings.HasPrefix(b.Text, "interrupted") {
					for _, c := range []string{"call-1", "call-3"} {
						if strings.Contains(in, c) {
							ran[c] = true
						}
					}
				}
			}
		}
	}
	if assistants != turns {
		t.Errorf("%d assistant turns, want %d", assistants, turns)
	}
	for id := range uses {
		if results[id] != 1 {
			t.Errorf("tool_use %s has %d results", id, results[id])
		}
	}
	if !strings.Contains(durable.Interrupted, "interrupted") {
		t.Fatal("the interrupted marker changed; update this test")
	}
	return ran
}
