package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/deputy-run/deputy/store"
)

// The CLI's --json shows an instance as the HTTP API does: its record's
// View (instance.Record.View), the same keys with the same values, in run
// --json, show, ps and tree alike. serve's TestInstanceJSONIsTheRecordsView
// checks the API's side against the same View.
func TestJSONIsTheAPIsInstance(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	out, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "--json", "-q", "count files")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	var run struct {
		ID        string            `json:"id"`
		Instances []json.RawMessage `json:"instances"`
	}
	if err := json.Unmarshal([]byte(out), &run); err != nil || run.ID == "" || len(run.Instances) == 0 {
		t.Fatalf("run --json: %v\n%s", err, out)
	}

	ctx := context.Background()
	st, err := store.Open(ctx, dbFile(ws), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetInstance(ctx, run.ID)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rec.View())
	if err != nil {
		t.Fatal(err)
	}
	want := jsonObject(t, b)
	if _, ok := want["definition"]; ok || len(rec.Definition) == 0 {
		t.Fatalf("the view keeps the definition, or the record has none: %s", b)
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
			var flat bytes.Buffer // the CLI indents its JSON
			if err := json.Compact(&flat, got[k]); err != nil || flat.String() != string(v) {
				t.Errorf("%s: %s is %s, the record's view says %s", what, k, got[k], v)
			}
		}
	}
	check("run --json", jsonObject(t, run.Instances[0]))

	out, errOut, code = deputy(t, ws, nil, "show", "--json", run.ID)
	if code != 0 {
		t.Fatalf("show --json: exit %d\n%s", code, errOut)
	}
	check("show --json", jsonObject(t, []byte(out)), "transcript", "transitions")

	out, errOut, code = deputy(t, ws, nil, "ps", "--all", "--json")
	var list []json.RawMessage
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("ps --all --json: exit %d\n%s\n%s", code, out, errOut)
	}
	found := false
	for _, raw := range list {
		if m := jsonObject(t, raw); str(t, m["id"]) == run.ID {
			check("ps --json", m)
			found = true
		}
	}
	if !found {
		t.Errorf("ps --all --json does not list %s:\n%s", run.ID, out)
	}

	out, errOut, code = deputy(t, ws, nil, "tree", "--json", run.ID)
	if code != 0 {
		t.Fatalf("tree --json: exit %d\n%s", code, errOut)
	}
	check("tree --json", jsonObject(t, []byte(out)), "children", "subtree")
}

// jsonObject decodes one JSON object, keeping each value raw.
func jsonObject(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return m
}
