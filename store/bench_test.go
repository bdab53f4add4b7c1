package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/store/storetest"
)

// BenchmarkTurn measures what a managed turn writes to the store beside the
// engine's checkpoints: the turn's two messages, one attempt, the progress
// totals and one event. Part of the durable overhead per turn.
func BenchmarkTurn(b *testing.B) {
	for _, h := range []struct {
		name string
		h    storetest.Harness
	}{{"sqlite", sqliteHarness}, {"postgres", postgresHarness}} {
		b.Run(h.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := store.Open(ctx, h.h.NewURL(b), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.CreateInstance(ctx, &instance.Record{ID: "bench", Type: "worker"}); err != nil {
				b.Fatal(err)
			}
			if err := s.Transition(ctx, "bench", instance.Running, "bench"); err != nil {
				b.Fatal(err)
			}
			call := llm.Message{Role: llm.Assistant, Content: []llm.Block{llm.Text("Reading it."),
				llm.ToolUse("tu", "read", json.RawMessage(`{"path":"README.md"}`))}}
			result := llm.Message{Role: llm.User, Content: []llm.Block{llm.ToolResult("tu", "# deputy\n...", false)}}
			event := json.RawMessage(`{"tool":"read"}`)
			var usage llm.Usage
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.AppendMessages(ctx, "bench", i, 2*i, []llm.Message{call, result}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.RecordAttempt(ctx, "bench", i, llm.Attempt{Provider: "fake", N: 1, Status: 200, Latency: time.Millisecond}); err != nil {
					b.Fatal(err)
				}
				usage.Add(llm.Usage{InputTokens: 100, OutputTokens: 20})
				if err := s.UpdateProgress(ctx, "bench", i+1, i+1, usage, nil); err != nil {
					b.Fatal(err)
				}
				if _, err := s.AppendEvent(ctx, "bench", "tool", event); err != nil {
					b.Fatal(fmt.Errorf("event: %w", err))
				}
			}
		})
	}
}

// BenchmarkEventWake measures an event's commit until a waiter on
// EventsWritten is woken, on Postgres: in the committing process (the
// channel closed after the commit) and in another (the statement
// trigger's NOTIFY heard on the listener's connection). One op is one
// commit and its wake-up; wake-ns/op is the part after the commit returned.
func BenchmarkEventWake(b *testing.B) {
	ctx := context.Background()
	url := postgresHarness.NewURL(b)
	writer, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer writer.Close()
	other, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	if err := writer.CreateInstance(ctx, &instance.Record{ID: "bench", Type: "worker"}); err != nil {
		b.Fatal(err)
	}
	<-other.EventsWritten() // listening
	event := json.RawMessage(`{"tool":"read"}`)
	for _, c := range []struct {
		name   string
		reader *store.Store
	}{{"same-process", writer}, {"other-process", other}} {
		b.Run(c.name, func(b *testing.B) {
			var after time.Duration
			for i := 0; i < b.N; i++ {
				woken := c.reader.EventsWritten()
				if _, err := writer.AppendEvent(ctx, "bench", "tool", event); err != nil {
					b.Fatal(err)
				}
				committed := time.Now()
				select {
				case <-woken:
				case <-time.After(10 * time.Second):
					b.Fatal("never woken")
				}
				after += time.Since(committed)
			}
			b.ReportMetric(float64(after.Nanoseconds())/float64(b.N), "wake-ns/op")
		})
	}
}
