package setup

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/telemetry"
)

// The tracer learns a root's model and a resumed grandchild's root from the
// store, as the engine recorded them.
func TestTelemetryLookupReadsTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "deputy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, in := range []*store.Instance{
		{ID: "i-root", Type: "root", Task: "the task", Model: "anthropic:claude-x"},
		{ID: "i-child", Parent: "i-root", Type: "explorer", Model: "fake"},
		{ID: "i-grandchild", Parent: "i-child", Type: "explorer", Model: "fake"},
	} {
		if err := st.CreateInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	look := storeLookup(st)
	if k, ok := look("i-root"); !ok || k != (telemetry.Known{Root: "i-root", Model: "anthropic:claude-x", Task: "the task"}) {
		t.Errorf("root: %+v %v", k, ok)
	}
	if k, ok := look("i-grandchild"); !ok || k.Root != "i-root" {
		t.Errorf("grandchild: %+v %v", k, ok)
	}
	if _, ok := look("i-nobody"); ok {
		t.Error("an unknown instance was found")
	}
}
