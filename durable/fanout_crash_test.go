//go:build unix

package durable_test

// The fan-out crash test: `deputy run` whose root calls fan_out with three
// tasks (one and two, then sum, which depends on both) is killed with
// SIGKILL inside its children's runs and at a random moment, and `deputy
// worker` resumes it. Every instance must end, the root must complete with
// every task's report in its own, in task order, each task must have run
// as exactly one child, and no transcript may have a missing or
// duplicated turn. It reuses the harness of crash_test.go.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
)

// Explorers (one, two) take 2 turns; the reviewer (sum) takes 3, so the
// failpoints of its second call and third turn are its own.
const fanOutCrashScenario = `
latency: {first_byte: 30ms}
rules:
  - match: {system: "read-only explorer", turn: 1}
    tool_calls: [{name: glob, input: {pattern: "*"}}]
  - match: {system: "read-only explorer"}
    text: 'Conclusion: {{find "task-[a-z]+$" .Task}} saw {{lines (index .ToolResults 0)}} entries.'
  - match: {system: "You are a reviewer", turn: 1}
    tool_calls: [{name: glob, input: {pattern: "*.txt"}}]
  - match: {system: "You are a reviewer", turn: 2}
    tool_calls: [{name: read_file, input: {path: seed.txt}}]
  - match: {system: "You are a reviewer"}
    text: 'Conclusion: {{find "task-[a-z]+$" .Task}} read {{index .ToolResults 0}}'
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          tasks:
            - {id: one, subagent_type: explorer, task: "survey as task-one"}
            - {id: two, subagent_type: explorer, task: "survey as task-two"}
            - {id: sum, subagent_type: reviewer, task: "check both as task-sum", depends_on: [one, two]}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

// fanOutBoundaries are where the process dies: the root's fan_out step,
// and its children's steps (the first child to reach one dies there; the
// sum-only ones are reached by sum alone, after one and two have ended).
var fanOutBoundaries = []string{
	"during:turn-1/call-1-fan_out", // every child ended, the call's result not checkpointed
	"before:child:load",
	"during:child:turn-1/generate",
	"during:child:turn-2/generate",
	"after:child:end",                      // a child ended, its parent not yet told
	"during:child:turn-2/call-1-read_file", // sum only
	"before:child:turn-3/generate",         // sum only
	"during:child:end",
}

// onPostgres are the boundaries also run on Postgres: its cases cost
// several times SQLite's (a database each, DBOS's schema), and the replay
// they check is the same code; these three cover the parent's step, a
// first-wave child's and sum's.
var onPostgres = []string{"during:turn-1/call-1-fan_out", "during:child:turn-2/generate", "before:child:turn-3/generate"}

// fanOutTurns is how many turns each task's child takes.
var fanOutTurns = map[string]int{"one": 2, "two": 2, "sum": 3}

func TestFanOutCrashRecovery(t *testing.T) {
	t.Parallel()
	bin := buildDeputy(t)
	s, err := fake.ParseScenario([]byte(fanOutCrashScenario), "fanout-crash.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake.NewServer(fake.Options{Responder: s}))
	t.Cleanup(hs.Close)

	seed := uint64(time.Now().UnixNano())
	t.Logf("random kill times from seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for _, db := range []string{"sqlite", "postgres"} {
		// Drawn here, so the subtests share no generator. A clean run takes
		// about 0.6 s on SQLite, longer on Postgres.
		after := time.Duration(100+rng.IntN(700)) * time.Millisecond
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			fps := fanOutBoundaries
			if db == "postgres" {
				fps = onPostgres
			}
			for _, fp := range fps {
				t.Run(fp, func(t *testing.T) {
					t.Parallel()
					c := newCrashCase(t, bin, hs.URL, db)
					if !c.run(map[string]string{"DEPUTY_FAILPOINT": fp}, 0) {
						t.Fatal("deputy run never reached its failpoint")
					}
					resumeAndCheckFanOut(c, true)
				})
			}
			t.Run(fmt.Sprintf("random-%v", after), func(t *testing.T) {
				t.Parallel()
				c := newCrashCase(t, bin, hs.URL, db)
				if !c.run(nil, after) {
					t.Log("deputy run ended before it was killed")
				}
				resumeAndCheckFanOut(c, false)
			})
		})
	}
}

// shownInstance is what `deputy show --json` prints, as far as this test
// reads it.
type shownInstance struct {
	ID, Parent, State, Task, Report string
	Turns                           int
	Transcript                      []llm.Message
}

var taskOfChild = regexp.MustCompile(`task-([a-z]+)$`)

// resumeAndCheckFanOut runs a worker until nothing is active, then checks
// the promises. mustExist: the run got far enough to record its root.
func resumeAndCheckFanOut(c *crashCase, mustExist bool) {
	t := c.t
	w := c.cmd(nil, "worker", "-q", "--until-idle", "--workspace", c.ws)
	if out, err := w.CombinedOutput(); err != nil {
		t.Fatalf("deputy worker: %v\n%s", err, out)
	}
	out, err := c.cmd(nil, "ps", "--all", "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("deputy ps: %v\n%s", err, out)
	}
	var list []struct{ ID, State string }
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("ps output: %v\n%s", err, out)
	}
	if len(list) == 0 {
		if mustExist {
			t.Fatal("no instance was recorded")
		}
		return // killed before the root was recorded: nothing started, nothing lost
	}
	var root *shownInstance
	byTask := map[string]*shownInstance{}
	for _, in := range list {
		out, err := c.cmd(nil, "show", "--json", in.ID).CombinedOutput()
		if err != nil {
			t.Fatalf("deputy show %s: %v\n%s", in.ID, err, out)
		}
		var s shownInstance
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("show output: %v\n%s", err, out)
		}
		switch s.State {
		case "completed", "failed", "timed_out", "cancelled":
		default:
			t.Errorf("instance %s ended in state %q", s.ID, s.State)
		}
		if s.Parent == "" {
			root = &s
			continue
		}
		m := taskOfChild.FindStringSubmatch(s.Task)
		if m == nil {
			t.Errorf("child %s has task %q, of no task of the fan-out", s.ID, s.Task)
			continue
		}
		if prev, dup := byTask[m[1]]; dup {
			t.Errorf("task %s ran twice: children %s and %s", m[1], prev.ID, s.ID)
		}
		byTask[m[1]] = &s
	}
	if len(list) != 4 || len(byTask) != 3 {
		t.Errorf("%d instances for %d tasks, want the root and three children, one per task", len(list), len(byTask))
	}
	if root == nil {
		t.Fatal("no root")
	}
	if root.State != "completed" || root.Turns != 2 {
		t.Errorf("root %s after %d turns, want completed after 2", root.State, root.Turns)
	}
	checkTranscript(t, root.Transcript, 2)
	// Each child completed its turns once, and its report is in the root's,
	// under its heading, in task order.
	at := -1
	for _, task := range []string{"one", "two", "sum"} {
		k := byTask[task]
		if k == nil {
			t.Errorf("task %s has no child", task)
			continue
		}
		if k.State != "completed" || k.Turns != fanOutTurns[task] || !strings.HasPrefix(k.Report, "Conclusion: task-"+task) {
			t.Errorf("task %s: %s after %d turns, report %q; want completed after %d", task, k.State, k.Turns, k.Report, fanOutTurns[task])
		}
		checkTranscript(t, k.Transcript, fanOutTurns[task])
		i := strings.Index(root.Report, "## "+task+"\n"+strings.TrimSpace(k.Report))
		if i < 0 || i < at {
			t.Errorf("the root's report lacks task %s's report %q, or not in task order:\n%s", task, k.Report, root.Report)
		}
		at = i
	}
	if k := byTask["sum"]; k != nil && (!strings.Contains(k.Task, "## one\nConclusion: task-one") ||
		!strings.Contains(k.Task, "## two\nConclusion: task-two")) {
		t.Errorf("sum was not given its dependencies' reports: %q", k.Task)
	}
	for _, in := range append([]*shownInstance{root}, byTask["one"], byTask["two"], byTask["sum"]) {
		if in == nil {
			continue
		}
		for _, m := range in.Transcript {
			for _, b := range m.Content {
				if b.Type == llm.TypeToolResult && strings.HasPrefix(b.Text, durable.Interrupted[:20]) {
					// Every call here is read-only or resumable: cut by a
					// crash, it runs again.
					t.Errorf("%s: a call was answered %q", in.ID, b.Text)
				}
			}
		}
	}
}
