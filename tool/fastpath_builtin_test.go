package tool_test

import (
	"testing"

	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/builtin"
)

// TestBuiltinSchemasTakeTheFastPath: the fast validator is only worth its
// code if the built-ins' schemas stay inside its subset; a keyword added to
// a built-in schema that it does not know fails here, not silently in a
// benchmark.
func TestBuiltinSchemasTakeTheFastPath(t *testing.T) {
	t.Parallel()
	tools, err := builtin.Tools(builtin.Config{Workspace: t.TempDir(), SearchURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if spec := tl.Spec(); !tool.OnFastPath(spec.InputSchema) {
			t.Errorf("%s: schema outside the fast subset: %s", spec.Name, spec.InputSchema)
		}
	}
}
