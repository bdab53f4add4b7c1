package deputy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/telemetry"
)

// A program's runtime traces when its Options ask for it: a root that asks and
// is answered runs twice, and both runs are invoke_agent spans of one
// trace, the first ended as suspended; Close flushes them.
func TestLibraryTracesAcrossRuns(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	type span struct {
		name, state string
		trace       []byte
	}
	var got []span
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := span{name: s.Name, trace: s.TraceId}
					for _, kv := range s.Attributes {
						if kv.Key == "deputy.state" {
							sp.state = kv.Value.GetStringValue()
						}
					}
					got = append(got, sp)
				}
			}
		}
	}))
	defer srv.Close()

	dir := t.TempDir()
	ctx := context.Background()
	rt, err := deputy.Open(ctx, deputy.Options{ModelSpec: "fake", Scenario: []byte(askScenario), Workspace: dir,
		DB: filepath.Join(dir, "deputy.db"), Telemetry: &deputy.Telemetry{Endpoint: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := rt.Run(ctx, deputy.Task{Text: "merge it"})
	if err == nil && in.State == deputy.Asking {
		if err = rt.Answer(ctx, in.ID, "main"); err == nil {
			in, err = rt.Wait(ctx, in.ID)
		}
	}
	if err != nil || in.State != deputy.Completed {
		t.Fatalf("run: %v %+v", err, in)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := telemetry.TraceID(in.ID)
	var states []string
	for _, s := range got {
		if string(s.trace) != string(want[:]) {
			t.Errorf("%s in another trace", s.name)
		}
		if s.name == "invoke_agent root" {
			states = append(states, s.state)
		}
	}
	if len(states) != 2 || states[0] == states[1] {
		t.Errorf("root runs ended %v, want suspended and completed", states)
	}
	if len(got) < 4 {
		t.Errorf("only %d spans", len(got))
	}
}
