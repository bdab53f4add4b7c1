package serve_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// jsonObject decodes one JSON object, keeping each value raw.
func jsonObject(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return m
}

// The API shows an instance as its record's View (the renderer the CLI's
// --json uses too, so both name every field alike): the one instance, its
// list entry and its tree node carry the same keys with the same values,
// the definition snapshot left out, the open question filled in. The CLI's
// side is cmd/deputy's TestJSONIsTheAPIsInstance.
func TestInstanceJSONIsTheRecordsView(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var started struct{ ID string }
	e.want(201, "POST", "/api/instances", `{"task":"merge the work"}`, &started)
	e.settle(started.ID)

	rec, err := e.rt.Get(context.Background(), started.ID)
	if err != nil {
		t.Fatal(err)
	}
	// (This package's tests name a type of their own instance, so the
	// state is spelled, not imported.)
	if rec.State != "asking" || len(rec.Definition) == 0 {
		t.Fatalf("the root: state %s, %d bytes of definition", rec.State, len(rec.Definition))
	}
	view := rec.View()
	view.Question = "Which branch?"
	b, err := json.Marshal(view)
	if err != nil {
		t.Fatal(err)
	}
	want := jsonObject(t, b)
	if _, ok := want["definition"]; ok {
		t.Fatal("View keeps the definition")
	}

	check := func(what string, got map[string]json.RawMessage, extra ...string) {
		t.Helper()
		for _, k := range extra {
			delete(got, k)
		}
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
			t.Errorf("%s: keys %v, the record's view has %v", what, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			return
		}
		for k, v := range want {
			if string(got[k]) != string(v) {
				t.Errorf("%s: %s is %s, the record's view says %s", what, k, got[k], v)
			}
		}
	}
	_, one, _ := e.do("GET", "/api/instances/"+started.ID, "")
	check("GET /api/instances/{id}", jsonObject(t, one))

	var list struct{ Instances []json.RawMessage }
	e.want(200, "GET", "/api/instances?roots=true", "", &list)
	if len(list.Instances) != 1 {
		t.Fatalf("%d roots", len(list.Instances))
	}
	check("GET /api/instances", jsonObject(t, list.Instances[0]))

	var tree struct{ Root json.RawMessage }
	e.want(200, "GET", "/api/instances/"+started.ID+"/tree", "", &tree)
	check("GET /api/instances/{id}/tree", jsonObject(t, tree.Root), "children", "subtree")

	// A root's parent is "", not missing: the key is on every object.
	if p, ok := jsonObject(t, one)["parent"]; !ok || string(p) != `""` {
		t.Errorf("a root's parent: %q (present %v)", p, ok)
	}
}
