package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/capacity"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/tracing"
)

// tracedEnv is an env whose store writes through a meter (AWS's units) on a
// client that stamps the stream tables' items when traced is set.
func tracedEnv(t *testing.T, traced bool) (*env, *capacity.Meter, *tracetest.InMemoryExporter) {
	t.Helper()
	e := newEnv(t)
	tables := store.TablesWithPrefix(e.prefix)
	client := e.db
	var tr *tracing.Tracing
	exp := tracetest.NewInMemoryExporter()
	if traced {
		tr = tracing.NewWith("api", sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
		client = dynamodb.New(e.db.Options(), tr.DynamoDB(), tracing.Stamp(tracing.StreamedTables(tables)...))
	}
	meter := capacity.NewMeter(client, e.prefix)
	e.st = store.New(meter, store.Config{Tables: tables})
	e.h = httpapi.New(httpapi.Deps{Store: e.st, Cursors: cursor.NewSigner([]byte(testSecret)), Metrics: e.metrics,
		Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), Tracing: tr})
	return e, meter, exp
}

// TestTraceparentWriteUnits measures the write units of each writing route
// with and without the traceparent on its items (AWS's rules), for
// docs/data-model.md: the 57 bytes cost a unit only where an item crosses a
// kilobyte.
func TestTraceparentWriteUnits(t *testing.T) {
	type row struct {
		route string
		off   float64
		on    float64
	}
	measure := func(traced bool) map[string]float64 {
		e, meter, _ := tracedEnv(t, traced)
		units := map[string]float64{}
		do := func(route, method, target string, who caller, body any, status int) response {
			t.Helper()
			n := len(meter.Calls())
			r := e.do(method, target, who, body)
			want(t, r, status)
			for _, c := range meter.Calls()[n:] {
				units[route] += c.Write
			}
			return r
		}
		desc := strings.Repeat("A sturdy everyday thing. ", 12)
		admin := adminCaller("root")
		p1 := do("POST /products", "POST", "/products", admin, map[string]any{"name": "Kettle", "description": desc, "category": "home", "priceCents": 1999, "stock": 100}, 201).str("productId")
		p2 := e.mustProduct("Mug", "home", 500, 100)
		e.mustUser("u1")
		me := userCaller("u1")
		do("PATCH /products/{productId}", "PATCH", "/products/"+p1, admin, map[string]any{"priceCents": 2099}, 200)
		do("PUT /users/{userId}/cart/{productId}", "PUT", "/users/u1/cart/"+p2, me, map[string]any{"quantity": 1}, 200)
		order := do("POST /users/{userId}/orders", "POST", "/users/u1/orders", me, map[string]any{"items": []any{
			map[string]any{"productId": p1, "quantity": 1}, map[string]any{"productId": p2, "quantity": 2}}}, 201).str("orderId")
		do("PATCH /users/{userId}/orders/{orderId}", "PATCH", "/users/u1/orders/"+order, admin, map[string]any{"status": "SHIPPED"}, 200)
		doomed := e.mustOrder("u1", p2, 1)
		do("POST /users/{userId}/orders/{orderId}/cancel", "POST", "/users/u1/orders/"+doomed+"/cancel", me, nil, 200)
		do("PUT /products/{productId}/reviews/{userId}", "PUT", "/products/"+p1+"/reviews/u1", me, map[string]any{"rating": 5, "title": "Great", "body": desc}, 201)
		return units
	}
	off, on := measure(false), measure(true)
	var rows []row
	for route, u := range off {
		rows = append(rows, row{route, u, on[route]})
	}
	for _, r := range rows {
		t.Logf("%-48s WRU %5.1f without, %5.1f with the traceparent", r.route, r.off, r.on)
		if r.on < r.off || r.on > r.off+2 {
			t.Errorf("%s: got %v WRU with the traceparent, %v without; want at most one more item-kilobyte (2 in a transaction)", r.route, r.on, r.off)
		}
	}
}

// TestTraceparentOnItems: a traced request's items carry its write's
// traceparent; a request that comes with a traceparent continues its trace.
func TestTraceparentOnItems(t *testing.T) {
	e, _, exp := tracedEnv(t, true)
	pid := e.mustProduct("Pan", "home", 500, 10)
	e.mustUser("u2")
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := e.do("POST", "/users/u2/orders", userCaller("u2"), map[string]any{"items": []any{map[string]any{"productId": pid, "quantity": 1}}}, "traceparent", parent)
	want(t, r, 201)
	var server, write sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		switch s.Name() {
		case "POST /users/{userId}/orders":
			server = s
		case "DynamoDB.TransactWriteItems":
			write = s
		}
	}
	if server == nil || write == nil {
		t.Fatalf("got spans %v, want the server span and its TransactWriteItems", exp.GetSpans())
	}
	if got := server.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("server span's trace: got %s, want the caller's", got)
	}
	var items []string
	for _, kv := range write.Attributes() {
		if string(kv.Key) == tracing.AttrWritten {
			items = kv.Value.AsStringSlice()
		}
	}
	if len(items) != 1 || items[0] != r.str("orderId") {
		t.Errorf("the write's %s: got %v, want [%s]", tracing.AttrWritten, items, r.str("orderId"))
	}
	for _, kv := range server.Attributes() {
		if v := kv.Value.Emit(); strings.Contains(v, "u2") {
			t.Errorf("server span attribute %s holds the user id: %q", kv.Key, v)
		}
	}
}

// BenchmarkTracingPerRequest is the tracing's own cost on a request that
// touches nothing else (GET /healthz), without it, with it sampled and with
// it not sampled.
func BenchmarkTracingPerRequest(b *testing.B) {
	for _, mode := range []string{"off", "sampled", "unsampled"} {
		b.Run(mode, func(b *testing.B) {
			var tr *tracing.Tracing
			switch mode {
			case "sampled":
				tr = tracing.NewWith("api", sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{})))
			case "unsampled":
				tr = tracing.NewWith("api", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())))
			}
			h := httpapi.New(httpapi.Deps{Tracing: tr, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
			ev := events.APIGatewayV2HTTPRequest{RawPath: "/healthz", RouteKey: "GET /healthz"}
			ev.RequestContext.HTTP.Method = "GET"
			b.ReportAllocs()
			for b.Loop() {
				resp, _ := h.Handle(context.Background(), ev)
				if resp.StatusCode != 200 {
					b.Fatal(fmt.Sprint(resp.StatusCode, resp.Body))
				}
			}
		})
	}
}

// discard is an exporter that keeps nothing.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
