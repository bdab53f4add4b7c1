package deputy_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/durable"
)

const (
	scenarioA = "rules:\n  - text: \"answered by A\"\n"
	scenarioB = "rules:\n  - text: \"answered by B\"\n"
)

// fakeOn is the options of a fake runtime on dir's database playing yaml
// (none: the built-in demo), named name.
func fakeOn(dir, name, yaml string) deputy.Options {
	o := deputy.Options{ModelSpec: "fake", Workspace: dir, DB: filepath.Join(dir, "d.db")}
	if yaml != "" {
		o.Scenario, o.ScenarioName = []byte(yaml), name
	}
	return o
}

// A root records its scenario: a runtime playing another refuses the
// database before resuming anything, RecordedScenario reads it back, and
// a runtime opened on it finishes the run on its answers.
func TestARunKeepsTheScenarioItStartedOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	id, err := deputy.Enqueue(ctx, fakeOn(dir, "a.yaml", scenarioA), deputy.Task{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []deputy.Options{fakeOn(dir, "b.yaml", scenarioB), fakeOn(dir, "", "")} {
		rt, err := deputy.Open(ctx, o)
		if err == nil {
			rt.Close()
			t.Fatalf("a runtime playing %q opened a database whose root started on a.yaml", o.ScenarioName)
		}
		if !errors.Is(err, deputy.ErrScenarioMismatch) || !strings.Contains(err.Error(), "instance "+id+" was started on scenario a.yaml") ||
			!strings.Contains(err.Error(), "--scenario a.yaml") {
			t.Fatalf("Open playing %q: %v", o.ScenarioName, err)
		}
	}
	name, yaml, err := deputy.RecordedScenario(ctx, fakeOn(dir, "", ""))
	if err != nil || name != "a.yaml" || string(yaml) != scenarioA {
		t.Fatalf("RecordedScenario = %q, %q, %v", name, yaml, err)
	}
	rt, err := deputy.Open(ctx, fakeOn(dir, name, string(yaml)))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if in, err := rt.Wait(ctx, id); err != nil || in.State != deputy.Completed || in.Report != "answered by A" {
		t.Fatalf("%v %+v", err, in)
	}
}

func TestRecordedScenariosThatDifferAreNamed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	a, err := deputy.Enqueue(ctx, fakeOn(dir, "a.yaml", scenarioA), deputy.Task{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	demo, err := deputy.Enqueue(ctx, fakeOn(dir, "", ""), deputy.Task{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = deputy.RecordedScenario(ctx, fakeOn(dir, "", ""))
	if !errors.Is(err, deputy.ErrScenarioMismatch) || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), demo) ||
		!strings.Contains(err.Error(), "the built-in demo") {
		t.Fatalf("RecordedScenario over a.yaml and the demo: %v", err)
	}
}

// A root queued after the runtime opened, on a scenario it does not play,
// fails its run saying so instead of playing other answers.
func TestALateRootOnAnotherScenarioFailsSayingWhy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	rt, err := deputy.Open(ctx, fakeOn(dir, "a.yaml", scenarioA))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	id, err := deputy.Enqueue(ctx, fakeOn(dir, "b.yaml", scenarioB), deputy.Task{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := rt.Wait(ctx, id)
	if err != nil || in.State != deputy.Failed || !strings.Contains(in.Error, "was started on scenario b.yaml, and this runtime plays scenario a.yaml") {
		t.Fatalf("%v %+v", err, in)
	}
}

func TestAScenarioTooBigToRecordIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := fakeOn(dir, "big.yaml", "rules:\n  - text: \""+strings.Repeat("x", durable.MaxScenarioBytes)+"\"\n")
	rt, err := deputy.Open(context.Background(), o)
	if err == nil {
		rt.Close()
		t.Fatal("opened")
	}
	if !strings.Contains(err.Error(), "scenario big.yaml:") || !strings.Contains(err.Error(), "more than the 1048576 a run records") {
		t.Fatal(err)
	}
}
