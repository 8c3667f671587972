package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// IDGenerator returns the span id generator of the providers Setup builds: random ids,
// except for a span started with a context from [WithIDs], which gets the ids asked for.
//
// A session's trace outlives the activation that started it (the grain passivates, its
// node restarts, it moves to another member), so its spans cannot all be parented to a
// span object in memory: the session derives its trace id and the ids of its long spans
// (the invoke_agent root, the steps, the sub-agent runs) from its session id, parents
// every short span to those ids, and emits each long span with its derived id once it
// ends. A tracer provider built without this generator still puts every span of a
// session into one trace (the trace id travels with the parent), but the long spans get
// random ids and the short ones point at parents no backend receives.
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

// WithIDs returns ctx asking the IDGenerator for trace id tid and span id sid for the
// span started with it (as a root span when ctx carries no parent, or as a child of a
// parent in trace tid). The spans started under that one get random ids.
func WithIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, forcedIDs{tid: tid, sid: sid})
}

type idsKey struct{}

type forcedIDs struct {
	tid trace.TraceID
	sid trace.SpanID
}

type idGenerator struct{}

// NewIDs implements sdktrace.IDGenerator.
func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := forced(ctx); ok && f.tid.IsValid() {
		return f.tid, f.sid
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, randomSpanID()
}

// NewSpanID implements sdktrace.IDGenerator.
func (idGenerator) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if f, ok := forced(ctx); ok && f.tid == tid {
		return f.sid
	}
	return randomSpanID()
}

// forced returns the ids WithIDs asked for in ctx, unless ctx's span already has them
// (ctx is the one Start returned for that span: a span under it gets random ids).
func forced(ctx context.Context) (forcedIDs, bool) {
	f, ok := ctx.Value(idsKey{}).(forcedIDs)
	if !ok || !f.sid.IsValid() || trace.SpanContextFromContext(ctx).SpanID() == f.sid {
		return forcedIDs{}, false
	}
	return f, true
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
