package tracing

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Transport wraps an HTTP transport (the search client's) so that each
// request within a sampled span gets a client span of its own: the method,
// the index (the path's first segment), the status and the outcome. nil
// next is http.DefaultTransport.
func (t *Tracing) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if !t.On() {
		return next
	}
	return roundTripper{t: t, next: next}
}

type roundTripper struct {
	t    *Tracing
	next http.RoundTripper
}

func (rt roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsSampled() {
		return rt.next.RoundTrip(r)
	}
	index, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	ctx, span := rt.t.tracer.Start(r.Context(), "search "+r.Method+" "+index, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(AttrMethod, r.Method), attribute.String("db.system", "opensearch"), attribute.String("db.collection.name", index)))
	defer span.End()
	resp, err := rt.next.RoundTrip(r.WithContext(ctx))
	switch {
	case err != nil:
		span.SetStatus(codes.Error, "transport error")
		span.SetAttributes(attribute.String(AttrOutcome, "error"))
	case resp.StatusCode == http.StatusTooManyRequests:
		span.SetStatus(codes.Error, resp.Status)
		span.SetAttributes(attribute.Int(AttrStatus, resp.StatusCode), attribute.String(AttrOutcome, "throttled"))
	case resp.StatusCode >= 400:
		span.SetStatus(codes.Error, resp.Status)
		span.SetAttributes(attribute.Int(AttrStatus, resp.StatusCode), attribute.String(AttrOutcome, "error"))
	default:
		span.SetAttributes(attribute.Int(AttrStatus, resp.StatusCode), attribute.String(AttrOutcome, "ok"))
	}
	return resp, err
}

// signing signs each export (SigV4, service xray) before it is sent.
type signing struct {
	next http.RoundTripper
	sign func(*http.Request, []byte) error
}

func (s signing) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, fmt.Errorf("read export body: %w", err)
		}
		r.Body.Close()
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if err := s.sign(r, body); err != nil {
		return nil, fmt.Errorf("sign export: %w", err)
	}
	return s.next.RoundTrip(r)
}
