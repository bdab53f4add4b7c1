package durable_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/tool"
)

const leaseScenario = `
rules:
  - match: {turn: 1}
    tool_calls: [{name: count, input: {}}]
  - match: {turn: 2}
    text: "done after {{index .ToolResults 0}}"
`

// hanging is a model whose second call never returns (until its context
// ends): the worker it runs on stops there.
type hanging struct {
	llm.Model
	calls   atomic.Int64
	stopped chan struct{}
}

func (h *hanging) Generate(ctx context.Context, req *llm.Request, stream func(llm.Delta)) (*llm.Response, error) {
	if h.calls.Add(1) == 2 {
		close(h.stopped)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return h.Model.Generate(ctx, req, stream)
}

type worker struct {
	e         *durable.Engine
	st        *store.Store
	lost      chan error
	takeovers chan string
}

// openWorker opens an engine of a fleet on url under id, on clk.
func openWorker(t *testing.T, url, id string, clk clock.Clock, model llm.Model, tools ...tool.Tool) *worker {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url, store.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{st: st, lost: make(chan error, 1), takeovers: make(chan string, 8)}
	w.e, err = durable.Open(ctx, durable.Options{
		Store: st, URL: url, ExecutorID: id, Clock: clk, Lease: 15 * time.Second,
		Models:      func(string) (llm.Model, string, error) { return model, "fake", nil },
		Tools:       func(durable.Spec) (*tool.Set, error) { return tool.NewSet(tools...) },
		OnLeaseLost: func(err error) { w.lost <- err },
		OnTakeover:  func(dead string, n int) { w.takeovers <- dead },
	})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { w.e.Close(5 * time.Second); st.Close() })
	return w
}

// A worker that stops renewing its lease is taken over once the lease
// has run out: another worker claims it, and its run resumes there from
// its last finished step; the tool it had run does not run again.
func TestTakeoverInProcess(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	clk := clock.NewFake(time.Now())
	s, err := fake.ParseScenario([]byte(leaseScenario), "lease.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	stuck := &hanging{Model: fake.NewModel(s, fake.WithoutLatency()), stopped: make(chan struct{})}
	a := openWorker(t, url, "wa", clk, stuck, counter{&runs})
	b := openWorker(t, url, "wb", clk, fake.NewModel(s, fake.WithoutLatency()), counter{&runs})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	id, err := a.e.Start(ctx, "count once", durable.Spec{System: "root", Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-stuck.stopped: // turn 1 and its tool call are recorded; turn 2 hangs
	case <-ctx.Done():
		t.Fatal("the run never reached its second model call")
	}
	// a dies: its engine stops (the hanging call ends with it, recording
	// nothing) and its lease is neither renewed nor released.
	a.st.Close()
	a.e.Close(time.Second)

	// Time passes for b, a second at a time: b renews, and claims a once
	// a's lease has run out (15 s after its last renewal, at most 5 s ago).
	for range 22 {
		clk.Advance(time.Second)
		if err := clk.WaitPending(ctx, 2); err != nil { // b's keeper and its catalog refresh
			t.Fatal(err)
		}
	}
	select {
	case dead := <-b.takeovers:
		if dead != "wa" {
			t.Fatalf("took over %s", dead)
		}
	case <-ctx.Done():
		t.Fatal("b never took a over")
	}
	in, err := b.e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if in.State != instance.Completed || in.Report != "done after count 1" || runs.Load() != 1 {
		t.Fatalf("instance %+v; count ran %d times", in, runs.Load())
	}
	ws, err := b.st.Workers(ctx)
	if err != nil || len(ws) != 2 || ws[0].ID != "wb" || ws[0].State != store.WorkerLive ||
		ws[1].State != store.WorkerGone || ws[1].ClaimedBy != "wb" {
		t.Fatalf("workers %+v %v", ws, err)
	}
	select {
	case err := <-b.lost:
		t.Fatalf("b lost its lease: %v", err)
	default:
	}
}

const drainScenario = `
rules:
  - match: {turn: 1}
    tool_calls: [{name: slow, input: {}}]
  - match: {turn: 2}
    tool_calls: [{name: count, input: {}}]
  - match: {turn: 3}
    text: "done after {{index .ToolResults 0}}"
`

// slow is a side-effecting tool that tells when it starts and finishes
// when released, counting its runs.
type slow struct {
	started chan struct{}
	release chan struct{}
	runs    *atomic.Int64
}

func (slow) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "slow", Description: "takes its time", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (slow) ReadOnly() bool { return false }
func (s slow) Run(context.Context, json.RawMessage) (string, error) {
	s.runs.Add(1)
	close(s.started)
	<-s.release
	return "slow done", nil
}

// A draining worker lets the step it is in finish, starts no other, and
// gives its lease back: another worker takes its run over at once, not
// after the lease would have run out, and nothing runs twice.
func TestDrainInProcess(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	clk := clock.NewFake(time.Now())
	s, err := fake.ParseScenario([]byte(drainScenario), "drain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var counts, slows atomic.Int64
	gate := slow{started: make(chan struct{}), release: make(chan struct{}), runs: &slows}
	a := openWorker(t, url, "wa", clk, fake.NewModel(s, fake.WithoutLatency()), counter{&counts}, gate)
	b := openWorker(t, url, "wb", clk, fake.NewModel(s, fake.WithoutLatency()), counter{&counts}, gate)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := a.e.Start(ctx, "slow, then count", durable.Spec{System: "root", Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	<-gate.started
	closed := make(chan struct{})
	go func() { a.e.Close(30 * time.Second); close(closed) }()
	// a drains: marked so, and waiting for its step.
	var ws []store.Worker
	if !eventually(ctx, b.st.EventsWritten, func() bool {
		select {
		case <-closed:
			t.Fatal("a closed without waiting for its step")
		default:
		}
		if ws, err = b.st.Workers(ctx); err != nil {
			t.Fatal(err)
		}
		return ws[1].ID == "wa" && ws[1].State == store.WorkerDraining
	}) {
		t.Fatalf("a never drained: %+v", ws)
	}
	close(gate.release)
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("a never finished draining")
	}
	// Released: b's next look (a second on the clock) takes the run over.
	clk.Advance(time.Second)
	select {
	case dead := <-b.takeovers:
		if dead != "wa" {
			t.Fatalf("took over %s", dead)
		}
	case <-ctx.Done():
		t.Fatal("b never took a's run over")
	}
	in, err := b.e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if in.State != instance.Completed || in.Report != "done after count 1" || counts.Load() != 1 || slows.Load() != 1 {
		t.Fatalf("instance %+v; count ran %d times, slow %d", in, counts.Load(), slows.Load())
	}
}
