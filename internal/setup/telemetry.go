package setup

import (
	"context"
	"time"

	"github.com/deputy-run/deputy/agentdef"
	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/telemetry"
)

// FlushTimeout bounds how long closing waits for the last spans to reach
// the collector: a collector that is down must not hold the process.
const FlushTimeout = 5 * time.Second

// Telemetry returns the tracer of a process that runs instances on st (off
// unless an OTEL_EXPORTER_OTLP_*ENDPOINT variable or cfg's telemetry
// section turns it on: see telemetry.Setup) and its close, which ends the
// spans still open and flushes them within FlushTimeout; call it after the
// engine has stopped and before st closes. Roots' models and a resumed
// child's root come from the store. onError hears export failures (nil:
// stderr). Feed it events with Tracer.Hook.
func Telemetry(ctx context.Context, cfg *agentdef.Config, st *store.Store, onError func(error)) (*telemetry.Tracer, func() error, error) {
	var tc agentdef.TelemetryConfig
	if cfg != nil {
		tc = cfg.Telemetry
	}
	tr, shutdown, err := telemetry.Setup(ctx, telemetry.Options{Enabled: tc.Enabled, Endpoint: tc.Endpoint,
		Content: tc.Content, OnError: onError, Lookup: storeLookup(st)})
	if err != nil {
		return nil, nil, err
	}
	return tr, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
		defer cancel()
		return shutdown(ctx)
	}, nil
}

// storeLookup reads what events do not carry from the instance's record:
// a root's model and task, a child's root.
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
