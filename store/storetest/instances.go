package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/store"
)

func testInstances(t *testing.T, h Harness) {
	e := newEnv(t, h)
	def := json.RawMessage(`{"name":"worker",  "tools":["read"],"max_turns":3}`)
	root := &instance.Record{ID: "r1", Type: "main", Definition: def, Task: "do it", Mode: "root", Model: "fake:big"}
	noErr(t, "create root", e.s.CreateInstance(e.ctx, root))
	if root.State != instance.Created || root.Root != "r1" || root.Depth != 0 || !root.CreatedAt.Equal(Epoch) || !root.UpdatedAt.Equal(Epoch) {
		t.Fatalf("created root: %+v", root)
	}
	got := e.get("r1")
	if got.ID != "r1" || got.Parent != "" || got.Type != "main" || string(got.Definition) != string(def) ||
		got.Task != "do it" || got.Mode != "root" || got.Model != "fake:big" || got.State != instance.Created ||
		!got.EndedAt.IsZero() || got.Cost != nil || got.Turns != 0 || got.Usage != (llm.Usage{}) {
		t.Fatalf("stored root: %+v", got)
	}

	e.clock.Advance(time.Second)
	child := e.create("c1", "r1")
	if child.Root != "r1" || child.Depth != 1 || !child.CreatedAt.Equal(Epoch.Add(time.Second)) {
		t.Fatalf("child: %+v", child)
	}
	grand := &instance.Record{ID: "g1", Parent: "c1", Root: "r1", Depth: 2, Type: "worker", Task: "task of g1", Mode: "isolated", Model: "fake:m"}
	noErr(t, "create grandchild with root and depth given", e.s.CreateInstance(e.ctx, grand))

	// The creation is the first recorded transition.
	ts := e.transitions("c1")
	if len(ts) != 1 || ts[0].Seq != 1 || ts[0].From != "" || ts[0].To != instance.Created || !ts[0].At.Equal(Epoch.Add(time.Second)) {
		t.Fatalf("transitions after create: %+v", ts)
	}

	// Creating again with the same identity is a no-op that reports what
	// is stored, even after the instance moved on.
	e.move("c1", instance.Running)
	e.clock.Advance(time.Second)
	again := &instance.Record{ID: "c1", Parent: "r1", Type: "worker", Task: "task of c1", Mode: "isolated", Model: "fake:m"}
	noErr(t, "create again", e.s.CreateInstance(e.ctx, again))
	if again.State != instance.Running || !again.CreatedAt.Equal(Epoch.Add(time.Second)) || again.Depth != 1 {
		t.Fatalf("repeated create should report the stored instance: %+v", again)
	}
	if n := len(e.transitions("c1")); n != 2 {
		t.Fatalf("a repeated create recorded a transition: %d transitions", n)
	}
	rootAgain := &instance.Record{ID: "r1", Type: "main", Definition: def, Task: "do it", Mode: "root", Model: "fake:big"}
	noErr(t, "create root again", e.s.CreateInstance(e.ctx, rootAgain))
}

func testInstanceConflicts(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("r1", "")
	e.create("r2", "")
	e.create("c1", "r1")
	base := instance.Record{ID: "c1", Parent: "r1", Type: "worker", Task: "task of c1", Mode: "isolated", Model: "fake:m"}
	for _, tc := range []struct {
		name string
		edit func(*instance.Record)
	}{
		{"parent", func(in *instance.Record) { in.Parent = "r2" }},
		{"type", func(in *instance.Record) { in.Type = "other" }},
		{"definition", func(in *instance.Record) { in.Definition = json.RawMessage(`{}`) }},
		{"task", func(in *instance.Record) { in.Task = "another task" }},
		{"mode", func(in *instance.Record) { in.Mode = "fork" }},
		{"model", func(in *instance.Record) { in.Model = "fake:other" }},
	} {
		in := base
		tc.edit(&in)
		err := e.s.CreateInstance(e.ctx, &in)
		wantErr(t, "create c1 with a different "+tc.name, err, store.ErrConflict)
	}
	if got := e.get("c1"); got.Task != "task of c1" || got.Parent != "r1" {
		t.Fatalf("a conflicting create changed the instance: %+v", got)
	}

	bad := []struct {
		name string
		in   instance.Record
		is   error
	}{
		{"empty id", instance.Record{}, nil},
		{"missing parent", instance.Record{ID: "x", Parent: "nope"}, store.ErrNotFound},
		{"own parent", instance.Record{ID: "x", Parent: "x"}, nil},
		{"root with a root", instance.Record{ID: "x", Root: "r1"}, nil},
		{"root with depth", instance.Record{ID: "x", Depth: 3}, nil},
		{"child in another tree", instance.Record{ID: "x", Parent: "c1", Root: "r2"}, nil},
		{"child at a wrong depth", instance.Record{ID: "x", Parent: "c1", Depth: 5}, nil},
		{"invalid definition", instance.Record{ID: "x", Definition: json.RawMessage(`{"a":`)}, nil},
	}
	for _, tc := range bad {
		in := tc.in
		err := e.s.CreateInstance(e.ctx, &in)
		if err == nil {
			t.Fatalf("create with %s: no error", tc.name)
		}
		if tc.is != nil {
			wantErr(t, "create with "+tc.name, err, tc.is)
		}
	}
	if _, err := e.s.GetInstance(e.ctx, "x"); err == nil {
		t.Fatal("a refused create left an instance x")
	}
}

func testListInstances(t *testing.T, h Harness) {
	e := newEnv(t, h)
	// Two trees: r1 → a, b; a → a1; r2 alone. Created a second apart.
	for _, c := range [][2]string{{"r1", ""}, {"a", "r1"}, {"b", "r1"}, {"a1", "a"}, {"r2", ""}} {
		e.create(c[0], c[1])
		e.clock.Advance(time.Second)
	}
	e.move("a", instance.Running)
	e.move("b", instance.Cancelled)
	e.move("r2", instance.Running)
	e.move("r2", instance.Paused)

	ids := func(f store.Filter) []string { t.Helper(); return listIDs(t, e, f) }
	for _, tc := range []struct {
		f    store.Filter
		want []string
	}{
		{store.Filter{}, []string{"r1", "a", "b", "a1", "r2"}},
		{store.Filter{Root: "r1"}, []string{"r1", "a", "b", "a1"}},
		{store.Filter{Parent: "r1"}, []string{"a", "b"}},
		{store.Filter{Parent: "a"}, []string{"a1"}},
		{store.Filter{OnlyRoots: true}, []string{"r1", "r2"}},
		{store.Filter{States: []instance.State{instance.Running, instance.Paused}}, []string{"a", "r2"}},
		{store.Filter{Active: true}, []string{"r1", "a", "a1", "r2"}},
		{store.Filter{Active: true, Root: "r1", Limit: 2}, []string{"r1", "a"}},
		{store.Filter{States: []instance.State{instance.Cancelled}, Root: "r2"}, nil},
		{store.Filter{Limit: 1}, []string{"r1"}},
		{store.Filter{Parent: "nobody"}, nil},
	} {
		if got := ids(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("list %+v: got %v, want %v", tc.f, got, tc.want)
		}
	}
	list, err := e.s.ListInstances(e.ctx, store.Filter{Parent: "a"})
	noErr(t, "list", err)
	if list[0].Root != "r1" || list[0].Depth != 2 || list[0].Task != "task of a1" {
		t.Fatalf("listed instance lacks its fields: %+v", list[0])
	}
}

// listIDs lists the ids f selects, in the store's order.
func listIDs(t *testing.T, e *env, f store.Filter) []string {
	t.Helper()
	list, err := e.s.ListInstances(e.ctx, f)
	noErr(t, fmt.Sprintf("list %+v", f), err)
	var out []string
	for _, in := range list {
		out = append(out, in.ID)
	}
	return out
}

// testCreationOrder: instances created at one instant (a turn's parallel
// spawns, a fake clock) list in the order they were created, not by their
// ids, which are random.
func testCreationOrder(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.create("r", "")
	for _, id := range []string{"z", "m", "a", "q"} {
		e.create(id, "r")
	}
	if got, want := listIDs(t, e, store.Filter{Parent: "r"}), []string{"z", "m", "a", "q"}; !slices.Equal(got, want) {
		t.Errorf("children: got %v, want %v (creation order)", got, want)
	}
	// Creating one again (a replay after a crash) keeps its place.
	e.create("m", "r")
	if got, want := listIDs(t, e, store.Filter{Root: "r"}), []string{"r", "z", "m", "a", "q"}; !slices.Equal(got, want) {
		t.Errorf("tree: got %v, want %v", got, want)
	}
}

func testProgress(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.createIn("i", instance.Running)
	e.clock.Advance(3 * time.Second)
	u := llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 900, CacheWriteTokens: 50}
	noErr(t, "progress", e.s.UpdateProgress(e.ctx, "i", 3, 5, u, ptr(0.0125)))
	got := e.get("i")
	if got.Turns != 3 || got.ToolCalls != 5 || got.Usage != u || got.Cost == nil || *got.Cost != 0.0125 ||
		!got.UpdatedAt.Equal(Epoch.Add(3*time.Second)) || got.State != instance.Running {
		t.Fatalf("after progress: %+v", got)
	}
	// Absolute values: a repeat changes nothing; nil cost means unpriced.
	noErr(t, "progress again", e.s.UpdateProgress(e.ctx, "i", 3, 5, u, ptr(0.0125)))
	noErr(t, "progress unpriced", e.s.UpdateProgress(e.ctx, "i", 4, 6, u, nil))
	if got := e.get("i"); got.Turns != 4 || got.ToolCalls != 6 || got.Cost != nil {
		t.Fatalf("after unpriced progress: %+v", got)
	}
	noErr(t, "set workflow", e.s.SetWorkflow(e.ctx, "i", "wf-1"))
	if got := e.get("i"); got.WorkflowID != "wf-1" {
		t.Fatalf("workflow id: %q", got.WorkflowID)
	}
	// Paused and asking instances are active: progress is still recorded.
	e.move("i", instance.Paused)
	noErr(t, "progress while paused", e.s.UpdateProgress(e.ctx, "i", 5, 6, u, nil))
}
