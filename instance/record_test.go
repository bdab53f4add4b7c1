package instance

import (
	"encoding/json"
	"slices"
	"strings"
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

// Every instance object has the keys scripts rely on, a root's parent ""
// among them; the JSON reads back into the same record, and a view that
// embeds the record keeps its own fields.
func TestRecordJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	root := Record{ID: "i-0", Root: "i-0", Type: "root", State: Created, CreatedAt: at, UpdatedAt: at}
	b, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"i-0","parent":"","root":"i-0","depth":0,"type":"root","state":"created","report":"",` +
		`"usage":{"input_tokens":0,"output_tokens":0},"turns":0,"tool_calls":0,` +
		`"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`
	if string(b) != want {
		t.Fatalf("root:\n%s\nwant\n%s", b, want)
	}
	cost := 1.5
	kid := Record{ID: "i-1", Parent: "i-0", Root: "i-0", Depth: 1, Type: "explorer", Definition: json.RawMessage(`{"name":"explorer"}`),
		State: Completed, Report: "r", Cost: &cost, Artifacts: []string{"a.go"}, CreatedAt: at, UpdatedAt: at, EndedAt: at}
	b, err = json.Marshal(kid)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"id":"i-1","parent":"i-0","root":"i-0",`) {
		t.Fatalf("child: %s", b)
	}
	for _, r := range []Record{root, kid} {
		b, _ := json.Marshal(r)
		var back Record
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(b) || back.Parent != r.Parent {
			t.Errorf("round trip of %s: %s", b, again)
		}
	}
	b, err = json.Marshal(struct {
		Record
		Children []Record `json:"children"`
	}{root.View(), []Record{kid.View()}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"id":"i-0","parent":"",`) || !strings.Contains(string(b), `"children":[{"id":"i-1","parent":"i-0",`) {
		t.Fatalf("a node embedding the record: %s", b)
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
