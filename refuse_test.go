package deputy_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/llm/fake"
)

// A fan-out on a runtime with no model, naming none, is refused before
// anything is recorded, as Start refuses a root on none.
func TestFanOutWithNoModelIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	rt, err := deputy.Open(ctx, deputy.Options{Workspace: dir, DB: filepath.Join(dir, "d.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	_, err = rt.StartFanOut(ctx, deputy.FanOut{Tasks: []deputy.FanTask{{ID: "a", Type: "explorer", Task: "x"}}})
	if !errors.Is(err, deputy.ErrRefused) || !strings.Contains(err.Error(), "FanOut.Model") {
		t.Fatalf("fan-out on no model: %v", err)
	}
	if ins, err := rt.List(ctx, deputy.Filter{}); err != nil || len(ins) != 0 {
		t.Errorf("recorded %d instances (%v)", len(ins), err)
	}
}

// Enqueue leaves the run to the database's workers, none of which holds a
// program's own model: such a root is refused, nothing recorded.
func TestEnqueueOnTheProgramsModelIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	o := deputy.Options{Model: fake.NewModel(fake.DemoScenario(), fake.WithoutLatency()), Workspace: dir, DB: filepath.Join(dir, "d.db")}
	_, err := deputy.Enqueue(ctx, o, deputy.Task{Text: "go"})
	if !errors.Is(err, deputy.ErrRefused) || !strings.Contains(err.Error(), "Options.Model") {
		t.Fatalf("enqueue on the program's model: %v", err)
	}
	// A task naming a model by spec is the workers' to run.
	if _, err := deputy.Enqueue(ctx, o, deputy.Task{Text: "go", Model: "fake"}); err != nil {
		t.Fatalf("enqueue on fake: %v", err)
	}
	rt, err := deputy.Open(ctx, deputy.Options{ModelSpec: "fake", Workspace: dir, DB: o.DB})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	// Open adopts the queued root at once, and its children may be listed
	// already: count the roots.
	ins, err := rt.List(ctx, deputy.Filter{})
	roots := 0
	for _, in := range ins {
		if in.Parent == "" {
			roots++
		}
	}
	if err != nil || roots != 1 {
		t.Errorf("recorded %d roots (%v), want the one on fake", roots, err)
	}
}
