package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/deputy-run/deputy/agentdef"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The environment variables Setup reads itself; the exporter and the SDK
// read the rest of OTEL_* (headers, TLS, timeouts, batching, sampler,
// resource attributes) as they document.
const (
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envHeaders        = "OTEL_EXPORTER_OTLP_HEADERS"
	envTracesHeaders  = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	envContent        = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
	envDisabled       = "OTEL_SDK_DISABLED"
	envExporter       = "OTEL_TRACES_EXPORTER"
)

// ServiceName is the service.name of deputy's spans, unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise.
const ServiceName = "deputy"

// Setup returns the process's Tracer and the function that ends its open
// spans and flushes them (call it once the engine has stopped). Without
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
// o.Enabled, or with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, the
// Tracer is disabled and costs nothing. Otherwise spans are batched to an
// OTLP/HTTP (protobuf) exporter: the variables' endpoint, else o.Endpoint,
// else the exporter's default, localhost:4318.
//
// Export failures go to o.OnError through OpenTelemetry's global error
// handler, which Setup sets. No header value (OTEL_EXPORTER_OTLP_HEADERS
// often carries an API key) and no credential of an endpoint URL appears in
// what Setup, the handler or shutdown report.
func Setup(ctx context.Context, o Options) (*Tracer, func(context.Context) error, error) {
	none := func(context.Context) error { return nil }
	if !wanted(o.Enabled) {
		return &Tracer{}, none, nil
	}
	red := newRedactor(o.Endpoint)
	var opts []otlptracehttp.Option
	if os.Getenv(envEndpoint) == "" && os.Getenv(envTracesEndpoint) == "" && o.Endpoint != "" {
		u, ok := tracesURL(o.Endpoint)
		if !ok {
			return nil, nil, errors.New("telemetry: the endpoint is not an http or https URL")
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, red.wrap("telemetry: OTLP/HTTP exporter", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if res == nil {
		_ = exp.Shutdown(ctx)
		return nil, nil, red.wrap("telemetry: resource", err)
	} // a partial resource (a malformed OTEL_RESOURCE_ATTRIBUTES entry) still names the service
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(IDGenerator()))
	onErr := o.OnError
	if onErr == nil {
		onErr = func(err error) { fmt.Fprintf(os.Stderr, "deputy: %v\n", err) }
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { onErr(red.wrap("telemetry", err)) }))
	if strings.EqualFold(strings.TrimSpace(os.Getenv(envContent)), "true") {
		o.Content = true
	}
	tr := New(tp, o)
	shutdown := func(ctx context.Context) error {
		tr.Close()
		if err := errors.Join(tp.ForceFlush(ctx), tp.Shutdown(ctx)); err != nil {
			return red.wrap("telemetry: flushing spans", err)
		}
		return nil
	}
	return tr, shutdown, nil
}

// wanted decides whether spans are exported at all.
func wanted(enabled bool) bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv(envDisabled)), "true") ||
		strings.EqualFold(strings.TrimSpace(os.Getenv(envExporter)), "none") {
		return false
	}
	return enabled || os.Getenv(envEndpoint) != "" || os.Getenv(envTracesEndpoint) != ""
}

// tracesURL is an OTLP/HTTP base URL's traces endpoint, as the exporter
// does for OTEL_EXPORTER_OTLP_ENDPOINT: /v1/traces is added unless the path
// already ends with it.
func tracesURL(endpoint string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	if !strings.HasSuffix(u.Path, "/v1/traces") {
		u.Path = strings.TrimRight(u.Path, "/") + "/v1/traces"
	}
	return u.String(), true
}

// redactor removes secrets from error text: the values of the OTLP header
// variables (whole, decoded, and each word of them long enough to be a
// token: "Bearer KEY" → KEY too), and the passwords and query values of the
// endpoint URLs. The exporter's errors quote the collector's response body
// and the URL, and a collector may echo what it was sent.
type redactor struct{ secrets []string }

func newRedactor(endpoint string) *redactor {
	r := &redactor{}
	add := func(s string) {
		if s = strings.TrimSpace(s); len(s) >= 4 && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	for _, env := range []string{envHeaders, envTracesHeaders} {
		for kv := range strings.SplitSeq(os.Getenv(env), ",") {
			_, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			vals := []string{v}
			if d, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
				vals = append(vals, d)
			}
			for _, v := range vals {
				add(v)
				for _, w := range strings.Fields(v) {
					if len(w) >= 8 {
						add(w)
					}
				}
			}
		}
	}
	for _, raw := range []string{endpoint, os.Getenv(envEndpoint), os.Getenv(envTracesEndpoint)} {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			continue
		}
		if u.User != nil {
			add(u.User.String())
			if p, ok := u.User.Password(); ok {
				add(p)
			}
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
			}
		}
	}
	// Longest first, so a secret containing another is removed whole.
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	return r
}

func (r *redactor) clean(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// wrap returns err's text, cleaned, after what; nothing of err is kept
// that could be printed unclean (no Unwrap).
func (r *redactor) wrap(what string, err error) error {
	if err == nil {
		return errors.New(what)
	}
	// One line: a collector's body may run over many.
	return errors.New(what + ": " + agentdef.OneLine(r.clean(err.Error()), 1000))
}
