package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The log keys of the trace and span ids, as X-Ray and CloudWatch's
// Logs Insights join them with spans.
const (
	LogTraceID = "traceId"
	LogSpanID  = "spanId"
)

// LogHandler wraps h so that every record logged with a context that holds a
// span carries its trace and span ids (LogTraceID, LogSpanID). Records
// without one are passed on as they are.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

// Logger is slog.New(LogHandler(l.Handler())).
func Logger(l *slog.Logger) *slog.Logger { return slog.New(LogHandler(l.Handler())) }

type logHandler struct{ next slog.Handler }

func (h logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler { return logHandler{h.next.WithAttrs(as)} }
func (h logHandler) WithGroup(name string) slog.Handler    { return logHandler{h.next.WithGroup(name)} }
