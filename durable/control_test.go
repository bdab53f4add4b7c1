package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// rig is an engine on a database file, with a scenario and extra tools;
// reopen makes a new engine on the same file, as a restarted process.
type rig struct {
	t        *testing.T
	db       string
	scenario string
	clk      clock.Clock
	tools    []tool.Tool
	catalog  *agentdef.Catalog // nil: the built-ins
	maxRuns  int               // durable.Options.MaxRuns
	onEvent  func(agent.Event)
	fence    func(durable.Spec) agent.Fencer // durable.Options.Fence
	fail     string                          // durable.Options.Failpoint
	perms    *agent.Permissions              // agent.Runner.Permissions
	// endWritten is the test hook durable.OnEndWritten sets.
	endWritten func(id string)
	e          *durable.Engine
	st         *store.Store
	ctl        durable.Control
}

func newRig(t *testing.T, scenario string, clk clock.Clock, tools ...tool.Tool) *rig {
	return newRigWith(t, &rig{scenario: scenario, clk: clk, tools: tools})
}

func newRigWith(t *testing.T, r *rig) *rig {
	r.t, r.db = t, filepath.Join(t.TempDir(), "deputy.db")
	r.reopen()
	return r
}

func (r *rig) reopen() {
	t := r.t
	if r.e != nil {
		r.e.Close(5 * time.Second)
		r.st.Close()
	}
	st, err := store.Open(context.Background(), r.db, store.Options{Clock: r.clk})
	if err != nil {
		t.Fatal(err)
	}
	s, err := fake.ParseScenario([]byte(r.scenario), t.Name()+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	model := fake.NewModel(s, fake.WithoutLatency())
	opts := durable.Options{
		Store:     st,
		Clock:     r.clk,
		Models:    func(string) (llm.Model, string, error) { return model, "fake", nil },
		Tools:     func(durable.Spec) (*tool.Set, error) { return tool.NewSet(r.tools...) },
		Runner:    agent.Runner{Catalog: r.catalog, Permissions: r.perms},
		MaxRuns:   r.maxRuns,
		OnEvent:   r.onEvent,
		Fence:     r.fence,
		Failpoint: r.fail,
	}
	durable.OnEndWritten(&opts, r.endWritten)
	e, err := durable.Open(context.Background(), opts)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	r.e, r.st, r.ctl = e, st, durable.Control{Store: st, Engine: e}
	t.Cleanup(func() { e.Close(5 * time.Second); st.Close() })
}

func (r *rig) start(spec durable.Spec) string {
	r.t.Helper()
	spec.Model = "fake"
	id, err := r.e.Start(context.Background(), "the task", spec)
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

func (r *rig) wait(id string) *instance.Record {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := r.e.Wait(ctx, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return in
}

// gate is a read-only tool that blocks until its channel is closed.
type gate struct{ open chan struct{} }

func (gate) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "gate", Description: "waits", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (gate) ReadOnly() bool { return true }
func (g gate) Run(ctx context.Context, _ json.RawMessage) (string, error) {
	select {
	case <-g.open:
		return "gate passed", nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

const askScenario = `
rules:
  - match: {turn: 1}
    text: "I need to know."
    tool_calls: [{name: ask_parent, input: {question: "Which file?"}}]
  - match: {turn: 2}
    text: "using {{index .ToolResults 0}}"
`

// A root asks the person: its run ends in state asking with nothing
// running; the answer starts a new run that continues the transcript with
// the answer as the ask_parent result.
func TestAskAnswerRoundTrip(t *testing.T) {
	t.Parallel()
	r := newRig(t, askScenario, nil)
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root"})
	in := r.wait(id)
	if in.State != instance.Asking || in.Turns != 1 {
		t.Fatalf("after asking: %+v", in)
	}
	q, err := r.ctl.Question(ctx, id)
	if err != nil || q == nil || q.Body != "Which file?" {
		t.Fatalf("question %+v %v", q, err)
	}
	if runs, _ := r.st.Runs(ctx, id); len(runs) != 1 || runs[0].EndedAt.IsZero() || runs[0].Outcome != "asking" {
		t.Fatalf("runs %+v: the asking instance's run must have ended", runs)
	}
	if msgs, _ := r.st.Transcript(ctx, id); len(msgs) != 2 {
		t.Fatalf("transcript while asking: %d messages, want the task and the question's turn", len(msgs))
	}
	// Refused while asking: a resume (it is not paused).
	if err := r.ctl.Resume(ctx, id); !errors.Is(err, instance.ErrIllegalTransition) {
		t.Fatalf("resume while asking: %v", err)
	}

	if err := r.ctl.Answer(ctx, id, "b.txt"); err != nil {
		t.Fatal(err)
	}
	in = r.wait(id)
	if in.State != instance.Completed || in.Report != "using b.txt" || in.Turns != 2 {
		t.Fatalf("after the answer: %+v", in)
	}
	msgs, _ := r.st.Transcript(ctx, id)
	if len(msgs) != 4 {
		t.Fatalf("transcript %d messages", len(msgs))
	}
	res := msgs[2].Content
	if len(res) != 1 || res[0].Type != llm.TypeToolResult || res[0].Text != "b.txt" || res[0].IsError ||
		res[0].ToolUseID != msgs[1].ToolUses()[0].ID {
		t.Fatalf("the answer is not the ask_parent result: %+v", res)
	}
	if q, err := r.ctl.Question(ctx, id); err != nil || q != nil {
		t.Errorf("the question is still open: %+v %v", q, err)
	}
	if runs, _ := r.st.Runs(ctx, id); len(runs) != 2 || runs[1].Outcome != "" && runs[1].Outcome != "completed" {
		t.Errorf("runs %+v", runs)
	}
	// Bad input: nothing changes.
	for name, err := range map[string]error{
		"answer a completed instance": r.ctl.Answer(ctx, id, "again"),
		"pause a completed instance":  r.ctl.Pause(ctx, id),
		"cancel a completed instance": r.ctl.Cancel(ctx, id),
		"send to a completed one":     r.ctl.Send(ctx, id, durable.Operator, "hi"),
	} {
		if !errors.Is(err, instance.ErrIllegalTransition) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := r.ctl.Pause(ctx, "i-nosuch"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("pause an unknown id: %v", err)
	}
	if after, _ := r.st.GetInstance(ctx, id); after.State != instance.Completed || after.Report != in.Report {
		t.Errorf("refused controls changed the instance: %+v", after)
	}
}

const gateScenario = `
rules:
  - match: {turn: 1}
    text: "Waiting at the gate."
    tool_calls: [{name: gate, input: {}}]
  - match: {turn: 2, last_user: "operator: look at b.txt"}
    text: "heard the note"
  - match: {turn: 2}
    text: "no note"
`

// A pause reaches a running root at its next turn boundary; the note sent
// with it waits too. The instance survives a restart of the process, and
// the resume continues the transcript with the note.
func TestPauseResumeAcrossRestartWithNote(t *testing.T) {
	t.Parallel()
	g := gate{open: make(chan struct{})}
	r := newRig(t, gateScenario, nil, g)
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root"})
	waitState(t, r.st, id, instance.Running)
	if err := r.ctl.Send(ctx, id, durable.Operator, "look at b.txt"); err != nil {
		t.Fatal(err)
	}
	if err := r.ctl.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	close(g.open)
	in := r.wait(id)
	if in.State != instance.Paused || in.Turns != 1 {
		t.Fatalf("after the pause: %+v", in)
	}
	if msgs, _ := r.st.Transcript(ctx, id); len(msgs) != 2 {
		t.Fatalf("paused transcript %d messages, want it to end at the model's turn", len(msgs))
	}

	r.reopen() // a new process
	if err := r.ctl.Pause(ctx, id); !errors.Is(err, instance.ErrIllegalTransition) {
		t.Fatalf("pause a paused instance: %v", err)
	}
	if err := r.ctl.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	in = r.wait(id)
	if in.State != instance.Completed || in.Report != "heard the note" || in.Turns != 2 {
		t.Fatalf("after the resume: %+v", in)
	}
	msgs, _ := r.st.Transcript(ctx, id)
	last := msgs[2]
	if len(last.Content) != 2 || last.Content[0].Text != "gate passed" || !strings.Contains(last.Content[1].Text, "look at b.txt") {
		t.Fatalf("the resumed run's first message %+v", last)
	}
	noMailLeft(t, r.st, id)
}

// Cancel stops a running root at once when this engine runs it, keeping
// its partial answer; a paused one is cancelled in the store.
func TestCancelRunningAndPaused(t *testing.T) {
	t.Parallel()
	g := gate{open: make(chan struct{})}
	r := newRig(t, gateScenario, nil, g)
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root"})
	waitState(t, r.st, id, instance.Running)
	waitTurn(t, r.st, id, 2) // the gate call is running
	if err := r.ctl.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	in := r.wait(id)
	if in.State != instance.Cancelled || in.Report != "Waiting at the gate." || !in.Incomplete {
		t.Fatalf("cancelled while running: %+v", in)
	}

	// A paused root is cancelled in the store, and cannot be resumed.
	g2 := gate{open: make(chan struct{})}
	r2 := newRig(t, gateScenario, nil, g2)
	id2 := r2.start(durable.Spec{System: "root"})
	waitTurn(t, r2.st, id2, 2)
	if err := r2.ctl.Pause(ctx, id2); err != nil {
		t.Fatal(err)
	}
	close(g2.open)
	if in := r2.wait(id2); in.State != instance.Paused {
		t.Fatalf("not paused: %+v", in)
	}
	if err := r2.ctl.Cancel(ctx, id2); err != nil {
		t.Fatal(err)
	}
	if in, _ := r2.st.GetInstance(ctx, id2); in.State != instance.Cancelled || in.Turns != 1 {
		t.Fatalf("cancelled while paused: %+v", in)
	}
	if err := r2.ctl.Resume(ctx, id2); !errors.Is(err, instance.ErrIllegalTransition) {
		t.Fatalf("resume a cancelled instance: %v", err)
	}
}

// waitState waits until id is in state s.
func waitState(t *testing.T, st *store.Store, id string, s instance.State) {
	t.Helper()
	waitUntil(t, st.EventsWritten, "instance "+id+" "+string(s), func() bool {
		in, err := st.GetInstance(context.Background(), id)
		return err == nil && in.State == s
	})
}

// waitTurn waits until id's transcript has n messages.
func waitTurn(t *testing.T, st *store.Store, id string, n int) {
	t.Helper()
	waitUntil(t, st.EventsWritten, fmt.Sprintf("%d messages in the transcript of %s", n, id), func() bool {
		m, err := st.Transcript(context.Background(), id)
		return err == nil && len(m) >= n
	})
}

// recheck is how often eventually looks again when nothing woke it: for
// what no event marks (a worker's lease, a run's end, a mail consumed, a
// commit of another process on SQLite).
const recheck = 25 * time.Millisecond

// eventually reports whether cond came to hold before ctx ended. It
// checks cond again each time wake's channel is closed (a store's
// EventsWritten: an instance moved, a message, mail or progress was
// recorded, and on Postgres by any process), or recheck has passed. wake
// is called before each check, so a change that lands between the check
// and the wait still wakes it. cond may fail the test (a worker died).
func eventually(ctx context.Context, wake func() <-chan struct{}, cond func() bool) bool {
	look := time.NewTicker(recheck)
	defer look.Stop()
	for {
		woken := wake()
		if cond() {
			return true
		}
		select {
		case <-woken:
		case <-look.C:
		case <-ctx.Done():
			return false
		}
	}
}

// waitUntil is eventually within 20 s, failing the test with what when
// cond never held.
func waitUntil(t testing.TB, wake func() <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !eventually(ctx, wake, cond) {
		t.Fatalf("never within 20 s: %s", what)
	}
}

// noMailLeft fails the test when id's mailbox holds mail nobody took, or
// cannot be read.
func noMailLeft(t *testing.T, st *store.Store, id string) {
	t.Helper()
	p, err := st.Pending(context.Background(), id)
	if err != nil {
		t.Fatalf("the mailbox of %s: %v", id, err)
	}
	if len(p) != 0 {
		t.Errorf("mail left for %s: %+v", id, p)
	}
}

// tick is a read-only tool that moves the test's clock six seconds on: a
// call that takes six seconds.
type tick struct{ clk *clock.Fake }

func (tick) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "tick", Description: "works six seconds", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (tick) ReadOnly() bool { return true }
func (k tick) Run(context.Context, json.RawMessage) (string, error) {
	k.clk.Advance(6 * time.Second)
	return "ticked", nil
}

const clockScenario = `
rules:
  - match: {turn: 1}
    tool_calls: [{name: tick, input: {}}, {name: ask_parent, input: {question: "go on?"}}]
  - match: {turn: 2}
    tool_calls: [{name: tick, input: {}}]
  - match: {turn: 3}
    text: "finished"
`

// The wall-time budget counts running time only: 6 s in the first run, an
// hour asking (not counted), then the second run has 4 s left, so its 6 s
// call runs it out. Had the hour counted, the second run would end before
// its first model call; had the first run's 6 s been forgotten, it would
// complete.
func TestWallTimeStopsWhileAsking(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := newRig(t, clockScenario, clk, tick{clk})
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root", WallTime: 10 * time.Second})
	if in := r.wait(id); in.State != instance.Asking {
		t.Fatalf("first run: %+v", in)
	}
	clk.Advance(time.Hour)
	if err := r.ctl.Answer(ctx, id, "yes"); err != nil {
		t.Fatal(err)
	}
	in := r.wait(id)
	if in.State != instance.TimedOut || in.StopReason != "wall_time" || in.Turns != 2 {
		t.Fatalf("second run: %+v", in)
	}
}

// The tree budget counts what earlier runs spent: a root that spent its
// budget before asking stops at once when the answer resumes it.
func TestTreeBudgetSpansRuns(t *testing.T) {
	t.Parallel()
	r := newRig(t, askScenario, nil)
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root", Budget: agent.TreeBudget{Tokens: 1}})
	if in := r.wait(id); in.State != instance.Asking || in.Usage.Total() <= 1 {
		t.Fatalf("first run: %+v", in)
	}
	if err := r.ctl.Answer(ctx, id, "b.txt"); err != nil {
		t.Fatal(err)
	}
	in := r.wait(id)
	if in.StopReason != "budget" || in.Turns != 1 || !in.Incomplete {
		t.Fatalf("the answered run spent past the budget: %s %s after %d turns", in.State, in.StopReason, in.Turns)
	}
}
