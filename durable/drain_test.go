package durable_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

const sqliteDrainScenario = `
rules:
  - match: {turn: 1}
    tool_calls: [{name: slow, input: {}}]
  - match: {turn: 2}
    text: "after: {{index .ToolResults 0}}"
`

// held is a side-effecting tool that says when it starts and finishes
// when released, or, if it must, when its context ends (cut off).
type held struct {
	started chan struct{}
	release chan struct{}
	runs    *atomic.Int64
}

func (held) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "slow", Description: "takes its time", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (held) ReadOnly() bool { return false }
func (h held) Run(ctx context.Context, _ json.RawMessage) (string, error) {
	if h.runs.Add(1) == 1 {
		close(h.started)
	}
	select {
	case <-h.release:
		return "slow done", nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// openDrainEngine opens an engine alone on the SQLite file path, its
// drain timed by drainClock; generates counts its model's calls (each
// turn's generate step).
func openDrainEngine(t *testing.T, path string, drainClock clock.Clock, h held) (e *durable.Engine, st *store.Store, generates *atomic.Int64) {
	t.Helper()
	st, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := fake.ParseScenario([]byte(sqliteDrainScenario), "drain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scripted := fake.NewModel(s, fake.WithoutLatency())
	generates = new(atomic.Int64)
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
		generates.Add(1)
		return scripted.Generate(ctx, req, stream)
	})
	e, err = durable.Open(context.Background(), durable.Options{
		Store: st, DrainClock: drainClock,
		Models: func(string) (llm.Model, string, error) { return model, "fake", nil },
		Tools:  func(durable.Spec) (*tool.Set, error) { return tool.NewSet(h) },
	})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(5 * time.Second); st.Close() })
	return e, st, generates
}

// resumeAfterDrain opens a second engine on path (DBOS closed the first's
// handle at its shutdown), which recovers the run, and returns the run's
// end and its transcript as text.
func resumeAfterDrain(t *testing.T, ctx context.Context, path, id string, h held) (*instance.Record, string) {
	t.Helper()
	e, st, _ := openDrainEngine(t, path, nil, h)
	in, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := st.Transcript(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(msgs)
	return in, string(b)
}

// An engine alone on SQLite drains when it closes: the side-effecting call
// it is in finishes and is checkpointed before DBOS shuts down, nothing
// starts after it (the next turn's generate step is not admitted: the
// call is released only once the drain's timer is armed, which it is once
// the gate is closed), and the next engine finishes the run from there
// without running the call again or reporting it interrupted.
func TestDrainAloneOnSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "deputy.db")
	var runs atomic.Int64
	h := held{started: make(chan struct{}), release: make(chan struct{}), runs: &runs}
	drainClock := clock.NewFake(time.Now())
	e, _, generates := openDrainEngine(t, path, drainClock, h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := e.Start(ctx, "slow", durable.Spec{System: "root", Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	<-h.started
	before := generates.Load() // turn 1's
	drained := make(chan bool, 1)
	go func() { drained <- e.CloseContext(context.Background(), time.Hour) }()
	// The drain's bound is armed: Close waits for the call, which only
	// its release ends.
	if err := drainClock.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-drained:
		t.Fatal("Close returned while a step ran")
	default:
	}
	close(h.release)
	if ok := <-drained; !ok {
		t.Fatal("the drain reports steps cut off")
	}
	if n := generates.Load() - before; n != 0 {
		t.Fatalf("%d model calls started after the drain began", n)
	}
	in, transcript := resumeAfterDrain(t, ctx, path, id, h)
	if in.State != instance.Completed || in.Report != "after: slow done" || runs.Load() != 1 {
		t.Fatalf("after the drain: %s %q, the call ran %d times", in.State, in.Report, runs.Load())
	}
	if strings.Contains(transcript, "interrupted") {
		t.Fatalf("the transcript reports the call interrupted: %s", transcript)
	}
}

// The drain is bounded: its timeout passing on the drain clock, or its
// context ending (a second signal), cuts the running call off, and the
// next engine reports that call interrupted rather than run it again.
func TestDrainBoundCutsOff(t *testing.T) {
	t.Parallel()
	for _, by := range []string{"timeout", "context"} {
		t.Run(by, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "deputy.db")
			var runs atomic.Int64
			h := held{started: make(chan struct{}), release: make(chan struct{}), runs: &runs}
			drainClock := clock.NewFake(time.Now())
			e, _, _ := openDrainEngine(t, path, drainClock, h)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			id, err := e.Start(ctx, "slow", durable.Spec{System: "root", Model: "fake"})
			if err != nil {
				t.Fatal(err)
			}
			<-h.started
			hurry, now := context.WithCancel(context.Background())
			defer now()
			drained := make(chan bool, 1)
			go func() { drained <- e.CloseContext(hurry, 30*time.Second) }()
			if err := drainClock.WaitPending(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if by == "timeout" {
				drainClock.Advance(30 * time.Second)
			} else {
				now()
			}
			if ok := <-drained; ok {
				t.Fatal("the drain reports every step finished")
			}
			in, transcript := resumeAfterDrain(t, ctx, path, id, h)
			if in.State != instance.Completed || !strings.HasPrefix(in.Report, "after: "+durable.Interrupted[:20]) || runs.Load() != 1 {
				t.Fatalf("after the cut: %s %q, the call ran %d times", in.State, in.Report, runs.Load())
			}
			if !strings.Contains(transcript, "interrupted") {
				t.Fatalf("the transcript does not report the call interrupted: %s", transcript)
			}
		})
	}
}
