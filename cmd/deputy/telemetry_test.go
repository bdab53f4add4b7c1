package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/deputy-run/deputy/telemetry"
)

// otlpSink is an OTLP/HTTP collector on loopback that keeps the spans it
// receives, by name, and the API key header of each request.
type otlpSink struct {
	mu     sync.Mutex
	spans  map[string][][]byte // name → trace ids
	keys   []string
	server *httptest.Server
}

func newOTLPSink(t *testing.T) *otlpSink {
	s := &otlpSink{spans: map[string][][]byte{}}
	s.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.keys = append(s.keys, r.Header.Get("X-Api-Key"))
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					s.spans[sp.Name] = append(s.spans[sp.Name], sp.TraceId)
				}
			}
		}
	}))
	t.Cleanup(s.server.Close)
	return s
}

// deputy run exports its tree's spans when the OTLP variable is set, in
// the trace its root's id names, and flushes them before it exits.
func TestRunExportsTraces(t *testing.T) {
	t.Parallel()
	sink := newOTLPSink(t)
	ws := t.TempDir()
	out, errOut, code := deputy(t, ws, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.server.URL,
		"OTEL_EXPORTER_OTLP_HEADERS=x-api-key=sk-cli-SECRET-5150"}, "run", "--model", "fake", "--json", "describe this workspace")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var res struct{ ID string }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	want := telemetry.TraceID(res.ID)
	for _, name := range []string{"invoke_agent root", "chat fake", "execute_tool spawn_subagent", "invoke_agent explorer"} {
		ids := sink.spans[name]
		if len(ids) == 0 {
			t.Fatalf("no %q span; got %v", name, keys(sink.spans))
		}
		if string(ids[0]) != string(want[:]) {
			t.Errorf("%s in trace %x, want %s", name, ids[0], want)
		}
	}
	for _, k := range sink.keys {
		if k != "sk-cli-SECRET-5150" {
			t.Errorf("header %q", k)
		}
	}
	if strings.Contains(errOut, "SECRET") {
		t.Errorf("stderr shows the key: %s", errOut)
	}
}

// Without the variables, deputy.yaml's telemetry section turns it on.
func TestRunTracesFromConfig(t *testing.T) {
	t.Parallel()
	sink := newOTLPSink(t)
	ws := t.TempDir()
	cfg := "telemetry:\n  endpoint: " + sink.server.URL + "\n"
	if err := os.WriteFile(filepath.Join(ws, "deputy.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "-q", "describe this workspace")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.spans["invoke_agent root"]) != 1 {
		t.Fatalf("spans %v", keys(sink.spans))
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
