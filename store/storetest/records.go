package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

// conversation is a transcript with every kind of block; the tool input's
// keys are out of order and spaced, which must come back byte for byte.
func conversation() []llm.Message {
	return []llm.Message{
		llm.UserText("list the files"),
		{Role: llm.Assistant, Content: []llm.Block{
			llm.Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"hm","signature":"c2ln"}`)),
			llm.Text("Looking."),
			llm.ToolUse("tu_1", "list", json.RawMessage(`{"z":1,"a":{"b":[1,2]}}`)),
		}},
		{Role: llm.User, Content: []llm.Block{llm.ToolResult("tu_1", "a.go\nb.go", false)}},
		{Role: llm.Assistant, Content: []llm.Block{llm.ToolUse("tu_2", "read", json.RawMessage(`{"path":"a.go"}`))}},
		{Role: llm.User, Content: []llm.Block{llm.ToolResult("tu_2", "no such file", true)}},
		{Role: llm.Assistant, Content: []llm.Block{llm.Text("Two files: a.go and b.go — ünïcode kept.")}},
	}
}

func testTranscript(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.createIn("i", instance.Running)
	msgs := conversation()
	if got, err := e.s.Transcript(e.ctx, "i"); err != nil || got != nil {
		t.Fatalf("empty transcript: %v, %v", got, err)
	}
	noErr(t, "append turn 1", e.s.AppendMessages(e.ctx, "i", 1, 0, msgs[:3]))
	noErr(t, "append turn 2", e.s.AppendMessages(e.ctx, "i", 2, 3, msgs[3:5]))
	// Repeats of stored messages are no-ops, alone or with new ones after.
	noErr(t, "repeat turn 1", e.s.AppendMessages(e.ctx, "i", 1, 0, msgs[:3]))
	noErr(t, "repeat a part of turn 2", e.s.AppendMessages(e.ctx, "i", 2, 4, msgs[4:5]))
	noErr(t, "repeat the end of turn 2 with turn 3", e.s.AppendMessages(e.ctx, "i", 2, 3, msgs[3:5]))
	noErr(t, "append turn 3", e.s.AppendMessages(e.ctx, "i", 3, 5, msgs[5:]))
	noErr(t, "append nothing", e.s.AppendMessages(e.ctx, "i", 3, 6, nil))

	got, err := e.s.Transcript(e.ctx, "i")
	noErr(t, "transcript", err)
	if !reflect.DeepEqual(got, msgs) {
		t.Fatalf("transcript differs:\ngot  %+v\nwant %+v", got, msgs)
	}
	if in := string(got[1].Content[2].Input); in != `{"z":1,"a":{"b":[1,2]}}` {
		t.Fatalf("tool input came back as %s", in)
	}

	changed := conversation()
	changed[1].Content[1].Text = "Looking!"
	wantErr(t, "append different content", e.s.AppendMessages(e.ctx, "i", 1, 0, changed[:3]), store.ErrConflict)
	wantErr(t, "append at another turn", e.s.AppendMessages(e.ctx, "i", 9, 5, msgs[5:]), store.ErrConflict)
	wantErr(t, "append past the end", e.s.AppendMessages(e.ctx, "i", 4, 7, msgs[:1]), store.ErrConflict)
	if err := e.s.AppendMessages(e.ctx, "i", 4, -1, msgs[:1]); err == nil {
		t.Fatal("append at seq -1: no error")
	}
	if got, _ := e.s.Transcript(e.ctx, "i"); len(got) != len(msgs) {
		t.Fatalf("refused appends changed the transcript: %d messages", len(got))
	}
}

func testCompactions(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.createIn("i", instance.Running)
	msgs := conversation()
	noErr(t, "append", e.s.AppendMessages(e.ctx, "i", 1, 0, msgs))
	e.clock.Advance(time.Second)
	c := store.Compaction{InstanceID: "i", Turn: 4, ThroughSeq: 4, Summary: "listed two files", Usage: llm.Usage{InputTokens: 300, OutputTokens: 40}}
	noErr(t, "compact", e.s.RecordCompaction(e.ctx, c))
	noErr(t, "compact again", e.s.RecordCompaction(e.ctx, c))
	c2 := c
	c2.Summary = "another summary"
	wantErr(t, "a different compaction at the same turn", e.s.RecordCompaction(e.ctx, c2), store.ErrConflict)
	if err := e.s.RecordCompaction(e.ctx, store.Compaction{InstanceID: "i", Turn: 5, ThroughSeq: len(msgs)}); err == nil {
		t.Fatal("compaction through a message not stored: no error")
	}
	noErr(t, "compact later", e.s.RecordCompaction(e.ctx, store.Compaction{InstanceID: "i", Turn: 6, ThroughSeq: 5, Summary: "all"}))
	cs, err := e.s.Compactions(e.ctx, "i")
	noErr(t, "compactions", err)
	c.At = Epoch.Add(time.Second)
	if len(cs) != 2 || !reflect.DeepEqual(cs[0], c) || cs[1].Turn != 6 || cs[1].ThroughSeq != 5 {
		t.Fatalf("compactions: %+v", cs)
	}
	// The original turns stay.
	if got, _ := e.s.Transcript(e.ctx, "i"); !reflect.DeepEqual(got, msgs) {
		t.Fatal("compaction changed the transcript")
	}
	e.create("empty", "")
	if cs, err := e.s.Compactions(e.ctx, "empty"); err != nil || cs != nil {
		t.Fatalf("no compactions: %v, %v", cs, err)
	}
}

func testAttempts(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.createIn("i", instance.Running)
	first := llm.Attempt{Provider: "anthropic", Model: "claude-x", N: 1, Status: 429, RequestID: "req_1", Latency: 120*time.Millisecond + 700*time.Microsecond,
		Reason: "rate_limit", Err: errors.New("429 too many requests"), Retry: true, Wait: 1500 * time.Millisecond, Discarded: true}
	a1, err := e.s.RecordAttempt(e.ctx, "i", 1, first)
	noErr(t, "attempt 1", err)
	e.clock.Advance(2 * time.Second)
	a2, err := e.s.RecordAttempt(e.ctx, "i", 1, llm.Attempt{Provider: "anthropic", Model: "claude-x", N: 2, Status: 200, Latency: time.Second})
	noErr(t, "attempt 2", err)
	// A turn re-run after a crash starts the provider's count again; the
	// store's count goes on.
	a3, err := e.s.RecordAttempt(e.ctx, "i", 1, llm.Attempt{Provider: "anthropic", N: 1, Status: 200})
	noErr(t, "attempt 3", err)
	b1, err := e.s.RecordAttempt(e.ctx, "i", 2, llm.Attempt{Provider: "openai", N: 1, Reason: "connection", Error: "reset"})
	noErr(t, "turn 2 attempt", err)
	if a1.N != 1 || a2.N != 2 || a3.N != 3 || b1.N != 1 {
		t.Fatalf("attempt numbers %d %d %d %d", a1.N, a2.N, a3.N, b1.N)
	}
	want := store.Attempt{InstanceID: "i", Turn: 1, N: 1, Provider: "anthropic", Model: "claude-x", Status: 429, RequestID: "req_1",
		Reason: "rate_limit", Error: "429 too many requests", Retry: true, Discarded: true, Wait: 1500 * time.Millisecond,
		Latency: 120 * time.Millisecond, At: Epoch}
	if a1 != want {
		t.Fatalf("recorded\n%+v, want\n%+v", a1, want)
	}
	list, err := e.s.Attempts(e.ctx, "i")
	noErr(t, "attempts", err)
	if len(list) != 4 || list[0] != want || list[1] != a2 || list[2] != a3 || list[3] != b1 || !list[1].At.Equal(Epoch.Add(2*time.Second)) {
		t.Fatalf("attempts: %+v", list)
	}
}

func testRuns(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("i", "")
	r1, err := e.s.StartRun(e.ctx, "i", "wf-1")
	noErr(t, "start run 1", err)
	if r1.N != 1 || r1.WorkflowID != "wf-1" || r1.InstanceID != "i" || !r1.StartedAt.Equal(Epoch) || !r1.EndedAt.IsZero() {
		t.Fatalf("run 1: %+v", r1)
	}
	e.clock.Advance(time.Second)
	again, err := e.s.StartRun(e.ctx, "i", "wf-1")
	noErr(t, "start run 1 again", err)
	if again != r1 {
		t.Fatalf("a recovered workflow got a new run: %+v, first %+v", again, r1)
	}
	e.move("i", instance.Running)
	e.move("i", instance.Asking)
	noErr(t, "end run 1", e.s.EndRun(e.ctx, r1.ID, "suspended"))
	noErr(t, "end run 1 again", e.s.EndRun(e.ctx, r1.ID, "suspended"))
	wantErr(t, "end run 1 otherwise", e.s.EndRun(e.ctx, r1.ID, "completed"), store.ErrConflict)
	if err := e.s.EndRun(e.ctx, r1.ID, ""); err == nil {
		t.Fatal("end with no outcome: no error")
	}
	wantErr(t, "end an unknown run", e.s.EndRun(e.ctx, 987654, "completed"), store.ErrNotFound)

	e.clock.Advance(time.Second)
	e.move("i", instance.Running)
	r2, err := e.s.StartRun(e.ctx, "i", "wf-2")
	noErr(t, "start run 2", err)
	r3, err := e.s.StartRun(e.ctx, "i", "")
	noErr(t, "start run 3", err)
	r4, err := e.s.StartRun(e.ctx, "i", "")
	noErr(t, "start run 4", err)
	if r2.N != 2 || r3.N != 3 || r4.N != 4 || r3.ID == r4.ID {
		t.Fatalf("runs %+v %+v %+v", r2, r3, r4)
	}
	runs, err := e.s.Runs(e.ctx, "i")
	noErr(t, "runs", err)
	if len(runs) != 4 || runs[0].Outcome != "suspended" || !runs[0].EndedAt.Equal(Epoch.Add(time.Second)) || runs[1] != r2 || runs[3] != r4 {
		t.Fatalf("runs: %+v", runs)
	}
	// A recovered workflow may ask for its run even after the instance
	// ended; a new run may not start.
	noErr(t, "finish", e.s.Finish(e.ctx, "i", store.Result{State: instance.Completed}))
	if r, err := e.s.StartRun(e.ctx, "i", "wf-2"); err != nil || r != r2 {
		t.Fatalf("recovered run after the end: %+v, %v", r, err)
	}
	_, err = e.s.StartRun(e.ctx, "i", "wf-3")
	wantErr(t, "new run after the end", err, instance.ErrTerminal)
}

func testDefinitions(t *testing.T, h Harness) {
	e := newEnv(t, h)
	if defs, err := e.s.Definitions(e.ctx); err != nil || defs != nil {
		t.Fatalf("no definitions: %v, %v", defs, err)
	}
	noErr(t, "put b", e.s.PutDefinition(e.ctx, "b", "---\nname: b\n---\nB", json.RawMessage(`{"name":"b"}`)))
	noErr(t, "put a", e.s.PutDefinition(e.ctx, "a", "", json.RawMessage(`{"name":"a", "tools":["read"]}`)))
	e.clock.Advance(time.Minute)
	noErr(t, "put b unchanged", e.s.PutDefinition(e.ctx, "b", "---\nname: b\n---\nB", json.RawMessage(`{"name":"b"}`)))
	e.clock.Advance(time.Minute)
	noErr(t, "put a changed", e.s.PutDefinition(e.ctx, "a", "src", json.RawMessage(`{"name":"a","tools":[]}`)))
	defs, err := e.s.Definitions(e.ctx)
	noErr(t, "definitions", err)
	want := []store.Definition{
		{Name: "a", Source: "src", Definition: json.RawMessage(`{"name":"a","tools":[]}`), UpdatedAt: Epoch.Add(2 * time.Minute)},
		{Name: "b", Source: "---\nname: b\n---\nB", Definition: json.RawMessage(`{"name":"b"}`), UpdatedAt: Epoch},
	}
	if !reflect.DeepEqual(defs, want) {
		t.Fatalf("definitions:\n%+v\nwant\n%+v", defs, want)
	}
	if err := e.s.PutDefinition(e.ctx, "", "", json.RawMessage(`{}`)); err == nil {
		t.Fatal("put with no name: no error")
	}
	for _, bad := range []string{``, `{`, `nope`} {
		if err := e.s.PutDefinition(e.ctx, "c", "", json.RawMessage(bad)); err == nil {
			t.Fatalf("put invalid JSON %q: no error", bad)
		}
	}
}

func testEvents(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("a", "")
	e.create("b", "a")
	base, err := e.s.LastEventID(e.ctx)
	noErr(t, "last event id", err)
	var ids []int64
	for i, ev := range []struct {
		inst, kind string
		data       json.RawMessage
	}{
		{"a", "turn", json.RawMessage(`{"n":1}`)},
		{"b", "turn", json.RawMessage(`{"n":1}`)},
		{"a", "tool", json.RawMessage(`{"name":"read",  "ok":true}`)},
		{"a", "note", nil},
	} {
		e.clock.Advance(time.Second)
		id, err := e.s.AppendEvent(e.ctx, ev.inst, ev.kind, ev.data)
		noErr(t, fmt.Sprint("event ", i), err)
		if id <= base || len(ids) > 0 && id <= ids[len(ids)-1] {
			t.Fatalf("event ids do not grow: %d, %v then %d", base, ids, id)
		}
		ids = append(ids, id)
	}
	evs, err := e.s.Events(e.ctx, "a", base, 0)
	noErr(t, "events of a", err)
	if len(evs) != 3 || evs[0].ID != ids[0] || evs[1].Kind != "tool" || string(evs[1].Data) != `{"name":"read",  "ok":true}` ||
		evs[2].Data != nil || evs[2].InstanceID != "a" || evs[2].Root != "a" || !evs[2].At.Equal(Epoch.Add(4*time.Second)) {
		t.Fatalf("events of a: %+v", evs)
	}
	if evs, _ := e.s.Events(e.ctx, "a", ids[0], 0); len(evs) != 2 || evs[0].ID != ids[2] {
		t.Fatalf("events of a after the first: %+v", evs)
	}
	if evs, _ := e.s.Events(e.ctx, "a", base, 1); len(evs) != 1 || evs[0].ID != ids[0] {
		t.Fatalf("events of a, limit 1: %+v", evs)
	}
	if evs, _ := e.s.Events(e.ctx, "", ids[0], 2); len(evs) != 2 || evs[0].ID != ids[1] || evs[1].ID != ids[2] {
		t.Fatalf("all events after the first, limit 2: %+v", evs)
	}
	if evs, err := e.s.Events(e.ctx, "b", ids[1], 0); err != nil || evs != nil {
		t.Fatalf("no events of b after its last: %v, %v", evs, err)
	}
	// A tree's feed holds its children's events, with their parent.
	evs, err = e.s.ListEvents(e.ctx, store.EventFilter{Root: "a", After: base})
	noErr(t, "events of tree a", err)
	if len(evs) != 4 || evs[1].InstanceID != "b" || evs[1].Parent != "a" || evs[1].Root != "a" {
		t.Fatalf("events of tree a: %+v", evs)
	}
	_, err = e.s.ListEvents(e.ctx, store.EventFilter{Root: "nope"})
	wantErr(t, "events of an unknown tree", err, store.ErrNotFound)
	if _, err := e.s.AppendEvent(e.ctx, "a", "bad", json.RawMessage(`{`)); err == nil {
		t.Fatal("event with invalid JSON: no error")
	}
	for _, kind := range []string{"", "x\nevent: forged", "Kind", strings.Repeat("k", 33)} {
		if _, err := e.s.AppendEvent(e.ctx, "a", kind, nil); err == nil {
			t.Fatalf("event of kind %q: no error", kind)
		}
	}
	// A bad event refuses its whole append: no message lands without the
	// events it came with.
	err = e.s.AppendWith(e.ctx, "a", 1, 0, []llm.Message{llm.UserText("hi")},
		store.With{Events: []store.NewEvent{{Kind: "tool call"}}})
	if err == nil {
		t.Fatal("append with an event of a bad kind: no error")
	}
	if msgs, err := e.s.Transcript(e.ctx, "a"); err != nil || len(msgs) != 0 {
		t.Fatalf("after a refused append: %d messages, %v", len(msgs), err)
	}
	_, err = e.s.AppendEvent(e.ctx, "nope", "turn", nil)
	wantErr(t, "event of an unknown instance", err, store.ErrNotFound)
}

// testStoreEvents checks the events the store writes itself, in the
// transaction of what they report: state changes (the end's with its
// relay), progress, mail; and that a refused change writes none.
func testStoreEvents(t *testing.T, h Harness) {
	e := newEnv(t, h)
	signal := e.s.EventsWritten()
	e.create("r", "")
	select {
	case <-signal:
	default:
		t.Fatal("EventsWritten not signalled by a creation")
	}
	e.create("c", "r")
	e.move("c", instance.Running)
	noErr(t, "progress", e.s.UpdateProgress(e.ctx, "c", 2, 3, llm.Usage{InputTokens: 10, OutputTokens: 5}, nil))
	_, err := e.s.Post(e.ctx, store.Mail{InstanceID: "r", Sender: "c", Kind: "question", Body: "which one?"})
	noErr(t, "post", err)
	cost := 0.25
	noErr(t, "finish", e.s.Finish(e.ctx, "c", store.Result{State: instance.Completed, StopReason: "end_turn",
		Report: strings.Repeat("é", store.EventReportCut+10), Turns: 2, ToolCalls: 3, Cost: &cost}))
	last, err := e.s.LastEventID(e.ctx)
	noErr(t, "last", err)
	// Refused: a finished instance cannot run again; no event is written.
	if err := e.s.Transition(e.ctx, "c", instance.Running, "again"); err == nil {
		t.Fatal("completed to running: no error")
	}
	if l, _ := e.s.LastEventID(e.ctx); l != last {
		t.Fatalf("a refused transition wrote an event: last %d then %d", last, l)
	}
	evs, err := e.s.ListEvents(e.ctx, store.EventFilter{Root: "r"})
	noErr(t, "events", err)
	type want struct{ inst, kind, fields string }
	wants := []want{
		{"r", "state", `"from":"","to":"created","cause":"create","type":"worker"`},
		{"c", "state", `"to":"created","depth":1`},
		{"c", "state", `"from":"created","to":"running","cause":"test"`},
		{"c", "progress", `"turns":2,"tool_calls":3`},
		{"r", "mail", `"mail_kind":"question","sender":"c","body":"which one?"`},
		{"c", "state", `"from":"running","to":"completed","stop_reason":"end_turn","cost":0.25,"turns":2`},
	}
	if len(evs) != len(wants) {
		t.Fatalf("%d events, want %d: %+v", len(evs), len(wants), evs)
	}
	for i, w := range wants {
		ev := evs[i]
		var m map[string]any
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Fatalf("event %d data %s: %v", i, ev.Data, err)
		}
		// Compare the fields one by one: key order in the data is not a
		// promise.
		var wm map[string]any
		if err := json.Unmarshal([]byte("{"+w.fields+"}"), &wm); err != nil {
			t.Fatal(err)
		}
		for k, v := range wm {
			if fmt.Sprint(m[k]) != fmt.Sprint(v) {
				t.Errorf("event %d (%s %s) %s = %v, want %v; data %s", i, ev.InstanceID, ev.Kind, k, m[k], v, ev.Data)
			}
		}
		if ev.InstanceID != w.inst || ev.Kind != w.kind || ev.Root != "r" {
			t.Errorf("event %d: %s %s root %s, want %s %s", i, ev.InstanceID, ev.Kind, ev.Root, w.inst, w.kind)
		}
	}
	var end map[string]any
	_ = json.Unmarshal(evs[5].Data, &end)
	if r, _ := end["report"].(string); utf8.RuneCountInString(r) != store.EventReportCut+1 || !strings.HasSuffix(r, "…") {
		t.Errorf("the end's report is not cut to %d runes: %d", store.EventReportCut, utf8.RuneCountInString(r))
	}
}

// testEventOrder has writers add events concurrently while a reader
// follows the feed by the last id it saw, as an SSE client does: the
// reader must end up with every event, none skipped. On Postgres this is
// what the event lock is for (ids are handed out before commit).
func testEventOrder(t *testing.T, h Harness) {
	e := newEnv(t, h)
	const writers, each = 8, 40
	for w := range writers {
		e.create(fmt.Sprint("w", w), "")
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Writers share instances and mix plain events with mail,
			// whose transaction locks the instance's row before the
			// event: the two orders of taking locks that deadlocked
			// before the rule in store/event.go.
			inst := fmt.Sprint("w", w%2)
			for i := range each {
				var err error
				if i%2 == 0 {
					_, err = e.s.AppendEvent(ctx, inst, "n", json.RawMessage(fmt.Sprint(i)))
				} else {
					_, err = e.s.Post(ctx, store.Mail{InstanceID: inst, Sender: "t", Kind: "note", Body: fmt.Sprint(i)})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var seen []int64
	var after int64
	follow := func() {
		evs, err := e.s.ListEvents(e.ctx, store.EventFilter{After: after})
		noErr(t, "follow", err)
		for _, ev := range evs {
			seen = append(seen, ev.ID)
			after = ev.ID
		}
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		follow()
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	follow()
	all, err := e.s.ListEvents(e.ctx, store.EventFilter{})
	noErr(t, "all", err)
	if len(all) != len(seen) {
		t.Fatalf("the follower saw %d events of %d: it skipped some", len(seen), len(all))
	}
	for i := range all {
		if all[i].ID != seen[i] {
			t.Fatalf("event %d: follower saw id %d, feed has %d", i, seen[i], all[i].ID)
		}
	}
}

func testMailbox(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("p", "")
	e.create("c", "p")
	if m, err := e.s.Pending(e.ctx, "c"); err != nil || m != nil {
		t.Fatalf("empty mailbox: %v, %v", m, err)
	}
	id1, err := e.s.Post(e.ctx, store.Mail{InstanceID: "c", Sender: "p", Kind: "answer", Body: "yes", Key: "q1"})
	noErr(t, "post 1", err)
	e.clock.Advance(time.Second)
	id2, err := e.s.Post(e.ctx, store.Mail{InstanceID: "c", Sender: "user", Kind: "note", Body: "hurry"})
	noErr(t, "post 2", err)
	id3, err := e.s.Post(e.ctx, store.Mail{InstanceID: "p", Sender: "c", Kind: "question", Body: "which?"})
	noErr(t, "post 3", err)
	// A repeated post with its key stores nothing new.
	again, err := e.s.Post(e.ctx, store.Mail{InstanceID: "c", Sender: "p", Kind: "answer", Body: "yes", Key: "q1"})
	noErr(t, "post 1 again", err)
	if again != id1 || id2 <= id1 || id3 <= id2 {
		t.Fatalf("ids %d %d %d, repeat %d", id1, id2, id3, again)
	}
	_, err = e.s.Post(e.ctx, store.Mail{InstanceID: "c", Sender: "p", Kind: "answer", Body: "no", Key: "q1"})
	wantErr(t, "post with a used key", err, store.ErrConflict)
	// The same key to another instance is another mail.
	other, err := e.s.Post(e.ctx, store.Mail{InstanceID: "p", Sender: "p", Kind: "answer", Body: "yes", Key: "q1"})
	noErr(t, "same key, other instance", err)

	pending, err := e.s.Pending(e.ctx, "c")
	noErr(t, "pending", err)
	want := []store.Mail{
		{ID: id1, InstanceID: "c", Sender: "p", Kind: "answer", Body: "yes", Key: "q1", CreatedAt: Epoch},
		{ID: id2, InstanceID: "c", Sender: "user", Kind: "note", Body: "hurry", CreatedAt: Epoch.Add(time.Second)},
	}
	if !reflect.DeepEqual(pending, want) {
		t.Fatalf("pending:\n%+v\nwant\n%+v", pending, want)
	}
	noErr(t, "consume 1", e.s.Consume(e.ctx, id1))
	wantErr(t, "consume 1 again", e.s.Consume(e.ctx, id1), store.ErrAlreadyConsumed)
	wantErr(t, "consume unknown", e.s.Consume(e.ctx, other+1000), store.ErrNotFound)
	if pending, _ := e.s.Pending(e.ctx, "c"); len(pending) != 1 || pending[0].ID != id2 {
		t.Fatalf("pending after consume: %+v", pending)
	}
	// A consumed key still deduplicates: the answer is not delivered twice.
	if again, err := e.s.Post(e.ctx, store.Mail{InstanceID: "c", Sender: "p", Kind: "answer", Body: "yes", Key: "q1"}); err != nil || again != id1 {
		t.Fatalf("repost after consume: %d, %v", again, err)
	}
	if pending, _ := e.s.Pending(e.ctx, "p"); len(pending) != 2 || pending[0].ID != id3 || pending[1].ID != other {
		t.Fatalf("pending of p: %+v", pending)
	}
}

// Deliver appends and consumes in one transaction, and a repeat changes
// nothing.
func testDeliver(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("i", "")
	e.create("j", "")
	a, err := e.s.Post(e.ctx, store.Mail{InstanceID: "i", Kind: "answer", Body: "yes"})
	noErr(t, "post", err)
	n, err := e.s.Post(e.ctx, store.Mail{InstanceID: "i", Kind: "note", Body: "hurry"})
	noErr(t, "post", err)
	other, err := e.s.Post(e.ctx, store.Mail{InstanceID: "j", Kind: "note", Body: "not yours"})
	noErr(t, "post", err)
	msgs := []llm.Message{llm.UserText("go")}
	for range 2 {
		noErr(t, "deliver", e.s.Deliver(e.ctx, "i", 1, 0, msgs, []int64{a, n, other}))
	}
	if p, _ := e.s.Pending(e.ctx, "i"); len(p) != 0 {
		t.Fatalf("pending after delivery: %+v", p)
	}
	if p, _ := e.s.Pending(e.ctx, "j"); len(p) != 1 {
		t.Fatalf("another instance's mail was consumed: %+v", p)
	}
	if m, _ := e.s.Transcript(e.ctx, "i"); len(m) != 1 {
		t.Fatalf("transcript %+v", m)
	}
	// A delivery that fails (a gap) consumes nothing.
	b, err := e.s.Post(e.ctx, store.Mail{InstanceID: "i", Kind: "note", Body: "later"})
	noErr(t, "post", err)
	wantErr(t, "deliver with a gap", e.s.Deliver(e.ctx, "i", 2, 5, msgs, []int64{b}), store.ErrConflict)
	if p, _ := e.s.Pending(e.ctx, "i"); len(p) != 1 || p[0].ID != b {
		t.Fatalf("a failed delivery consumed mail: %+v", p)
	}
}

func testConcurrentConsume(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("i", "")
	for round := 0; round < 5; round++ {
		id, err := e.s.Post(e.ctx, store.Mail{InstanceID: "i", Kind: "answer", Body: fmt.Sprint(round)})
		noErr(t, "post", err)
		start := make(chan struct{})
		errs := make([]error, 6)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = e.s.Consume(e.ctx, id)
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else if !errors.Is(err, store.ErrAlreadyConsumed) {
				t.Fatalf("consume: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d consumers won, want 1", round, won)
		}
	}
}

func testNotFound(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("real", "")
	const id = "no-such-instance"
	_, err := e.s.GetInstance(e.ctx, id)
	wantErr(t, "get", err, store.ErrNotFound)
	wantErr(t, "transition", e.s.Transition(e.ctx, id, instance.Running, ""), store.ErrNotFound)
	wantErr(t, "finish", e.s.Finish(e.ctx, id, store.Result{State: instance.Completed}), store.ErrNotFound)
	wantErr(t, "progress", e.s.UpdateProgress(e.ctx, id, 1, 1, llm.Usage{}, nil), store.ErrNotFound)
	wantErr(t, "workflow", e.s.SetWorkflow(e.ctx, id, "wf"), store.ErrNotFound)
	_, err = e.s.Transitions(e.ctx, id)
	wantErr(t, "transitions", err, store.ErrNotFound)
	wantErr(t, "append", e.s.AppendMessages(e.ctx, id, 1, 0, []llm.Message{llm.UserText("x")}), store.ErrNotFound)
	_, err = e.s.Transcript(e.ctx, id)
	wantErr(t, "transcript", err, store.ErrNotFound)
	wantErr(t, "compaction", e.s.RecordCompaction(e.ctx, store.Compaction{InstanceID: id}), store.ErrNotFound)
	_, err = e.s.Compactions(e.ctx, id)
	wantErr(t, "compactions", err, store.ErrNotFound)
	_, err = e.s.RecordAttempt(e.ctx, id, 1, llm.Attempt{})
	wantErr(t, "attempt", err, store.ErrNotFound)
	_, err = e.s.Attempts(e.ctx, id)
	wantErr(t, "attempts", err, store.ErrNotFound)
	_, err = e.s.StartRun(e.ctx, id, "wf")
	wantErr(t, "start run", err, store.ErrNotFound)
	_, err = e.s.Runs(e.ctx, id)
	wantErr(t, "runs", err, store.ErrNotFound)
	_, err = e.s.AppendEvent(e.ctx, id, "k", nil)
	wantErr(t, "event", err, store.ErrNotFound)
	_, err = e.s.Events(e.ctx, id, 0, 0)
	wantErr(t, "events", err, store.ErrNotFound)
	_, err = e.s.Post(e.ctx, store.Mail{InstanceID: id})
	wantErr(t, "post", err, store.ErrNotFound)
	_, err = e.s.Pending(e.ctx, id)
	wantErr(t, "pending", err, store.ErrNotFound)
	// The error names the id.
	if _, err := e.s.GetInstance(e.ctx, id); err == nil || !strings.Contains(err.Error(), id) {
		t.Fatalf("error %v does not name the id", err)
	}
}
