package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TraceID is the trace a tree of instances lands in: derived from its root
// instance's id, so every run of the tree, in this process or in a worker
// that resumes it after a crash, an answer or a pause, is one trace.
func TraceID(root string) trace.TraceID {
	sum := sha256.Sum256([]byte("deputy/trace/" + root))
	var id trace.TraceID
	copy(id[:], sum[:16])
	if !id.IsValid() { // all zero: one chance in 2^128
		id[15] = 1
	}
	return id
}

type traceKey struct{}

// withTrace asks the IDGenerator for trace id on the next root span
// started with ctx.
func withTrace(ctx context.Context, id trace.TraceID) context.Context {
	return context.WithValue(ctx, traceKey{}, id)
}

// IDGenerator returns the span and trace id source a TracerProvider needs
// for deputy's traces: a root span started by a Tracer gets its tree's
// TraceID; anything else gets random ids. Setup's provider has it; a
// provider built without it still works, with random trace ids, so a
// resumed tree then makes a trace per process.
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, ok := ctx.Value(traceKey{}).(trace.TraceID)
	if !ok || !tid.IsValid() {
		for !tid.IsValid() {
			binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
			binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
		}
	}
	return tid, newSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

// newSpanID is random: a span is one run of something, and a replay after
// a crash is another run, so it must not collide with the first.
func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
