package deputy

import (
	"context"
	"time"

	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/telemetry"
)

// Telemetry asks a runtime for OpenTelemetry traces after the GenAI
// conventions (package telemetry): an invoke_agent span per instance run,
// chat spans per model call, execute_tool spans per tool call, one trace
// per tree, sent over OTLP/HTTP. The exporter also honours the standard
// OTEL_EXPORTER_OTLP_* variables (their endpoint wins over Endpoint, their
// headers carry credentials), OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER,
// as every OpenTelemetry exporter does; it reads them only when asked for
// traces at all.
type Telemetry struct {
	// Endpoint is the collector's base URL (/v1/traces is added); empty:
	// the exporter's default, http://localhost:4318.
	Endpoint string
	// Content records tasks, prompts, answers and tool arguments and
	// results in spans; off by default, since they may hold secrets.
	Content bool
	// OnError hears export failures (with header values and URL
	// credentials removed); nil: they are written to stderr.
	OnError func(error)
}

// flushTimeout bounds how long closing waits for the last spans to reach
// the collector: a collector that is down must not hold the process.
const flushTimeout = 5 * time.Second

// startTelemetry returns the tracer of a runtime on st (disabled when t is
// nil) and its close, which ends the spans still open and flushes them
// within flushTimeout: it is called after the engine has stopped and
// before st closes.
func startTelemetry(ctx context.Context, t *Telemetry, st *store.Store) (*telemetry.Tracer, func() error, error) {
	if t == nil {
		return &telemetry.Tracer{}, func() error { return nil }, nil
	}
	tr, shutdown, err := telemetry.Setup(ctx, telemetry.Options{Enabled: true, Endpoint: t.Endpoint,
		Content: t.Content, OnError: t.OnError, Lookup: storeLookup(st)})
	if err != nil {
		return nil, nil, err
	}
	return tr, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		return shutdown(ctx)
	}, nil
}

// storeLookup reads what events do not carry from the instance's record:
// a root's model and task, a child's root (resumed by another process).
func storeLookup(st *store.Store) func(string) (telemetry.Known, bool) {
	return func(id string) (telemetry.Known, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		in, err := st.GetInstance(ctx, id)
		if err != nil {
			return telemetry.Known{}, false
		}
		return telemetry.Known{Root: in.Root, Model: in.Model, Task: in.Task}, true
	}
}
