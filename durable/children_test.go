package durable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

// kids returns the children of parent, oldest first.
func kids(t *testing.T, st *store.Store, parent string) []*instance.Record {
	t.Helper()
	k, err := st.ListInstances(context.Background(), store.Filter{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func transcriptText(t *testing.T, st *store.Store, id string) string {
	t.Helper()
	msgs, err := st.Transcript(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(msgs)
	return string(b)
}

const backgroundScenario = `
rules:
  - match: {system: "subagent working", turn: 1}
    tool_calls: [{name: gate, input: {}}]
  - match: {system: "subagent working"}
    text: "child report"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: general-purpose, task: "work", background: true}}]
  - match: {turn: 2}
    text: "done early"
  - match: {turn: 3, last_user: "child report"}
    text: "final after the report"
`

// A background child returns its id at once; its parent goes on. When
// the parent has nothing more to do, it holds for the child, whose relay
// then reaches it as a message: the run does not end with it unread.
func TestBackgroundChildRelayReachesTheParent(t *testing.T) {
	t.Parallel()
	g := gate{open: make(chan struct{})}
	r := newRig(t, backgroundScenario, nil, g)
	id := r.start(durable.Spec{System: "root"})
	waitTurn(t, r.st, id, 4) // the parent answered "done early" while the child waits at the gate
	if k := kids(t, r.st, id); len(k) != 1 || !k[0].State.Active() {
		t.Fatalf("children %+v", k)
	}
	close(g.open)
	in := r.wait(id)
	if in.State != instance.Completed || in.Report != "final after the report" || in.Turns != 3 {
		t.Fatalf("root %+v", in)
	}
	all := transcriptText(t, r.st, id)
	if !strings.Contains(all, "started in the background") || strings.Count(all, "child report") != 1 {
		t.Fatalf("root transcript %s", all)
	}
	if k := kids(t, r.st, id); k[0].State != instance.Completed || k[0].Report != "child report" {
		t.Fatalf("child %+v", k[0])
	}
	noMailLeft(t, r.st, id)
}

// A background child its engine's shutdown stops has not ended: its
// EventEnded says Interrupted, with the state its record holds and no error
// (not the cut-off loop's account), nothing ends it in the store, and the
// next engine resumes it to its end and its parent to the relay.
func TestChildStoppedByAShutdownIsInterrupted(t *testing.T) {
	t.Parallel()
	g := gate{open: make(chan struct{})}
	ends := make(chan agent.Event, 4)
	r := newRigWith(t, &rig{scenario: backgroundScenario, tools: []tool.Tool{g}, onEvent: func(ev agent.Event) {
		if ev.Kind == agent.EventEnded && ev.Parent != "" {
			select {
			case ends <- ev:
			default:
			}
		}
	}})
	id := r.start(durable.Spec{System: "root"})
	waitTurn(t, r.st, id, 4) // the parent holds
	if k := kids(t, r.st, id); len(k) == 1 {
		waitTurn(t, r.st, k[0].ID, 2) // the child's run is at work: it called the gate
	}
	r.e.Close(10 * time.Millisecond) // the gate's step is cut off, or never admitted
	var ev agent.Event
	select {
	case ev = <-ends: // the cut-off run ends on its own goroutine, after the shutdown's wait
	case <-time.After(10 * time.Second):
		t.Fatal("no end of the stopped child was announced")
	}
	if rl, f := ev.Relay, ev.Final; !rl.Interrupted || rl.State != instance.Running || rl.Error != "" ||
		f.State != instance.Running || f.Error != "" {
		t.Fatalf("the stopped child's end: relay %+v, record %+v", rl, f)
	}
	st, err := store.Open(context.Background(), r.db, store.Options{}) // DBOS closed the engine's handle
	if err != nil {
		t.Fatal(err)
	}
	k := kids(t, st, id)
	st.Close()
	if len(k) != 1 || k[0].State != instance.Running {
		t.Fatalf("children %+v", k)
	}
	close(g.open)
	r.reopen()
	if in := r.wait(id); in.State != instance.Completed || in.Report != "final after the report" {
		t.Fatalf("root after the restart %+v", in)
	}
}

const foregroundAskScenario = `
rules:
  - match: {system: "subagent working", turn: 1}
    text: "Need a color."
    tool_calls: [{name: ask_parent, input: {question: "Which color?"}}]
  - match: {system: "subagent working"}
    text: "painted {{index .ToolResults 0}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: general-purpose, task: "paint it"}}]
  - match: {turn: 2, tool_result: "Which color"}
    tool_calls: [{name: subagent_answer, input: {id: "{{find \"i-[0-9a-f]+\" (index .ToolResults 0)}}", answer: "blue"}}]
  - match: {turn: 3}
    tool_calls: [{name: subagent_wait, input: {ids: ["{{find \"i-[0-9a-f]+\" (index .ToolResults 0)}}"]}}]
  - match: {turn: 4}
    text: "{{index .ToolResults 0}}"
`

// A foreground child that asks makes its parent's spawn call return
// early with the question (the parent is never stuck); the parent answers,
// the answer starts the child's next run with the answer as its ask_parent
// result, and subagent_wait collects its report.
func TestForegroundChildAsksItsParent(t *testing.T) {
	t.Parallel()
	r := newRig(t, foregroundAskScenario, nil)
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root"})
	in := r.wait(id)
	if in.State != instance.Completed || !strings.Contains(in.Report, "painted blue") || in.Turns != 4 {
		t.Fatalf("root %s %q after %d turns\n%s", in.State, in.Report, in.Turns, transcriptText(t, r.st, id))
	}
	root := transcriptText(t, r.st, id)
	if !strings.Contains(root, `: asking`) || !strings.Contains(root, "question: Which color?") {
		t.Fatalf("the spawn call did not return the question: %s", root)
	}
	k := kids(t, r.st, id)
	if len(k) != 1 || k[0].State != instance.Completed || k[0].Report != "painted blue" || k[0].Turns != 2 {
		t.Fatalf("child %+v", k)
	}
	msgs, _ := r.st.Transcript(ctx, k[0].ID)
	if len(msgs) != 4 || msgs[2].Content[0].Text != "blue" || msgs[2].Content[0].IsError {
		t.Fatalf("child transcript %+v", msgs)
	}
	if runs, _ := r.st.Runs(ctx, k[0].ID); len(runs) != 2 || runs[0].Outcome != "asking" {
		t.Fatalf("child runs %+v", runs)
	}
	noMailLeft(t, r.st, id) // the relay was collected by the wait
}

const steerScenario = `
rules:
  - match: {system: "subagent working", turn: 1}
    tool_calls: [{name: gate, input: {}}]
  - match: {system: "subagent working", last_user: "use green"}
    text: "steered to green"
  - match: {system: "subagent working"}
    text: "not steered"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: general-purpose, task: "paint", background: true}}]
  - match: {turn: 2}
    tool_calls: [{name: subagent_send, input: {id: "{{find \"i-[0-9a-f]+\" (index .ToolResults 0)}}", message: "use green"}}]
  - match: {turn: 3}
    tool_calls: [{name: subagent_wait, input: {ids: ["{{find \"i-[0-9a-f]+\" (index .ToolResults 0)}}"]}}]
  - match: {turn: 4}
    text: "{{index .ToolResults 0}}"
`

// subagent_send steers a running child: it reads the message at its next
// turn.
func TestSendSteersARunningChild(t *testing.T) {
	t.Parallel()
	g := gate{open: make(chan struct{})}
	r := newRig(t, steerScenario, nil, g)
	id := r.start(durable.Spec{System: "root"})
	waitTurn(t, r.st, id, 6) // the send's result is recorded; the child still waits at the gate
	close(g.open)
	in := r.wait(id)
	if in.State != instance.Completed || !strings.Contains(in.Report, "steered to green") {
		t.Fatalf("root %+v", in)
	}
}

const cascadeScenario = `
rules:
  - match: {system: "delegator", last_user: "level 3"}
    text: "d3 partial"
    tool_calls: [{name: gate, input: {}}]
  - match: {system: "delegator", turn: 1, last_user: "level 2"}
    text: "d2 partial"
    tool_calls: [{name: spawn_subagent, input: {subagent_type: delegator, task: "level 3"}}]
  - match: {system: "delegator", turn: 1}
    text: "d1 partial"
    tool_calls: [{name: spawn_subagent, input: {subagent_type: delegator, task: "level 2"}}]
  - match: {system: "delegator"}
    text: "relayed: {{index .ToolResults 0}}"
  - match: {turn: 1}
    text: "root partial"
    tool_calls: [{name: spawn_subagent, input: {subagent_type: delegator, task: "level 1"}}]
  - match: {turn: 2}
    text: "root relayed: {{index .ToolResults 0}}"
`

// Cancelling a root cascades three levels down: every instance ends
// cancelled, each keeps its partial answer, and each parent's transcript
// holds its child's partial relay.
func TestCancelCascadesThreeLevels(t *testing.T) {
	t.Parallel()
	base, _ := agentdef.Load(agentdef.LoadOptions{})
	cat, err := base.With(&agentdef.Definition{Name: "delegator", Description: "delegates", SystemPrompt: "You are a delegator.",
		Tools: []string{agentdef.SpawnTool, "gate"}})
	if err != nil {
		t.Fatal(err)
	}
	g := gate{open: make(chan struct{})}
	r := newRigWith(t, &rig{scenario: cascadeScenario, tools: []tool.Tool{g}, catalog: cat})
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root", MaxDepth: 3})
	var d3 *instance.Record
	waitUntil(t, r.st.EventsWritten, "the instance at depth 3 at its gate", func() bool {
		all, _ := r.st.ListInstances(ctx, store.Filter{Root: id})
		for _, in := range all {
			if in.Depth == 3 && in.State == instance.Running {
				if m, _ := r.st.Transcript(ctx, in.ID); len(m) >= 2 {
					d3 = in
					return true
				}
			}
		}
		return false
	})
	if err := r.ctl.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if in := r.wait(id); in.State != instance.Cancelled {
		t.Fatalf("root %+v", in)
	}
	all, _ := r.st.ListInstances(ctx, store.Filter{Root: id})
	if len(all) != 4 {
		t.Fatalf("%d instances", len(all))
	}
	want := map[int]string{0: "root partial", 1: "d1 partial", 2: "d2 partial", 3: "d3 partial"}
	for _, in := range all {
		if in.State != instance.Cancelled || !in.Incomplete || in.Report != want[in.Depth] {
			t.Errorf("depth %d: %s, incomplete %v, report %q", in.Depth, in.State, in.Incomplete, in.Report)
		}
		if in.Depth < 3 {
			// Its child's partial relay is the result of its spawn call.
			if tt := transcriptText(t, r.st, in.ID); !strings.Contains(tt, want[in.Depth+1]) {
				t.Errorf("depth %d: the child's partial report is not in its transcript", in.Depth)
			}
		}
	}
	if d3.Depth != 3 {
		t.Fatal("no instance reached depth 3")
	}
}

// probe is a read-only tool that counts the calls inside it at once and
// keeps them there until released.
type probe struct {
	mu       sync.Mutex
	cur, max int
	entered  chan struct{}
	release  chan struct{}
}

func (p *probe) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "probe", Description: "probes", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (p *probe) ReadOnly() bool { return true }
func (p *probe) Run(ctx context.Context, _ json.RawMessage) (string, error) {
	p.mu.Lock()
	p.cur++
	p.max = max(p.max, p.cur)
	p.mu.Unlock()
	p.entered <- struct{}{}
	<-p.release
	p.mu.Lock()
	p.cur--
	p.mu.Unlock()
	return "probed", nil
}

// queueLog records the instances that said they wait for a place
// (agent.EventQueued), waking whoever waits on changed as each does.
type queueLog struct {
	mu    sync.Mutex
	ids   map[string]bool
	moved chan struct{}
}

func newQueueLog() *queueLog { return &queueLog{ids: map[string]bool{}, moved: make(chan struct{})} }

// event is a rig's onEvent.
func (q *queueLog) event(ev agent.Event) {
	if ev.Kind != agent.EventQueued {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ids[ev.Instance] = true
	close(q.moved)
	q.moved = make(chan struct{})
}

// changed is closed when an instance next says it waits (eventually's wake).
func (q *queueLog) changed() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.moved
}

func (q *queueLog) has(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ids[id]
}

func (q *queueLog) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ids)
}

func (q *queueLog) clear() {
	q.mu.Lock()
	defer q.mu.Unlock()
	clear(q.ids)
}

const capsScenario = `
rules:
  - match: {system: "subagent working", turn: 1}
    tool_calls: [{name: probe, input: {}}]
  - match: {system: "subagent working"}
    text: "probed"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, repeat: 6, input: {subagent_type: general-purpose, task: "probe {{.I}}"}}]
  - match: {turn: 2}
    text: "all probed"
`

// The caps hold: a parent's max_parallel, and the engine's cap on child
// runs across every parent, whichever is lower.
func TestCapsAreNeverExceeded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name              string
		maxParallel, kids int
		want              int
	}{{"max_parallel", 3, 10, 3}, {"engine cap", 8, 2, 2}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := &probe{entered: make(chan struct{}, 16), release: make(chan struct{})}
			queued := newQueueLog()
			r := newRigWith(t, &rig{scenario: capsScenario, tools: []tool.Tool{p}, maxRuns: c.kids, onEvent: queued.event})
			id := r.start(durable.Spec{System: "root", MaxParallel: c.maxParallel})
			for range c.want {
				<-p.entered
			}
			// Full: every other child has said it waits for a place, and
			// none of them got in.
			waitUntil(t, queued.changed, "the other children waiting for a place", func() bool { return queued.len() >= 6-c.want })
			p.mu.Lock()
			inside := p.cur
			p.mu.Unlock()
			if inside != c.want {
				t.Fatalf("%d children inside at once, want %d", inside, c.want)
			}
			close(p.release)
			for range 6 - c.want {
				<-p.entered
			}
			if in := r.wait(id); in.State != instance.Completed || len(kids(t, r.st, id)) != 6 {
				t.Fatalf("root %+v", in)
			}
			if p.max != c.want {
				t.Errorf("at most %d children ran at once, want %d", p.max, c.want)
			}
		})
	}
}

const backgroundAskScenario = `
rules:
  - match: {system: "subagent working", turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "Which size?"}}]
  - match: {system: "subagent working"}
    text: "cut to {{index .ToolResults 0}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: general-purpose, task: "cut it", background: true}}]
  - match: {turn: 2}
    tool_calls: [{name: subagent_wait, input: {ids: ["{{find \"i-[0-9a-f]+\" (index .ToolResults 0)}}"]}}]
  - match: {turn: 3, tool_result: "asks: Which size"}
    tool_calls: [{name: subagent_answer, input: {id: "{{find \"i-[0-9a-f]+\" (index .ToolResults 0)}}", answer: "large"}}]
  - match: {turn: 4}
    tool_calls: [{name: subagent_wait, input: {ids: ["{{find \"i-[0-9a-f]+\" (index .ToolResults 0)}}"]}}]
  - match: {turn: 5}
    text: "{{index .ToolResults 0}}"
`

// A background child's question reaches its parent through subagent_wait;
// the answer starts its next run, and a second wait collects its report.
func TestBackgroundChildAsksThroughWait(t *testing.T) {
	t.Parallel()
	r := newRig(t, backgroundAskScenario, nil)
	id := r.start(durable.Spec{System: "root"})
	in := r.wait(id)
	if in.State != instance.Completed || !strings.Contains(in.Report, "cut to large") || in.Turns != 5 {
		t.Fatalf("root %s %q after %d turns\n%s", in.State, in.Report, in.Turns, transcriptText(t, r.st, id))
	}
	if k := kids(t, r.st, id); len(k) != 1 || k[0].State != instance.Completed || k[0].Turns != 2 {
		t.Fatalf("child %+v", k)
	}
}

const relayAtTurnScenario = `
rules:
  - match: {system: "subagent working"}
    text: "quick child report"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: general-purpose, task: "be quick", background: true}}]
  - match: {turn: 2}
    tool_calls: [{name: gate, input: {}}]
  - match: {turn: 3, last_user: "quick child report"}
    text: "read it at my next turn"
  - match: {turn: 3}
    text: "never told"
`

// A background child that ends while its parent works reaches it as a
// message at the parent's next turn, without a wait.
func TestBackgroundRelayArrivesAtTheNextTurn(t *testing.T) {
	t.Parallel()
	g := gate{open: make(chan struct{})}
	r := newRig(t, relayAtTurnScenario, nil, g)
	ctx := context.Background()
	id := r.start(durable.Spec{System: "root"})
	// The parent waits at its gate; the child ends and its relay waits in
	// the parent's mailbox.
	waitUntil(t, r.st.EventsWritten, "the child's relay in the root's mailbox", func() bool {
		p, _ := r.st.Pending(ctx, id)
		return len(p) == 1 && p[0].Kind == "relay"
	})
	close(g.open)
	in := r.wait(id)
	if in.State != instance.Completed || in.Report != "read it at my next turn" {
		t.Fatalf("root %+v", in)
	}
	noMailLeft(t, r.st, id)
}

const resumedCapScenario = `
rules:
  - match: {system: "subagent working", turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "go?"}}]
  - match: {system: "subagent working", turn: 2}
    tool_calls: [{name: probe, input: {}}]
  - match: {system: "subagent working"}
    text: "went"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, repeat: 2, input: {subagent_type: general-purpose, task: "part {{.I}}", background: true}}]
  - match: {turn: 2}
    tool_calls: [{name: gate, input: {}}]
default:
  text: "ok"
`

// A parent's max_parallel also holds for its children's later runs, which
// an answer starts each in a tree of its own: two children answered at
// once under max_parallel 1 run one at a time.
func TestMaxParallelHoldsForResumedChildren(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := gate{open: make(chan struct{})}
	p := &probe{entered: make(chan struct{}, 4), release: make(chan struct{})}
	queued := newQueueLog()
	r := newRigWith(t, &rig{scenario: resumedCapScenario, tools: []tool.Tool{g, p}, onEvent: queued.event})
	id := r.start(durable.Spec{System: "root", MaxParallel: 1})
	waitUntil(t, r.st.EventsWritten, "both children asking", func() bool {
		k := kids(t, r.st, id)
		return len(k) == 2 && k[0].State == instance.Asking && k[1].State == instance.Asking
	})
	queued.clear() // the second spawn waited for the first: not this test's wait
	for _, k := range kids(t, r.st, id) {
		if err := r.ctl.Answer(ctx, k.ID, "yes"); err != nil {
			t.Fatal(err)
		}
	}
	<-p.entered
	// The other one says it waits for its parent's slot.
	waitUntil(t, queued.changed, "the other child waiting for its parent's slot", func() bool { return queued.len() == 1 })
	p.mu.Lock()
	inside := p.cur
	p.mu.Unlock()
	if inside != 1 {
		t.Fatalf("%d resumed children inside at once under max_parallel 1", inside)
	}
	close(p.release)
	<-p.entered
	close(g.open)
	if in := r.wait(id); in.State != instance.Completed {
		t.Fatalf("root %+v", in)
	}
	for _, k := range kids(t, r.st, id) {
		if k.State != instance.Completed || k.Report != "went" {
			t.Errorf("child %+v", k)
		}
	}
}

const unwaitedAskScenario = `
rules:
  - match: {system: "subagent working", turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "Which size?"}}]
  - match: {system: "subagent working"}
    text: "cut to {{index .ToolResults 0}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: general-purpose, task: "cut it", background: true}}]
  - match: {tool_result: "cut to"}
    text: "{{index .ToolResults 0}}"
  - match: {tool_result: "^answered"}
    tool_calls: [{name: subagent_wait, input: {ids: ["{{find \"i-[0-9a-f]+\" (index .ToolResults 0)}}"]}}]
  - match: {last_user: "asks: Which size"}
    tool_calls: [{name: subagent_answer, input: {id: "{{find \"i-[0-9a-f]+\" .LastUser}}", answer: "small"}}]
  - match: {turn: 2}
    text: "nothing else to do"
`

// A background child's question reaches a parent that does not wait for
// it: at the parent's next turn boundary, or, when the parent has ended
// its turn first, as it holds at its end. Either way it reads the
// question and answers it.
func TestUnwaitedQuestionReachesTheParent(t *testing.T) {
	t.Parallel()
	r := newRig(t, unwaitedAskScenario, nil)
	id := r.start(durable.Spec{System: "root"})
	in := r.wait(id)
	if in.State != instance.Completed || !strings.Contains(in.Report, "cut to small") {
		t.Fatalf("root %s %q\n%s", in.State, in.Report, transcriptText(t, r.st, id))
	}
	noMailLeft(t, r.st, id)
}

const ignoredAskScenario = `
rules:
  - match: {system: "subagent working"}
    tool_calls: [{name: ask_parent, input: {question: "Which size?"}}]
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: general-purpose, task: "cut it", background: true}}]
default:
  text: "not answering"
`

// A parent that ends without answering its child's question cancels it:
// nothing would answer it any more.
func TestIgnoredQuestionIsCancelledWithItsTree(t *testing.T) {
	t.Parallel()
	r := newRig(t, ignoredAskScenario, nil)
	id := r.start(durable.Spec{System: "root"})
	if in := r.wait(id); in.State != instance.Completed {
		t.Fatalf("root %+v", in)
	}
	if k := kids(t, r.st, id); len(k) != 1 || k[0].State != instance.Cancelled {
		t.Fatalf("child %+v", k[0])
	}
	if !strings.Contains(transcriptText(t, r.st, id), "asks: Which size?") {
		t.Errorf("the parent was never told of the question")
	}
}

const slotCancelScenario = `
rules:
  - match: {system: "subagent working", turn: 1}
    tool_calls: [{name: gate, input: {}}]
  - match: {system: "subagent working"}
    text: "done"
  - match: {turn: 1}
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: general-purpose, task: "one"}}
      - {name: spawn_subagent, input: {subagent_type: general-purpose, task: "two"}}
  - match: {turn: 2}
    text: "{{index .ToolResults 1}}"
`

// A cancel that reaches a child while it waits for a place ends it there,
// before its first model call.
func TestCancelWhileWaitingForAPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := gate{open: make(chan struct{})}
	queued := newQueueLog()
	r := newRigWith(t, &rig{scenario: slotCancelScenario, tools: []tool.Tool{g}, maxRuns: 1, onEvent: queued.event})
	id := r.start(durable.Spec{System: "root"})
	// Whichever child did not get the one place waits for it.
	var waiting string
	waitUntil(t, queued.changed, "a child waiting for the place", func() bool {
		for _, k := range kids(t, r.st, id) {
			if queued.has(k.ID) {
				waiting = k.ID
			}
		}
		return waiting != ""
	})
	if err := r.ctl.Cancel(ctx, waiting); err != nil {
		t.Fatal(err)
	}
	close(g.open)
	if in := r.wait(id); in.State != instance.Completed {
		t.Fatalf("root %s %q", in.State, in.Report)
	}
	in, _ := r.st.GetInstance(ctx, waiting)
	if in.State != instance.Cancelled || in.Turns != 0 || in.Usage.Total() != 0 {
		t.Fatalf("the cancelled child ran: %+v", in)
	}
}

const durableFanOutScenario = `
rules:
  - match: {system: "read-only explorer", last_user: "^count"}
    text: "counted"
  - match: {system: "read-only explorer"}
    text: "summed: {{.LastUser}}"
  - match: {turn: 1}
    tool_calls:
      - name: fan_out
        input:
          tasks:
            - {id: a, subagent_type: explorer, task: "count a"}
            - {id: b, subagent_type: explorer, task: "count b"}
            - {id: sum, subagent_type: explorer, task: "sum up", depends_on: [a, b]}
  - match: {turn: 2}
    text: "{{index .ToolResults 0}}"
`

// fan_out's tasks are children of their own, each a workflow named after
// the call and its task id, recorded like any spawn's.
func TestFanOutUnderTheEngine(t *testing.T) {
	t.Parallel()
	r := newRig(t, durableFanOutScenario, nil)
	id := r.start(durable.Spec{System: "root"})
	in := r.wait(id)
	if in.State != instance.Completed || !strings.Contains(in.Report, "## sum\nsummed:") || strings.Count(in.Report, "counted") < 3 {
		t.Fatalf("root %s %q", in.State, in.Report)
	}
	k := kids(t, r.st, id)
	if len(k) != 3 {
		t.Fatalf("%d children", len(k))
	}
	for _, c := range k {
		if c.State != instance.Completed || c.WorkflowID != "deputy-"+c.ID {
			t.Errorf("child %+v", c)
		}
	}
}

const failedStartScenario = `
rules:
  - match: {system: "subagent working"}
    text: "never asked: its run fails before its first turn"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: general-purpose, task: "work", background: BACKGROUND}}]
  - match: {turn: 2}
    text: "spawned: {{index .ToolResults 0}}"
  - match: {turn: 3}
    text: "relayed: {{.LastUser}}"
`

// A child's run whose own step fails (its store write refused: here the
// failpoint) ends the child failed with the reason, and its parent learns
// of it: through the spawn call's result in the foreground, through the
// relay in the background. Before, the child's workflow ended in error,
// the instance stayed created, and a parent holding for it waited for ever.
func TestChildWhoseStepFailsEndsFailed(t *testing.T) {
	t.Parallel()
	for _, background := range []bool{false, true} {
		t.Run(map[bool]string{false: "foreground", true: "background"}[background], func(t *testing.T) {
			t.Parallel()
			sc := strings.Replace(failedStartScenario, "BACKGROUND", map[bool]string{false: "false", true: "true"}[background], 1)
			r := newRigWith(t, &rig{scenario: sc, fail: "error:child:start"})
			id := r.start(durable.Spec{System: "root"})
			in := r.wait(id)
			if in.State != instance.Completed {
				t.Fatalf("root %+v", in)
			}
			k := kids(t, r.st, id)
			if len(k) != 1 || k[0].State != instance.Failed || !strings.Contains(k[0].Error, "failpoint") {
				t.Fatalf("child %+v", k)
			}
			runs, err := r.st.Runs(context.Background(), k[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, run := range runs {
				if run.EndedAt.IsZero() {
					t.Errorf("child run %+v left open", run)
				}
			}
			// The root heard that the child failed, and why: in the spawn
			// call's result (foreground) or in the relay (background), at
			// whichever turn the timing brought it; not in which words.
			msgs, err := r.st.Transcript(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			heard := false
			for _, m := range msgs {
				for _, b := range m.Content {
					heard = heard || m.Role == llm.User && strings.Contains(b.Text, k[0].ID) && strings.Contains(b.Text, "failed")
				}
			}
			if all := transcriptText(t, r.st, id); !heard || !strings.Contains(all, "failpoint") {
				t.Fatalf("the root never heard that child %s failed, and why: %s", k[0].ID, all)
			}
			noMailLeft(t, r.st, id)
		})
	}
}

// relayPosted reports whether child id's relay was posted to its parent's
// mailbox, read by now or not: a parent holding for its children takes a
// child ended with no run open as one whose relay is there.
func relayPosted(st *store.Store, id string) error {
	ctx := context.Background()
	in, err := st.GetInstance(ctx, id)
	if err != nil {
		return err
	}
	var n int
	err = st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM deputy_mailbox WHERE instance_id = ? AND sender = ? AND kind = 'relay'`,
		in.Parent, id).Scan(&n)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("child %s ended %s with no run open, and %d relays of it were posted to its parent", id, in.State, n)
	}
	return nil
}

// endHook is a rig's endWritten that checks, at the moment a child's end
// is written where no run of it is open, that its relay is posted already,
// and then holds the child there until let is called: whatever its parent
// does meanwhile, it does with the child ended and nothing more to come.
func endHook(st **store.Store) (hook func(string), checked <-chan error, let func()) {
	release, seen := make(chan struct{}), make(chan error, 8)
	var once sync.Once
	return func(id string) {
		seen <- relayPosted(*st, id)
		<-release
	}, seen, func() { once.Do(func() { close(release) }) }
}

// A background child that fails before its first run starts ends with no
// run open, and a parent holding for its children takes such a child as
// settled, its relay posted: the relay must be written with the end, or
// the parent, coming between the two, completes without ever reading it
// (a silent drop, which this once did under load). The hook stops the
// child just after its end is written, until the root has ended.
func TestRelayIsWrittenWithAnEndNoRunCarries(t *testing.T) {
	t.Parallel()
	var st *store.Store
	hook, checked, let := endHook(&st)
	sc := strings.Replace(failedStartScenario, "BACKGROUND", "true", 1)
	r := newRigWith(t, &rig{scenario: sc, fail: "error:child:start", endWritten: hook})
	t.Cleanup(let) // before the engine's Close, which waits for the child's step
	st = r.st
	id := r.start(durable.Spec{System: "root"})
	in := r.wait(id)
	let()
	if err := <-checked; err != nil {
		t.Error(err)
	}
	k := kids(t, r.st, id)
	if in.State != instance.Completed || len(k) != 1 || k[0].State != instance.Failed {
		t.Fatalf("root %+v, children %+v", in, k)
	}
	// At its turn-2 inbox or in its hold, as the timing has it.
	if all := transcriptText(t, r.st, id); !strings.Contains(all, "has ended; its report") ||
		!strings.Contains(all, k[0].ID) || !strings.Contains(all, "failpoint") {
		t.Fatalf("the root completed without reading the relay of its failed child: %s", all)
	}
	noMailLeft(t, r.st, id)
}

// A child cancelled while no run carries it (recorded, its run not begun)
// ends with its relay in its parent's mailbox in the same write, for the
// same reason.
func TestRelayIsWrittenWithACancelNoRunCarries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var st *store.Store
	hook, checked, let := endHook(&st)
	r := newRigWith(t, &rig{scenario: backgroundScenario, endWritten: hook})
	t.Cleanup(let)
	st = r.st
	for _, in := range []*instance.Record{{ID: "i-root", Type: "root", Task: "t"},
		{ID: "i-kid", Parent: "i-root", Type: "general-purpose", Task: "t"}} {
		if err := r.st.CreateInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- r.ctl.Cancel(ctx, "i-kid") }()
	if err := <-checked; err != nil {
		t.Error(err)
	}
	let()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := relayPosted(r.st, "i-kid"); err != nil {
		t.Fatal(err)
	}
}

// A root whose own step fails (here its finish step's write, refused) ends
// failed with the reason, as a child does, and its run with it: a run left
// open would keep Settle (deputy's Wait) waiting for ever.
func TestRootWhoseStepFailsEndsFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRigWith(t, &rig{scenario: "rules:\n  - text: \"done\"\n", fail: "error:finish"})
	id := r.start(durable.Spec{System: "root"})
	if in := r.wait(id); in.State != instance.Failed || in.StopReason != string(loop.StopStepError) ||
		!strings.Contains(in.Error, "failpoint") {
		t.Fatalf("root %+v", in)
	}
	runs, err := r.st.Runs(ctx, id)
	if err != nil || len(runs) != 1 || runs[0].EndedAt.IsZero() {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if in, err := r.e.Settle(sctx, id); err != nil || in.State != instance.Failed {
		t.Fatalf("settle: %+v, %v", in, err)
	}
}

// A child's end is recorded by its end step too: when the recorder's
// write of it failed (here the failpoint; in CI once, a session the server
// ended), the child still ends, and its parent does not hold for it for
// ever. The root, whose recorder failed, ends failed and says why.
func TestChildEndRecordedWhenTheRecorderFailed(t *testing.T) {
	t.Parallel()
	open := make(chan struct{})
	close(open) // the child's gate lets it through at once
	r := newRigWith(t, &rig{scenario: backgroundScenario, tools: []tool.Tool{gate{open: open}}, fail: "error:record-end"})
	id := r.start(durable.Spec{System: "root"})
	in := r.wait(id)
	k := kids(t, r.st, id)
	if len(k) != 1 || k[0].State != instance.Completed || k[0].Report != "child report" {
		t.Fatalf("child %+v", k)
	}
	if in.State != instance.Failed || !strings.Contains(in.Error, "recording the run failed") ||
		!strings.Contains(in.Error, "failpoint") {
		t.Fatalf("root %+v", in)
	}
}

const damagedSpecScenario = `
rules:
  - match: {system: "subagent working"}
    text: "child done"
  - match: {turn: 1}
    tool_calls: [{name: gate, input: {}}]
  - match: {turn: 2}
    tool_calls: [{name: spawn_subagent, input: {subagent_type: general-purpose, task: "work"}}]
  - match: {turn: 3}
    text: "spawned: {{index .ToolResults 0}}"
`

// A child spawned after its root's recorded spec was damaged (the row no
// longer decodes) ends failed, saying so, rather than running under a cap
// on its parent's children (max_parallel) it could not read; its parent
// hears why. The root's own run goes on from the spec it read as it
// started.
func TestChildUnderADamagedRootSpecEndsFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := gate{open: make(chan struct{})}
	r := newRig(t, damagedSpecScenario, nil, g)
	id := r.start(durable.Spec{System: "root", MaxParallel: 2})
	waitTurn(t, r.st, id, 2) // the root waits at its gate
	// Valid JSON (the column holds any), not a spec.
	if _, err := r.st.DB().ExecContext(ctx, `UPDATE deputy_instances SET definition = ? WHERE id = ?`,
		`{"max_parallel": "two"}`, id); err != nil {
		t.Fatal(err)
	}
	close(g.open)
	in := r.wait(id)
	if in.State != instance.Completed || !strings.Contains(in.Report, "its spec does not decode") {
		t.Fatalf("root %s %q", in.State, in.Report)
	}
	k := kids(t, r.st, id)
	if len(k) != 1 || k[0].State != instance.Failed || !strings.Contains(k[0].Error, "its spec does not decode") {
		t.Fatalf("child %+v", k)
	}
	noMailLeft(t, r.st, id)
}
