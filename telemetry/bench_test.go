//go:build unix

package telemetry_test

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/deputy-run/deputy/agent"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/loop"
	"github.com/deputy-run/deputy/telemetry"
)

// discard is a span processor that keeps nothing: the benchmark measures
// the tracer and the SDK's span recording, not an exporter.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// BenchmarkTracerEvent feeds one instance's run: a turn of a model call
// streaming 20 deltas and two tool calls, then an answering turn; ns/event
// is the mean over every event, deltas (which cost nothing) included.
func BenchmarkTracerEvent(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}), sdktrace.WithIDGenerator(telemetry.IDGenerator()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := telemetry.New(tp, telemetry.Options{})
	u := llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 3000}
	var run []agent.Event
	step := func(le loop.Event) {
		run = append(run, agent.Event{Kind: agent.EventStep, Instance: "i-bench", Type: "root", Loop: le})
	}
	run = append(run, agent.Event{Kind: agent.EventSpawned, Instance: "i-bench", Type: "root"})
	step(loop.Event{Kind: loop.EventTurnStarted, Turn: 1})
	for range 20 {
		step(loop.Event{Kind: loop.EventModelDelta, Turn: 1, Delta: llm.Delta{Text: "word "}})
	}
	step(loop.Event{Kind: loop.EventModelResponse, Turn: 1, Usage: u, ModelStop: llm.StopToolUse})
	for _, id := range []string{"toolu_1", "toolu_2"} {
		step(loop.Event{Kind: loop.EventToolCall, Turn: 1, Block: llm.ToolUse(id, "read_file", json.RawMessage(`{"path":"a.go"}`))})
	}
	for _, id := range []string{"toolu_1", "toolu_2"} {
		step(loop.Event{Kind: loop.EventToolResult, Turn: 1, Block: llm.ToolResult(id, "package a", false)})
	}
	step(loop.Event{Kind: loop.EventTurnStarted, Turn: 2})
	step(loop.Event{Kind: loop.EventModelResponse, Turn: 2, Usage: u, ModelStop: llm.StopEndTurn})
	step(loop.Event{Kind: loop.EventFinished, Turn: 2, Usage: u, Stop: loop.StopCompleted})
	run = append(run, agent.Event{Kind: agent.EventEnded, Instance: "i-bench", Type: "root"})

	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		for _, e := range run {
			tr.Event(e)
		}
	}
	events := float64(b.N * len(run))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
	// The process's CPU time (garbage collection included) per event: on a
	// shared machine, wall time also counts the time others ran.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/events, "cpu-ns/event")
	b.ReportMetric(float64(len(run)), "events/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
