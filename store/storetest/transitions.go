package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

// legal is the state machine as the suite expects it, written out pair by
// pair rather than derived from the package, so a change to the table in
// store/state.go must be made here too, on purpose.
var legal = map[[2]store.State]bool{}

func init() {
	active := []store.State{store.Created, store.Running, store.Asking, store.Paused}
	ends := []store.State{store.Completed, store.Failed, store.TimedOut, store.Cancelled}
	for _, from := range active {
		for _, to := range ends {
			legal[[2]store.State{from, to}] = true
		}
	}
	for _, p := range [][2]store.State{
		{store.Created, store.Running},
		{store.Running, store.Asking}, {store.Asking, store.Running},
		{store.Running, store.Paused}, {store.Paused, store.Running},
		{store.Asking, store.Paused},
	} {
		legal[p] = true
	}
}

func testLegalTransitions(t *testing.T, h Harness) {
	e := newEnv(t, h)
	n := 0
	for _, from := range store.States() {
		for _, to := range store.States() {
			if !legal[[2]store.State{from, to}] {
				continue
			}
			n++
			if !store.CanTransition(from, to) {
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
	for _, s := range []store.State{store.Running, store.Asking, store.Running, store.Paused, store.Running, store.Asking, store.Paused, store.Running, store.Completed} {
		e.move("life", s)
	}
	ts := e.transitions("life")
	want := []store.State{store.Created, store.Running, store.Asking, store.Running, store.Paused, store.Running, store.Asking, store.Paused, store.Running, store.Completed}
	if len(ts) != len(want) {
		t.Fatalf("lifecycle: %d transitions, want %d", len(ts), len(want))
	}
	for i, tr := range ts {
		var from store.State
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
	targets := append(store.States(), "bogus", "")
	n := 0
	for _, from := range store.States() {
		id := "from-" + string(from)
		e.createIn(id, from)
		before := e.transitions(id)
		for _, to := range targets {
			if legal[[2]store.State{from, to}] {
				continue
			}
			n++
			if store.CanTransition(from, to) {
				t.Errorf("CanTransition(%s, %q) = true, want false", from, to)
			}
			err := e.s.Transition(e.ctx, id, to, "illegal")
			wantErr(t, fmt.Sprintf("%s → %q", from, to), err, store.ErrIllegalTransition)
			var te *store.TransitionError
			if !errors.As(err, &te) || te.ID != id || te.From != from || te.To != to {
				t.Fatalf("%s → %q: error %v is not a *TransitionError naming both states", from, to, err)
			}
			if from.Terminal() != errors.Is(err, store.ErrTerminal) {
				t.Fatalf("%s → %q: errors.Is(ErrTerminal) = %v", from, to, errors.Is(err, store.ErrTerminal))
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
	for _, end := range []store.State{store.Completed, store.Failed, store.TimedOut, store.Cancelled} {
		id := "ended-" + string(end)
		e.createIn(id, end)
		noErr(t, "append before", e.s.AppendMessages(e.ctx, id, 0, 0, nil))
		before := e.get(id)
		e.clock.Advance(time.Minute)
		for _, to := range store.States() {
			wantErr(t, id+" → "+string(to), e.s.Transition(e.ctx, id, to, "again"), store.ErrTerminal)
		}
		for _, other := range []store.State{store.Completed, store.Failed, store.TimedOut, store.Cancelled} {
			if other == end {
				continue
			}
			wantErr(t, "finish "+id+" as "+string(other), e.s.Finish(e.ctx, id, store.Result{State: other}), store.ErrTerminal)
		}
		wantErr(t, "finish "+id+" with another result", e.s.Finish(e.ctx, id, store.Result{State: end, Report: "late"}), store.ErrTerminal)
		wantErr(t, "progress of "+id, e.s.UpdateProgress(e.ctx, id, 9, 9, llm.Usage{InputTokens: 1}, nil), store.ErrTerminal)
		wantErr(t, "workflow of "+id, e.s.SetWorkflow(e.ctx, id, "wf-late"), store.ErrTerminal)
		_, err := e.s.StartRun(e.ctx, id, "wf-late")
		wantErr(t, "run of "+id, err, store.ErrTerminal)
		wantErr(t, "messages of "+id, e.s.AppendMessages(e.ctx, id, 1, 0, []llm.Message{llm.UserText("late")}), store.ErrTerminal)
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
	ends := []store.State{store.Completed, store.Failed, store.TimedOut, store.Cancelled}
	cases := []struct {
		from    store.State
		targets []store.State
	}{
		{store.Running, append(ends, ends...)},
		{store.Asking, append(ends, ends...)},
		{store.Paused, ends},
		{store.Created, []store.State{store.Running, store.Running, store.Running, store.Running, store.Running, store.Running}},
		{store.Asking, []store.State{store.Running, store.Running, store.Running, store.Running}},
		{store.Running, []store.State{store.Paused, store.Paused, store.Paused, store.Paused}},
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
				var te *store.TransitionError
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
	e.createIn("i", store.Running)
	e.clock.Advance(time.Minute)
	r := store.Result{
		State: store.Completed, StopReason: "end_turn", Incomplete: true, Report: "found 3 files", Error: "",
		Usage: llm.Usage{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 30, CacheWriteTokens: 40},
		Cost:  ptr(1.5), Turns: 7, ToolCalls: 12, Artifacts: json.RawMessage(`[{"path":"a.md"},  {"path":"b.md"}]`),
	}
	noErr(t, "finish", e.s.Finish(e.ctx, "i", r))
	in := e.get("i")
	if in.State != store.Completed || in.StopReason != "end_turn" || !in.Incomplete || in.Report != "found 3 files" ||
		in.Usage != r.Usage || in.Cost == nil || *in.Cost != 1.5 || in.Turns != 7 || in.ToolCalls != 12 ||
		string(in.Artifacts) != string(r.Artifacts) || !in.EndedAt.Equal(Epoch.Add(time.Minute)) || !in.UpdatedAt.Equal(in.EndedAt) {
		t.Fatalf("finished: %+v", in)
	}
	ts := e.transitions("i")
	if last := ts[len(ts)-1]; last.From != store.Running || last.To != store.Completed || last.Cause != "end_turn" {
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
	wantErr(t, "finish with another cost", e.s.Finish(e.ctx, "i", r2), store.ErrTerminal)

	// Failed with an error, from asking, unpriced, with an explicit cause.
	e.createIn("f", store.Asking)
	noErr(t, "finish failed", e.s.Finish(e.ctx, "f", store.Result{State: store.Failed, Cause: "parent gone", Error: "boom"}))
	if got := e.get("f"); got.State != store.Failed || got.Error != "boom" || got.Cost != nil || got.Artifacts != nil {
		t.Fatalf("failed: %+v", got)
	}
	if ts := e.transitions("f"); ts[len(ts)-1].Cause != "parent gone" {
		t.Fatalf("cause: %+v", ts[len(ts)-1])
	}

	e.createIn("n", store.Running)
	wantErr(t, "finish as paused", e.s.Finish(e.ctx, "n", store.Result{State: store.Paused}), store.ErrIllegalTransition)
	if err := e.s.Finish(e.ctx, "n", store.Result{State: store.Completed, Artifacts: json.RawMessage(`[`)}); err == nil {
		t.Fatal("finish with invalid artifacts JSON: no error")
	}
	if got := e.get("n"); got.State != store.Running {
		t.Fatalf("a refused finish moved the instance to %s", got.State)
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

	e.createIn("i", store.Running)
	noErr(t, "progress", e.s.UpdateProgress(e.ctx, "i", 2, 1, llm.Usage{InputTokens: 5}, nil))
	before := e.get("i")
	e.clock.Advance(time.Hour)
	// Finish writes the instance row first, then the transition: the
	// trigger fails the second write, and the first must not survive.
	err := e.s.Finish(e.ctx, "i", store.Result{State: store.Completed, Cause: failHere, Report: "r", Turns: 9, Usage: llm.Usage{InputTokens: 50}, Cost: ptr(2.0)})
	if err == nil {
		t.Fatal("finish with a failing transition record: no error")
	}
	if after := e.get("i"); fmt.Sprint(*after) != fmt.Sprint(*before) {
		t.Fatalf("a failed finish left a half-written instance:\nbefore %+v\nafter  %+v", before, after)
	}
	if err := e.s.Transition(e.ctx, "i", store.Paused, failHere); err == nil {
		t.Fatal("transition with a failing record: no error")
	}
	if after := e.get("i"); after.State != store.Running {
		t.Fatalf("a failed transition left state %s", after.State)
	}
	if ts := e.transitions("i"); len(ts) != 2 {
		t.Fatalf("failed transitions were recorded: %+v", ts)
	}
	// The instance is not stuck: the same moves with another cause work.
	noErr(t, "finish", e.s.Finish(e.ctx, "i", store.Result{State: store.Completed, Cause: "done"}))

	// A batch of messages whose third is refused stores none of them.
	e.createIn("m", store.Running)
	batch := []llm.Message{llm.UserText("one"), {Role: llm.Assistant, Content: []llm.Block{llm.Text("two")}}, {Role: failHere, Content: []llm.Block{llm.Text("three")}}}
	if err := e.s.AppendMessages(e.ctx, "m", 1, 0, batch); err == nil {
		t.Fatal("append with a refused message: no error")
	}
	if got, err := e.s.Transcript(e.ctx, "m"); err != nil || len(got) != 0 {
		t.Fatalf("a failed append left %d messages (err %v)", len(got), err)
	}
	noErr(t, "append the first two", e.s.AppendMessages(e.ctx, "m", 1, 0, batch[:2]))
}
