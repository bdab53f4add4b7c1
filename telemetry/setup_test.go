package telemetry_test

// Setup's tests read and set OTEL_* variables (t.Setenv), so they do not
// run in parallel; each exports to a real OTLP/HTTP endpoint on loopback.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/telemetry"
)

// clearEnv unsets what would turn telemetry on or change it behind a
// test's back.
func clearEnv(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"} {
		t.Setenv(k, "")
	}
}

// collector is an OTLP/HTTP endpoint that keeps what it receives and
// answers with status (and, for an error, a body echoing every request
// header, as a careless collector might).
type collector struct {
	srv    *httptest.Server
	status int

	mu   sync.Mutex
	reqs []received
}

type received struct {
	path, contentType string
	header            http.Header
	body              []byte
}

func newCollector(t *testing.T, status int) *collector {
	c := &collector{status: status}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.reqs = append(c.reqs, received{r.URL.Path, r.Header.Get("Content-Type"), r.Header.Clone(), body})
		c.mu.Unlock()
		if c.status != http.StatusOK {
			var echo bytes.Buffer
			_ = r.Header.Write(&echo)
			http.Error(w, "rejected; you sent:\n"+echo.String(), c.status)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) received() []received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]received(nil), c.reqs...)
}

func TestSetupOffWithoutEndpoint(t *testing.T) {
	clearEnv(t)
	tr, shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{Endpoint: "http://127.0.0.1:1"})
	if err != nil || tr.Enabled() || shutdown(context.Background()) != nil {
		t.Fatalf("without the variables and enabled, telemetry must be off: %v %v", tr.Enabled(), err)
	}
	// The SDK's own off switch wins over an endpoint.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if tr, _, err := telemetry.Setup(context.Background(), telemetry.Options{Enabled: true}); err != nil || tr.Enabled() {
		t.Fatalf("OTEL_SDK_DISABLED=true: %v %v", tr.Enabled(), err)
	}
}

// The variable alone turns export on: spans of a real run arrive as
// protobuf at /v1/traces, under service.name deputy, with the header.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	clearEnv(t)
	c := newCollector(t, http.StatusOK)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=sk-test-HEADER-SECRET-42")
	clk := clock.NewFake(t0)
	tr, shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{Clock: clk,
		Lookup: func(string) (telemetry.Known, bool) { return telemetry.Known{Root: "i-otlp", Model: spec}, true }})
	if err != nil || !tr.Enabled() {
		t.Fatalf("setup: %v", err)
	}
	w := &world{tr: tr, clk: clk}
	w.runTree(t, "i-otlp", scripted(t, treeScenario))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	reqs := c.received()
	if len(reqs) == 0 {
		t.Fatal("nothing exported")
	}
	names := map[string]bool{}
	for _, r := range reqs {
		if r.path != "/v1/traces" || r.contentType != "application/x-protobuf" || r.header.Get("X-Api-Key") != "sk-test-HEADER-SECRET-42" {
			t.Errorf("request %s %s header %q", r.path, r.contentType, r.header.Get("X-Api-Key"))
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(r.body, &req); err != nil {
			t.Fatalf("body is not an OTLP protobuf request: %v", err)
		}
		want := telemetry.TraceID("i-otlp")
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, kv := range rs.Resource.Attributes {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			if service != "deputy" {
				t.Errorf("service.name %q", service)
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names[s.Name] = true
					if !bytes.Equal(s.TraceId, want[:]) {
						t.Errorf("%s: trace %x, want %s", s.Name, s.TraceId, want)
					}
					// The clock only moves in boom's two seconds.
					if start := time.Unix(0, int64(s.StartTimeUnixNano)); start.Before(t0) || start.After(t0.Add(2*time.Second)) {
						t.Errorf("%s: starts at %v, not on the test's clock", s.Name, start)
					}
				}
			}
		}
	}
	if names["chat"] {
		t.Error("a model call without its model's name")
	}
	for _, n := range []string{"invoke_agent root", "invoke_agent explorer", "invoke_agent worker", "chat claude-test",
		"execute_tool spawn_subagent", "execute_tool boom"} {
		if !names[n] {
			t.Errorf("span %q not exported (got %v)", n, names)
		}
	}
}

// deputy.yaml's endpoint is a base URL: /v1/traces is added.
func TestSetupConfigEndpoint(t *testing.T) {
	clearEnv(t)
	c := newCollector(t, http.StatusOK)
	tr, shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{Enabled: true, Endpoint: c.srv.URL + "/otlp/"})
	if err != nil || !tr.Enabled() {
		t.Fatalf("setup: %v", err)
	}
	(&world{tr: tr, clk: clock.NewFake(t0)}).runTree(t, "i-config", scripted(t, treeScenario))
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := c.received(); len(r) == 0 || r[0].path != "/otlp/v1/traces" {
		t.Fatalf("requests %v", r)
	}
}

// A collector that refuses, echoing the API key it was sent: the failure
// is reported, the key, the URL's password and its token are not.
func TestSetupErrorsHideSecrets(t *testing.T) {
	clearEnv(t)
	const key, password, token = "Bearer tok-HEADER-SECRET-77", "URL-PASSWORD-88", "QUERY-TOKEN-99"
	c := newCollector(t, http.StatusUnauthorized)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization="+strings.ReplaceAll(key, " ", "%20"))
	endpoint := strings.Replace(c.srv.URL, "http://", "http://deputy:"+password+"@", 1) + "/?token=" + token
	var mu sync.Mutex
	var handled []string
	tr, shutdown, err := telemetry.Setup(context.Background(), telemetry.Options{Enabled: true, Endpoint: endpoint,
		OnError: func(err error) {
			mu.Lock()
			handled = append(handled, err.Error())
			mu.Unlock()
		}})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	(&world{tr: tr, clk: clock.NewFake(t0)}).runTree(t, "i-refused", scripted(t, treeScenario))
	serr := shutdown(context.Background())
	mu.Lock()
	reports := append([]string{}, handled...)
	mu.Unlock()
	if serr != nil {
		reports = append(reports, serr.Error())
	}
	// The key was sent, and the collector echoed it back in its body.
	if r := c.received(); len(r) == 0 || r[0].header.Get("Authorization") != key {
		t.Fatalf("the header was not sent: %v", r)
	}
	saw401 := false
	for _, msg := range reports {
		saw401 = saw401 || strings.Contains(msg, "401")
		for _, secret := range []string{"tok-HEADER-SECRET-77", password, token} {
			if strings.Contains(msg, secret) {
				t.Errorf("a secret in a report: %s", msg)
			}
		}
	}
	if !saw401 {
		t.Errorf("the refusal was not reported: %q", reports)
	}
}
