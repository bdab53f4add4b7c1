package retry

import (
	"context"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

// BenchmarkDo is the retry wrapper's cost around one successful attempt:
// attempt context, stall watchdog on the real clock, attempt report.
func BenchmarkDo(b *testing.B) {
	p := Default()
	ctx := llm.WithAttemptObserver(context.Background(), func(llm.Attempt) {})
	call := func(ctx context.Context, w *Watchdog) (Outcome, error) { w.Kick(); return Outcome{Status: 200}, nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Do(ctx, "p", "m", call); err != nil {
			b.Fatal(err)
		}
	}
}
