// Package httpapi is the HTTP API of shopstream as an API Gateway (HTTP API,
// payload 2.0) Lambda handler: it turns the event into an *http.Request,
// serves it with the routes of routes.go on a net/http ServeMux, and returns
// the response as the event's response. The local API Gateway emulation calls
// Handle in-process.
package httpapi

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/tracing"
)

// MaxBodyBytes is the largest request body accepted; larger ones get 413.
const MaxBodyBytes = 64 << 10

// Deps are what the handler needs.
type Deps struct {
	Store *store.Store
	// Cursors signs and checks page cursors.
	Cursors *cursor.Signer
	// Search answers GET /search; nil answers 503.
	Search Searcher
	// Logger receives one line per request and every internal error in full.
	Logger *slog.Logger
	// Metrics receives CloudWatch Embedded Metric Format lines (stdout on
	// Lambda); nil discards them.
	Metrics io.Writer
	// Timeout bounds the work of one request (default 10s), within the
	// Lambda's own deadline.
	Timeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Tracing gives each request a server span (nil: none).
	Tracing *tracing.Tracing
	// PageBudget bounds a list's body as Lambda carries it, JSON-escaped
	// inside its response (default DefaultPageBudget): a page that would
	// exceed it is cut short and its cursor continues after the last item
	// kept.
	PageBudget int
}

// LambdaPayloadLimit is the most a synchronous Lambda response may hold,
// as JSON: a larger one fails with Function.ResponseSizeTooLarge ("Invocation
// payload (request and response): 6 MB each", Lambda quotas), and API
// Gateway answers 500.
const LambdaPayloadLimit = 6291556

// DefaultPageBudget leaves 64 KiB of LambdaPayloadLimit to the response's
// headers and the rest of its JSON.
const DefaultPageBudget = LambdaPayloadLimit - 64<<10

// Handler serves the API.
type Handler struct {
	deps Deps
	mux  *http.ServeMux
	// byKey are the routes by their route key, as API Gateway names the
	// route it matched in an event ("GET /products/{productId}").
	byKey map[string]Route

	metricsMu sync.Mutex // one EMF line at a time
}

// New returns a Handler.
func New(deps Deps) *Handler {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = io.Discard
	}
	if deps.Timeout <= 0 {
		deps.Timeout = 10 * time.Second
	}
	if deps.PageBudget <= 0 {
		deps.PageBudget = DefaultPageBudget
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	h := &Handler{deps: deps, mux: http.NewServeMux(), byKey: map[string]Route{}}
	for _, rt := range h.routes() {
		h.mux.Handle(rt.Pattern, h.guard(rt))
		h.byKey[rt.Pattern] = rt
	}
	return h
}

type ctxKey int

const (
	identityKey ctxKey = iota
	requestIDKey
)

// Handle serves one API Gateway HTTP API (payload 2.0) event. Errors are
// answered in the response; the returned error is always nil, so Lambda never
// retries or reports a request as an invocation failure.
func (h *Handler) Handle(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	start := h.deps.Now()
	timeout := h.deps.Timeout
	if dl, ok := ctx.Deadline(); ok {
		// Leave the Lambda time to answer before it is cut off.
		timeout = min(timeout, time.Until(dl)-200*time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The server span continues a caller's traceparent; its own context is
	// the one the store writes on the items of the request (tracing.Stamp).
	ctx, span := h.deps.Tracing.Tracer().Start(tracing.Extract(ctx, ev.Headers), "api", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	meter := &store.Meter{}
	ctx = store.WithMeter(ctx, meter)
	reqID := ev.RequestContext.RequestID
	if lc, ok := lambdacontext.FromContext(ctx); ok && reqID == "" {
		reqID = lc.AwsRequestID
	}
	ctx = context.WithValue(ctx, requestIDKey, reqID)
	ctx = context.WithValue(ctx, identityKey, identityFrom(ev))
	ctx = context.WithValue(ctx, placedKey{}, new(bool))

	w := newRecorder()
	route := ""
	r, err := toRequest(ctx, ev)
	if err != nil {
		h.failBeforeRoute(ctx, w, ev, err)
	} else if _, pattern := h.mux.Handler(r); pattern == "" {
		h.failBeforeRoute(ctx, w, ev, errcode.Errorf(errcode.NotFound, "no route %s %s", r.Method, r.URL.Path))
	} else {
		h.mux.ServeHTTP(w, r)
		route = r.Pattern
	}
	resp := w.response()
	h.observe(ctx, route, resp.StatusCode, w.problemType, h.deps.Now().Sub(start), meter.Usage())
	endSpan(span, r, route, resp.StatusCode, w.problemType)
	return resp, nil
}

// failBeforeRoute answers an error met before a route serves the request
// (a body too large, a path no route takes) with the Cache-Control of the
// route API Gateway matched, as every other answer of that route: a public
// GET's 4xx may be kept as its 2xx, a guarded route's is not. Without a
// route it is no-store.
func (h *Handler) failBeforeRoute(ctx context.Context, w http.ResponseWriter, ev events.APIGatewayV2HTTPRequest, err error) {
	cc := "no-store"
	if rt, ok := h.byKey[ev.RouteKey]; ok {
		cc = cacheControl(rt)
	}
	w.Header().Set("Cache-Control", cc)
	h.fail(ctx, w, err)
}

// endSpan names the server span after its route and says how it ended: the
// route's pattern, never its path (ids), and no user id or other personal
// data.
func endSpan(span trace.Span, r *http.Request, route string, status int, problemType string) {
	if !span.IsRecording() {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	span.SetName(route)
	span.SetAttributes(attribute.String(tracing.AttrRoute, route), attribute.Int(tracing.AttrStatus, status))
	if r != nil {
		span.SetAttributes(attribute.String(tracing.AttrMethod, r.Method))
	}
	if problemType != "" {
		span.SetAttributes(attribute.String(tracing.AttrProblemType, problemType))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// toRequest turns the event into an *http.Request. Codes: TooLarge, Invalid.
func toRequest(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	method := ev.RequestContext.HTTP.Method
	path := ev.RawPath
	if method == "" || path == "" {
		m, p, _ := strings.Cut(ev.RouteKey, " ")
		method, path = cmpOr(method, m), cmpOr(path, p)
	}
	// A named stage prefixes rawPath ("/prod/users/u1"); $default does not.
	if st := ev.RequestContext.Stage; st != "" && st != "$default" {
		if rest, ok := strings.CutPrefix(path, "/"+st); ok && (rest == "" || rest[0] == '/') {
			path = cmpOr(rest, "/")
		}
	}
	if len(ev.Body) > base64.StdEncoding.EncodedLen(MaxBodyBytes) {
		return nil, tooLarge()
	}
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return nil, invalid("", "the body is not valid base64 (isBase64Encoded is set)")
		}
	}
	if len(body) > MaxBodyBytes {
		return nil, tooLarge()
	}
	u, err := url.Parse(path)
	if err != nil || !strings.HasPrefix(u.Path, "/") || !cleanPath(u.Path) {
		return nil, errcode.Errorf(errcode.NotFound, "no route for path %q", path)
	}
	u.RawQuery = ev.RawQueryString
	r, err := http.NewRequestWithContext(ctx, method, u.String(), strings.NewReader(string(body)))
	if err != nil {
		return nil, errcode.Errorf(errcode.NotFound, "no route %s %s", method, path)
	}
	r.ContentLength = int64(len(body))
	for k, v := range ev.Headers {
		r.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		r.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	r.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	return r, nil
}

// cleanPath reports a path without empty, "." or ".." segments (decoded, so
// "%2e%2e" counts). ServeMux would answer any other path with a redirect to
// its cleaned form, which names another resource than the one asked for.
func cleanPath(p string) bool {
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func tooLarge() error {
	return errcode.Errorf(errcode.TooLarge, "the request body is larger than %d bytes", MaxBodyBytes)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// recorder collects a response in memory.
type recorder struct {
	header      http.Header
	status      int
	body        strings.Builder
	problemType string
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

func (w *recorder) response() events.APIGatewayV2HTTPResponse {
	w.WriteHeader(http.StatusOK)
	resp := events.APIGatewayV2HTTPResponse{StatusCode: w.status, Headers: map[string]string{}, Body: w.body.String()}
	for k, vs := range w.header {
		resp.Headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	return resp
}

// requestID returns API Gateway's id of the request in ctx (logged as
// apiRequestId: requestId is Lambda's, added by the logger).
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}
