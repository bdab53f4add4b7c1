package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

// legal is the state machine as the suite expects it, written out pair by
// pair rather than derived from the package, so a change to the table in
// instance/state.go must be made here too, on purpose.
var legal = map[[2]instance.State]bool{}

func init() {
	active := []instance.State{instance.Created, instance.Running, instance.Asking, instance.Paused}
	ends := []instance.State{instance.Completed, instance.Failed, instance.TimedOut, instance.Cancelled}
	for _, from := range active {
		for _, to := range ends {
			legal[[2]instance.State{from, to}] = true
		}
	}
	for _, p := range [][2]instance.State{
		{instance.Created, instance.Running},
		{instance.Running, instance.Asking}, {instance.Asking, instance.Running},
		{instance.Running, instance.Paused}, {instance.Paused, instance.Running},
		{instance.Asking, instance.Paused},
	} {
		legal[p] = true
	}
}

func testLegalTransitions(t *testing.T, h Harness) {
	e := newEnv(t, h)
	n := 0
	for _, from := range instance.States() {
		for _, to := range instance.States() {
			if !legal[[2]instance.State{from, to}] {
				continue
			}
			n++
			if !instance.CanMove(from, to) {
				t.Errorf("CanTransition(%s, %s) = false, want true", from, to)
			}
			id := fmt.Sprintf("%s-%s", from, to)
			e.createIn(id, from)
			before := len(e.transitions(id))
			e.clock.Advance(time.Second)
			cause := "because " + id
			noErr(t, "transition "+id, e.s.Transition(e.ctx, id, to, cause))
			in := e.get(id)
			if in.State != to || !in.UpdatedAt.Equal(e.clock.Now()) {
				t.Fatalf("%s: after transition: state %s, updated %v", id, in.State, in.UpdatedAt)
			}
			if to.Terminal() != !in.EndedAt.IsZero() || (to.Terminal() && !in.EndedAt.Equal(e.clock.Now())) {
				t.Fatalf("%s: ended_at %v", id, in.EndedAt)
			}
			ts := e.transitions(id)
			last := ts[len(ts)-1]
			if len(ts) != before+1 || last.Seq != before+1 || last.From != from || last.To != to ||
				last.Cause != cause || !last.At.Equal(e.clock.Now()) || last.InstanceID != id {
				t.Fatalf("%s: recorded %+v (of %d, was %d)", id, last, len(ts), before)
			}
		}
	}
	if n != 22 {
		t.Fatalf("%d legal transitions, want 22", n)
	}
	// A whole lifecycle, recorded in order.
	e.create("life", "")
	for _, s := range []instance.State{instance.Running, instance.Asking, instance.Running, instance.Paused, instance.Running, instance.Asking, instance.Paused, instance.Running, instance.Completed} {
		e.move("life", s)
	}
	ts := e.transitions("life")
	want := []instance.State{instance.Created, instance.Running, instance.Asking, instance.Running, instance.Paused, instance.Running, instance.Asking, instance.Paused, instance.Running, instance.Completed}
	if len(ts) != len(want) {
		t.Fatalf("lifecycle: %d transitions, want %d", len(ts), len(want))
	}
	for i, tr := range ts {
		var from instance.State
		if i > 0 {
			from = want[i-1]
		}
		if tr.Seq != i+1 || tr.From != from || tr.To != want[i] {
			t.Fatalf("lifecycle transition %d: %+v", i, tr)
		}
	}
}

func testIllegalTransitions(t *testing.T, h Harness) {
	e := newEnv(t, h)
	targets := append(instance.States(), "bogus", "")
	n := 0
	for _, from := range instance.States() {
		id := "from-" + string(from)
		e.createIn(id, from)
		before := e.transitions(id)
		for _, to := range targets {
			if legal[[2]instance.State{from, to}] {
				continue
			}
			n++
			if instance.CanMove(from, to) {
				t.Errorf("CanTransition(%s, %q) = true, want false", from, to)
			}
			err := e.s.Transition(e.ctx, id, to, "illegal")
			wantErr(t, fmt.Sprintf("%s → %q", from, to), err, instance.ErrIllegalTransition)
			var te *instance.TransitionError
			if !errors.As(err, &te) || te.ID != id || te.From != from || te.To != to {
				t.Fatalf("%s → %q: error %v is not a *TransitionError naming both states", from, to, err)
			}
			if from.Terminal() != errors.Is(err, instance.ErrTerminal) {
				t.Fatalf("%s → %q: errors.Is(ErrTerminal) = %v", from, to, errors.Is(err, instance.ErrTerminal))
			}
		}
		if in := e.get(id); in.State != from {
			t.Fatalf("refused transitions moved %s to %s", id, in.State)
		}
		if after := e.transitions(id); len(after) != len(before) {
			t.Fatalf("refused transitions of %s were recorded: %+v", id, after[len(before):])
		}
	}
	// 8 states × 10 targets, less the 22 legal pairs.
	if n != 8*10-22 {
		t.Fatalf("%d illegal pairs tried, want %d", n, 8*10-22)
	}
}

func testTerminalNeverChanges(t *testing.T, h Harness) {
	e := newEnv(t, h)
	for _, end := range []instance.State{instance.Completed, instance.Failed, instance.TimedOut, instance.Cancelled} {
		id := "ended-" + string(end)
		e.createIn(id, end)
		noErr(t, "append before", e.s.AppendMessages(e.ctx, id, 0, 0, nil))
		before := e.get(id)
		e.clock.Advance(time.Minute)
		for _, to := range instance.States() {
			wantErr(t, id+" → "+string(to), e.s.Transition(e.ctx, id, to, "again"), instance.ErrTerminal)
		}
		for _, other := range []instance.State{instance.Completed, instance.Failed, instance.TimedOut, instance.Cancelled} {
			if other == end {
				continue
			}
			wantErr(t, "finish "+id+" as "+string(other), e.s.Finish(e.ctx, id, store.Result{State: other}), instance.ErrTerminal)
		}
		wantErr(t, "finish "+id+" with another result", e.s.Finish(e.ctx, id, store.Result{State: end, Report: "late"}), instance.ErrTerminal)
		wantErr(t, "progress of "+id, e.s.UpdateProgress(e.ctx, id, 9, 9, llm.Usage{InputTokens: 1}, nil), instance.ErrTerminal)
		wantErr(t, "workflow of "+id, e.s.SetWorkflow(e.ctx, id, "wf-late"), instance.ErrTerminal)
		_, err := e.s.StartRun(e.ctx, id, "wf-late")
		wantErr(t, "run of "+id, err, instance.ErrTerminal)
		wantErr(t, "messages of "+id, e.s.AppendMessages(e.ctx, id, 1, 0, []llm.Message{llm.UserText("late")}), instance.ErrTerminal)
		after := e.get(id)
		if fmt.Sprint(*after) != fmt.Sprint(*before) {
			t.Fatalf("%s changed after it ended:\nbefore %+v\nafter  %+v", id, before, after)
		}
	}
}

func testConcurrentTransitions(t *testing.T, h Harness) {
	e := newEnv(t, h)
	// Racing callers whose moves exclude each other: once one has won, every
	// other move is illegal from the state it left (a terminal state, or the
	// target itself). Transition serialises them, so exactly one wins and
	// every loser is told the winner's state. Half the racers to an end use
	// Finish, which must race the same way.
	ends := []instance.State{instance.Completed, instance.Failed, instance.TimedOut, instance.Cancelled}
	cases := []struct {
		from    instance.State
		targets []instance.State
	}{
		{instance.Running, append(ends, ends...)},
		{instance.Asking, append(ends, ends...)},
		{instance.Paused, ends},
		{instance.Created, []instance.State{instance.Running, instance.Running, instance.Running, instance.Running, instance.Running, instance.Running}},
		{instance.Asking, []instance.State{instance.Running, instance.Running, instance.Running, instance.Running}},
		{instance.Running, []instance.State{instance.Paused, instance.Paused, instance.Paused, instance.Paused}},
	}
	for round := 0; round < 4; round++ {
		for ci, c := range cases {
			id := fmt.Sprintf("race-%d-%d-%s", round, ci, c.from)
			e.createIn(id, c.from)
			before := len(e.transitions(id))
			start := make(chan struct{})
			errs := make([]error, len(c.targets))
			var wg sync.WaitGroup
			for i, to := range c.targets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					cause := fmt.Sprintf("caller %d", i)
					if to.Terminal() && i%2 == 1 {
						errs[i] = e.s.Finish(e.ctx, id, store.Result{State: to, Cause: cause, Report: cause})
					} else {
						errs[i] = e.s.Transition(e.ctx, id, to, cause)
					}
				}()
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				if err == nil {
					if winner >= 0 {
						t.Fatalf("%s: callers %d and %d both won", id, winner, i)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("%s: nobody won: %v", id, errs)
			}
			for i, err := range errs {
				var te *instance.TransitionError
				if i != winner && (!errors.As(err, &te) || te.From != c.targets[winner]) {
					t.Fatalf("%s: loser %d: %v (want a TransitionError from the winner's state %s)", id, i, err, c.targets[winner])
				}
			}
			ts := e.transitions(id)
			if len(ts) != before+1 {
				t.Fatalf("%s: %d transitions recorded, want 1", id, len(ts)-before)
			}
			last := ts[len(ts)-1]
			if in := e.get(id); in.State != c.targets[winner] || last.To != c.targets[winner] || last.Cause != fmt.Sprintf("caller %d", winner) {
				t.Fatalf("%s: winner %d (%s), but state %s and record %+v", id, winner, c.targets[winner], in.State, last)
			}
		}
	}
}

func testFinish(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.createIn("i", instance.Running)
	e.clock.Advance(time.Minute)
	r := store.Result{
		State: instance.Completed, StopReason: "end_turn", Incomplete: true, Report: "found 3 files", Error: "",
		Usage: llm.Usage{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 30, CacheWriteTokens: 40},
		Cost:  ptr(1.5), Turns: 7, ToolCalls: 12, Artifacts: []string{"a.md", "b.md"},
	}
	noErr(t, "finish", e.s.Finish(e.ctx, "i", r))
	in := e.get("i")
	if in.State != instance.Completed || in.StopReason != "end_turn" || !in.Incomplete || in.Report != "found 3 files" ||
		in.Usage != r.Usage || in.Cost == nil || *in.Cost != 1.5 || in.Turns != 7 || in.ToolCalls != 12 ||
		!slices.Equal(in.Artifacts, r.Artifacts) || !in.EndedAt.Equal(Epoch.Add(time.Minute)) || !in.UpdatedAt.Equal(in.EndedAt) {
		t.Fatalf("finished: %+v", in)
	}
	ts := e.transitions("i")
	if last := ts[len(ts)-1]; last.From != instance.Running || last.To != instance.Completed || last.Cause != "end_turn" {
		t.Fatalf("finish recorded %+v (the cause defaults to the stop reason)", last)
	}
	// The same result again (a replay after a crash) is a no-op.
	e.clock.Advance(time.Minute)
	noErr(t, "finish again", e.s.Finish(e.ctx, "i", r))
	if got := e.get("i"); !got.EndedAt.Equal(in.EndedAt) || len(e.transitions("i")) != len(ts) {
		t.Fatal("a repeated finish changed the instance")
	}
	r2 := r
	r2.Cost = ptr(1.6)
	wantErr(t, "finish with another cost", e.s.Finish(e.ctx, "i", r2), instance.ErrTerminal)

	// Failed with an error, from asking, unpriced, with an explicit cause.
	e.createIn("f", instance.Asking)
	noErr(t, "finish failed", e.s.Finish(e.ctx, "f", store.Result{State: instance.Failed, Cause: "parent gone", Error: "boom"}))
	if got := e.get("f"); got.State != instance.Failed || got.Error != "boom" || got.Cost != nil || got.Artifacts != nil {
		t.Fatalf("failed: %+v", got)
	}
	if ts := e.transitions("f"); ts[len(ts)-1].Cause != "parent gone" {
		t.Fatalf("cause: %+v", ts[len(ts)-1])
	}

	e.createIn("n", instance.Running)
	wantErr(t, "finish as paused", e.s.Finish(e.ctx, "n", store.Result{State: instance.Paused}), instance.ErrIllegalTransition)
	if got := e.get("n"); got.State != instance.Running {
		t.Fatalf("a refused finish moved the instance to %s", got.State)
	}
}

// Finish posts Tell's mail in the end's transaction, made from the record
// as it ended; a Finish refused, or one whose mail cannot be posted,
// writes neither; a repeat of the same end posts nothing more.
func testFinishTells(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("p", "")
	e.createIn("k", instance.Running)
	e.clock.Advance(time.Minute)
	tell := func(to string) func(*instance.Record) store.Mail {
		return func(ended *instance.Record) store.Mail {
			return store.Mail{InstanceID: to, Sender: ended.ID, Kind: "relay", Key: "relay-" + ended.ID,
				Body: fmt.Sprintf("%s %s after %s", ended.ID, ended.State, ended.Duration())}
		}
	}
	r := store.Result{State: instance.Failed, Error: "boom", Tell: tell("nobody")}
	wantErr(t, "finish telling an unknown instance", e.s.Finish(e.ctx, "k", r), store.ErrNotFound)
	if got := e.get("k"); got.State != instance.Running {
		t.Fatalf("a finish whose mail failed ended the instance: %+v", got)
	}
	r.From = instance.Asking
	r.Tell = tell("p")
	wantErr(t, "finish from another state", e.s.Finish(e.ctx, "k", r), instance.ErrIllegalTransition)
	r.From = ""
	noErr(t, "finish", e.s.Finish(e.ctx, "k", r))
	noErr(t, "finish again", e.s.Finish(e.ctx, "k", r))
	mail, err := e.s.Pending(e.ctx, "p")
	noErr(t, "pending", err)
	if len(mail) != 1 || mail[0].Body != "k failed after 1m0s" || mail[0].Sender != "k" {
		t.Fatalf("the parent's mail %+v", mail)
	}
}

// A row whose artifact list does not decode (damaged outside the store,
// which writes only lists) reads with no artifacts and a problem saying
// so, in a get and a list alike, rather than failing either: the record
// must still reach its parent and the list must still show the others.
func testDamagedArtifacts(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.createIn("i", instance.Running)
	e.create("ok", "")
	noErr(t, "finish", e.s.Finish(e.ctx, "i", store.Result{State: instance.Completed, Report: "wrote a.go", Artifacts: []string{"a.go"}}))
	if got := e.get("i"); !slices.Equal(got.Artifacts, []string{"a.go"}) || got.Problems != nil {
		t.Fatalf("sound row: artifacts %q, problems %q", got.Artifacts, got.Problems)
	}
	// Valid JSON, not a list; the placeholder-free statement suits both dialects.
	if _, err := e.raw().ExecContext(e.ctx, `UPDATE deputy_instances SET artifacts = '{"a.go": true}' WHERE id = 'i'`); err != nil {
		t.Fatal(err)
	}
	got := e.get("i")
	if got.Artifacts != nil || len(got.Problems) != 1 || !strings.Contains(got.Problems[0], "artifacts") ||
		got.Report != "wrote a.go" || got.State != instance.Completed {
		t.Fatalf("damaged row: %+v", got)
	}
	list, err := e.s.ListInstances(e.ctx, store.Filter{})
	noErr(t, "list", err)
	if len(list) != 2 || list[0].Problems == nil || list[1].Problems != nil {
		t.Fatalf("list with a damaged row: %+v", list)
	}
}

// failHere is the cause, role or kind that the atomicity test's triggers
// refuse, failing a transaction after its first writes.
const failHere = "fail-here"

func testAtomicity(t *testing.T, h Harness) {
	e := newEnv(t, h)
	raw := e.raw()
	var ddl []string
	switch e.s.Dialect() {
	case store.SQLite:
		ddl = []string{
			`CREATE TRIGGER fail_transition BEFORE INSERT ON deputy_transitions WHEN NEW.cause = '` + failHere + `'
				BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`,
			`CREATE TRIGGER fail_message BEFORE INSERT ON deputy_messages WHEN NEW.role = '` + failHere + `'
				BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`,
		}
	case store.Postgres:
		ddl = []string{
			`CREATE FUNCTION fail_here() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'refused by the test trigger'; END $$`,
			`CREATE TRIGGER fail_transition BEFORE INSERT ON deputy_transitions
				FOR EACH ROW WHEN (NEW.cause = '` + failHere + `') EXECUTE FUNCTION fail_here()`,
			`CREATE TRIGGER fail_message BEFORE INSERT ON deputy_messages
				FOR EACH ROW WHEN (NEW.role = '` + failHere + `') EXECUTE FUNCTION fail_here()`,
		}
	default:
		t.Fatalf("no triggers for dialect %s", e.s.Dialect())
	}
	for _, q := range ddl {
		if _, err := raw.ExecContext(e.ctx, q); err != nil {
			t.Fatalf("install trigger: %v", err)
		}
	}

	e.createIn("i", instance.Running)
	noErr(t, "progress", e.s.UpdateProgress(e.ctx, "i", 2, 1, llm.Usage{InputTokens: 5}, nil))
	before := e.get("i")
	e.clock.Advance(time.Hour)
	// Finish writes the instance row first, then the transition: the
	// trigger fails the second write, and the first must not survive.
	err := e.s.Finish(e.ctx, "i", store.Result{State: instance.Completed, Cause: failHere, Report: "r", Turns: 9, Usage: llm.Usage{InputTokens: 50}, Cost: ptr(2.0)})
	if err == nil {
		t.Fatal("finish with a failing transition record: no error")
	}
	if after := e.get("i"); fmt.Sprint(*after) != fmt.Sprint(*before) {
		t.Fatalf("a failed finish left a half-written instance:\nbefore %+v\nafter  %+v", before, after)
	}
	if err := e.s.Transition(e.ctx, "i", instance.Paused, failHere); err == nil {
		t.Fatal("transition with a failing record: no error")
	}
	if after := e.get("i"); after.State != instance.Running {
		t.Fatalf("a failed transition left state %s", after.State)
	}
	if ts := e.transitions("i"); len(ts) != 2 {
		t.Fatalf("failed transitions were recorded: %+v", ts)
	}
	// The instance is not stuck: the same moves with another cause work.
	noErr(t, "finish", e.s.Finish(e.ctx, "i", store.Result{State: instance.Completed, Cause: "done"}))

	// A batch of messages whose third is refused stores none of them.
	e.createIn("m", instance.Running)
	batch := []llm.Message{llm.UserText("one"), {Role: llm.Assistant, Content: []llm.Block{llm.Text("two")}}, {Role: failHere, Content: []llm.Block{llm.Text("three")}}}
	if err := e.s.AppendMessages(e.ctx, "m", 1, 0, batch); err == nil {
		t.Fatal("append with a refused message: no error")
	}
	if got, err := e.s.Transcript(e.ctx, "m"); err != nil || len(got) != 0 {
		t.Fatalf("a failed append left %d messages (err %v)", len(got), err)
	}
	noErr(t, "append the first two", e.s.AppendMessages(e.ctx, "m", 1, 0, batch[:2]))
}
