package instance

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// View drops the definition snapshot and nothing else, without touching
// the record it was made from (the durable engine checkpoints that one
// whole).
func TestViewHidesTheDefinitionOnly(t *testing.T) {
	t.Parallel()
	cost := 0.5
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := Record{ID: "i-1", Parent: "i-0", Root: "i-0", Depth: 1, Type: "explorer", Definition: json.RawMessage(`{"name":"explorer"}`),
		Task: "t", Mode: "isolated", Model: "fake", Description: "d", State: Asking, Report: "r", Cost: &cost,
		Artifacts: []string{"a.go"}, Question: "q?", Problems: []string{"p"}, WorkflowID: "w", CreatedAt: at, UpdatedAt: at}
	keys := func(v any) []string {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	whole, shown := keys(r), keys(r.View())
	if !slices.Contains(whole, "definition") || slices.Contains(shown, "definition") ||
		len(shown) != len(whole)-1 || r.Definition == nil {
		t.Fatalf("record %v, view %v", whole, shown)
	}
}

func TestDurationIsAnEndedInstancesOnly(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := Record{State: Running, CreatedAt: start}
	if d := r.Duration(); d != 0 {
		t.Fatalf("running: %v", d)
	}
	r.State, r.EndedAt = Completed, start.Add(90*time.Second)
	if d := r.Duration(); d != 90*time.Second {
		t.Fatalf("completed: %v", d)
	}
}
