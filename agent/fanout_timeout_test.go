package agent_test

// fan_out when a task runs out of time or fails: the task's own result
// says so (its partial report kept), and the other tasks' results are all
// there. These run over the fake provider's HTTP wire, on the test clock.

import (
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/loop"
)

// fanTimeoutScenario: task slow (timeout_seconds 10) sleeps 9 s on the
// test clock after a first, partial answer; past 8 s (80%) it is told to
// wrap up, and the %s rule says how its wrap-up turn goes. Tasks a and b
// answer at once; after and anyway depend on slow, anyway runs whatever
// slow did.
const fanTimeoutScenario = `
rules:
  - match: {system: "slowpoke", last_user: "Time is almost up"}
%s
  - match: {system: "slowpoke", turn: 1}
    text: "Partial: found the first half."
    tool_calls: [{name: slow, input: {s: 9}}]
  - match: {system: "read-only explorer", last_user: "^count apples$"}
    text: "a has 3"
  - match: {system: "read-only explorer", last_user: "^count bees$"}
    text: "b has 4"
  - match: {system: "read-only explorer", last_user: "build on slow$"}
    text: "after ran"
  - match: {system: "read-only explorer", last_user: "use what slow left$"}
    text: "anyway ran"
  - match: {system: "read-only explorer"}
    text: "unexpected: {{.LastUser}}"
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          tasks:
            - {id: a, subagent_type: explorer, task: "count apples"}
            - {id: slow, subagent_type: slowpoke, task: "take long", timeout_seconds: 10}
            - {id: b, subagent_type: explorer, task: "count bees"}
            - {id: after, subagent_type: explorer, task: "build on slow", depends_on: [slow]}
            - {id: anyway, subagent_type: explorer, task: "use what slow left", depends_on: [slow], run_anyway: true}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

// A fan_out task that outlives its timeout_seconds comes back marked
// incomplete with the report it had, and costs nobody else theirs: the
// tasks beside it complete, the one depending on it is skipped with the
// reason, and the one that runs anyway gets the partial report.
func TestFanOutTaskTimeoutKeepsEveryResult(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// wrapUp is the reply to the wrap-up turn (YAML, indented as a rule's fields).
		wrapUp string
		// hard: the wrap-up reply outlasts the timeout, which cuts it.
		hard    bool
		state   instance.State
		partial bool
		report  string
		elapsed time.Duration
	}{
		{name: "cut by the hard timeout", hard: true,
			wrapUp: "    latency: {first_byte: 5s}\n    text: \"never sent\"",
			state:  instance.TimedOut, partial: true, report: "Partial: found the first half.", elapsed: 10 * time.Second},
		{name: "keeps working after the wrap-up",
			wrapUp: "    text: \"Partial: both halves, unchecked.\"\n    tool_calls: [{name: slow, input: {s: 1}}]",
			state:  instance.TimedOut, partial: true, report: "Partial: both halves, unchecked.", elapsed: 9 * time.Second},
		{name: "wraps up in time",
			wrapUp: "    text: \"Final: both halves.\"",
			state:  instance.Completed, partial: false, report: "Final: both halves.", elapsed: 9 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			forWires(t, func(t *testing.T, w wire) {
				clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				e := newEnv(t, w, strings.Replace(fanTimeoutScenario, "%s", c.wrapUp, 1), withClock(clk), withTools(sleepTool{clk}))
				task := e.task("fan out")
				// No wall time of its own: the task's timeout_seconds is the only one.
				task.Volatile = []*agentdef.Definition{{Name: "slowpoke", Description: "slow", SystemPrompt: "You are a slowpoke.",
					Tools: []string{"slow"}}}
				wait := e.start(task)

				// slow's hard deadline and its 9 s sleep are the only timers:
				// nothing else in the tree waits on the clock.
				e.waitPending(2)
				clk.Advance(9 * time.Second)
				if c.hard {
					e.waitPending(2) // the deadline, and the wrap-up reply's 5 s
					clk.Advance(time.Second)
				}
				o, err := wait()
				if err != nil {
					t.Fatal(err)
				}
				if o.Result.StopReason != loop.StopCompleted {
					t.Fatalf("root stopped %s", o.Result.StopReason)
				}
				byTask := map[string]instance.Record{}
				for _, in := range children(o) {
					if _, dup := byTask[in.Description]; dup {
						t.Errorf("task %s ran twice", in.Description)
					}
					byTask[in.Description] = in
				}

				s := byTask["slow"]
				if s.State != c.state || s.Incomplete != c.partial || s.Turns != 2 || s.Duration() != c.elapsed {
					t.Errorf("slow: state %s incomplete %v turns %d after %v; want %s %v 2 after %v",
						s.State, s.Incomplete, s.Turns, s.Duration(), c.state, c.partial, c.elapsed)
				}
				if reqs := e.requests("slowpoke"); len(reqs) != 2 ||
					!strings.Contains(reqs[1].Request.Messages[len(reqs[1].Request.Messages)-1].Text(), loop.WrapUp) {
					t.Errorf("the wrap-up message was not sent once, at the soft timeout: %d requests", len(reqs))
				}

				got := o.Result.Answer
				heading := "## slow"
				if c.partial {
					heading += " (" + string(c.state) + ", incomplete)"
				}
				want := []string{"## a\na has 3", heading + "\n" + c.report, "## b\nb has 4"}
				if c.partial {
					want = append(want, "## after (skipped: task slow it depends on ended "+string(c.state)+")")
				} else {
					want = append(want, "## after\nafter ran")
				}
				want = append(want, "## anyway\nanyway ran")
				for _, w := range want {
					if !strings.Contains(got, w) {
						t.Errorf("the merged reports lack %q:\n%s", w, got)
					}
				}
				order := []int{strings.Index(got, "## a\n"), strings.Index(got, "## slow"), strings.Index(got, "## b\n"),
					strings.Index(got, "## after"), strings.Index(got, "## anyway")}
				for i := 1; i < len(order); i++ {
					if order[i] <= order[i-1] {
						t.Errorf("reports not in task order:\n%s", got)
						break
					}
				}
				if m, _ := o.Transcript(byTask["anyway"].ID); len(m) == 0 || !strings.Contains(m[0].Text(), heading+"\n"+c.report) {
					t.Errorf("anyway was not given slow's report: %v", m)
				}

				// Every other task that ran completed, whole.
				wantRan := []string{"a", "b", "anyway", "slow"}
				if !c.partial {
					wantRan = append(wantRan, "after")
				}
				if len(byTask) != len(wantRan) {
					t.Errorf("%d tasks ran, want %d (%v)", len(byTask), len(wantRan), wantRan)
				}
				for _, id := range wantRan[:3] {
					if in, ok := byTask[id]; !ok || in.State != instance.Completed || in.Incomplete {
						t.Errorf("task %s: %+v", id, in)
					}
				}
			})
		})
	}
}

const fanFailureScenario = `
rules:
  - match: {system: "doomed", turn: 2}
    fault: {kind: server_error}
    text: unused
  - match: {system: "doomed", turn: 1}
    text: "Half done: a.txt read."
    tool_calls: [{name: read_file, input: {path: a.txt}}]
  - match: {system: "read-only explorer", last_user: "^count apples$"}
    text: "a has 3"
  - match: {system: "read-only explorer", last_user: "^count bees$"}
    text: "b has 4"
  - match: {system: "read-only explorer", last_user: "go on anyway$"}
    text: "anyway ran"
  - match: {system: "read-only explorer"}
    text: "unexpected: {{.LastUser}}"
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          tasks:
            - {id: a, subagent_type: explorer, task: "count apples"}
            - {id: doomed, subagent_type: doomed, task: "fail half way"}
            - {id: b, subagent_type: explorer, task: "count bees"}
            - {id: after, subagent_type: explorer, task: "x", depends_on: [doomed]}
            - {id: after-after, subagent_type: explorer, task: "y", depends_on: [after]}
            - {id: anyway, subagent_type: explorer, task: "go on anyway", depends_on: [doomed, a], run_anyway: true}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

// A task whose model call fails after it did some work: its result says
// failed with the error and what it had written, the other tasks' results
// are kept, its dependents are skipped (transitively) with the reason, and
// the one marked run_anyway runs with both its dependencies' reports.
func TestFanOutTaskFailureKeepsEveryResult(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		e := newEnv(t, w, fanFailureScenario)
		task := e.task("fan out")
		task.Volatile = []*agentdef.Definition{{Name: "doomed", Description: "fails", SystemPrompt: "You are doomed.",
			Tools: []string{"read_file"}}}
		o, err := e.run(task)
		if err != nil {
			t.Fatal(err)
		}
		byTask := map[string]instance.Record{}
		for _, in := range children(o) {
			byTask[in.Description] = in
		}
		if len(byTask) != 4 || len(children(o)) != 4 {
			t.Fatalf("%d children (%v), want a, doomed, b and anyway once each", len(children(o)), byTask)
		}
		d := byTask["doomed"]
		if d.State != instance.Failed || !d.Incomplete || d.StopReason != string(loop.StopModelError) || d.Turns != 2 || d.Error == "" {
			t.Errorf("doomed %+v", d)
		}
		for _, id := range []string{"a", "b", "anyway"} {
			if in := byTask[id]; in.State != instance.Completed || in.Incomplete {
				t.Errorf("task %s: %+v", id, in)
			}
		}
		res := resultsOfTurn(t, o, 1)
		if len(res) != 1 || res[0].IsError {
			t.Fatalf("fan_out result %+v", res)
		}
		got := res[0].Text
		doomed := "## doomed (failed, incomplete)\n" + d.Error + "\nHalf done: a.txt read."
		for _, w := range []string{"## a\na has 3", doomed, "## b\nb has 4",
			"## after (skipped: task doomed it depends on ended failed)",
			"## after-after (skipped: task after it depends on ended skipped)",
			"## anyway\nanyway ran"} {
			if !strings.Contains(got, w) {
				t.Errorf("the merged reports lack %q:\n%s", w, got)
			}
		}
		m, _ := o.Transcript(byTask["anyway"].ID)
		if len(m) == 0 || !strings.Contains(m[0].Text(), doomed) || !strings.Contains(m[0].Text(), "## a\na has 3") {
			t.Errorf("anyway was not given both reports: %v", m)
		}
	})
}
