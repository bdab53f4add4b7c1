package llm

import (
	"context"
	"testing"
)

func TestAttemptObserversNest(t *testing.T) {
	t.Parallel()
	var order []string
	ReportAttempt(context.Background(), Attempt{N: 1}) // no observer: nothing happens
	ctx := WithAttemptObserver(context.Background(), func(a Attempt) { order = append(order, "outer") })
	ctx = WithAttemptObserver(ctx, nil) // ignored
	inner := WithAttemptObserver(ctx, func(a Attempt) { order = append(order, "inner") })
	ReportAttempt(inner, Attempt{N: 1})
	ReportAttempt(ctx, Attempt{N: 2})
	want := []string{"inner", "outer", "outer"}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
	if !(Attempt{}).OK() || (Attempt{Err: context.Canceled}).OK() {
		t.Error("OK")
	}
}
