package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps next so that a record logged with a context that carries a span
// (logger.InfoContext(ctx, ...)) has the span's trace_id and span_id: a log line written
// inside a span leads to its trace.
func LogHandler(next slog.Handler) slog.Handler {
	if _, ok := next.(logHandler); ok {
		return next
	}
	return logHandler{next}
}

type logHandler struct{ next slog.Handler }

// Enabled implements slog.Handler.
func (h logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(LogAttrs(sc)...)
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler { return logHandler{h.next.WithAttrs(as)} }

// WithGroup implements slog.Handler.
func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.next.WithGroup(name)} }

// LogAttrs are the trace_id and span_id attributes of a log line written inside span sc.
func LogAttrs(sc trace.SpanContext) []slog.Attr {
	return []slog.Attr{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
}
