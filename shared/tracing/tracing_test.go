package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shopstream/shopstream/shared/tracing"
)

const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestParseTraceparent(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{valid, true},
		{"", false},
		{"garbage", false},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e473z-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			sc, ok := tracing.ParseTraceparent(tt.in)
			if ok != tt.ok {
				t.Fatalf("got ok %v, want %v", ok, tt.ok)
			}
			if ok && sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Errorf("got trace %s", sc.TraceID())
			}
		})
	}
}

func sampledContext(t testing.TB) context.Context {
	t.Helper()
	sc, ok := tracing.ParseTraceparent(valid)
	if !ok {
		t.Fatal("bad fixture")
	}
	return trace.ContextWithSpanContext(context.Background(), sc)
}

func TestTraceparentRoundTrip(t *testing.T) {
	if got := tracing.Traceparent(sampledContext(t)); got != valid {
		t.Errorf("got %q, want %q", got, valid)
	}
	if got := tracing.Traceparent(context.Background()); got != "" {
		t.Errorf("no span: got %q, want nothing", got)
	}
	sc, _ := tracing.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	if got := tracing.Traceparent(trace.ContextWithSpanContext(context.Background(), sc)); got != "" {
		t.Errorf("unsampled: got %q, want nothing", got)
	}
}

// stampedInput runs one call through a client with the stamp and captures
// the input as the server would get it.
func stampedInput(t *testing.T, ctx context.Context, call func(*dynamodb.Client) error) {
	t.Helper()
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}, BaseEndpoint: aws.String("http://127.0.0.1:1")},
		tracing.Stamp("orders"), func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	_ = call(c) // the endpoint refuses: only the input matters
}

func TestStampUpdateExpression(t *testing.T) {
	tests := []struct {
		name, expr, want string
	}{
		{"builder SET", "SET #0 = :0, #1 = :1\nADD #2 :2\n", "SET #traceparent = :traceparent, #0 = :0, #1 = :1\nADD #2 :2\n"},
		{"ADD only", "ADD #0 :0\n", "SET #traceparent = :traceparent\nADD #0 :0\n"},
		{"SET later", "REMOVE #a set #b = :b", "REMOVE #a set #traceparent = :traceparent, #b = :b"},
		{"a name holding set", "ADD #offset :o", "SET #traceparent = :traceparent\nADD #offset :o"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &dynamodb.UpdateItemInput{TableName: aws.String("orders"), UpdateExpression: aws.String(tt.expr),
				Key: map[string]types.AttributeValue{"orderId": &types.AttributeValueMemberS{Value: "o1"}}}
			stampedInput(t, sampledContext(t), func(c *dynamodb.Client) error { _, err := c.UpdateItem(context.Background(), in); return err })
			// The stamp runs within the call's context: the background one has no span.
			if got := aws.ToString(in.UpdateExpression); got != tt.expr {
				t.Errorf("unsampled call: got %q, want it untouched", got)
			}
			stampedInput(t, sampledContext(t), func(c *dynamodb.Client) error { _, err := c.UpdateItem(sampledContext(t), in); return err })
			if got := aws.ToString(in.UpdateExpression); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if v := in.ExpressionAttributeValues[":traceparent"].(*types.AttributeValueMemberS).Value; v != valid || in.ExpressionAttributeNames["#traceparent"] != tracing.ItemAttr {
				t.Errorf("got names %v values %v", in.ExpressionAttributeNames, v)
			}
			// A retry of the same input is stamped once.
			stampedInput(t, sampledContext(t), func(c *dynamodb.Client) error { _, err := c.UpdateItem(sampledContext(t), in); return err })
			if got := aws.ToString(in.UpdateExpression); got != tt.want {
				t.Errorf("again: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStampPutsOnlyStreamTables(t *testing.T) {
	orders := &dynamodb.PutItemInput{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{"orderId": &types.AttributeValueMemberS{Value: "o1"}}}
	users := &dynamodb.PutItemInput{TableName: aws.String("users"), Item: map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: "u1"}}}
	for _, in := range []*dynamodb.PutItemInput{orders, users} {
		stampedInput(t, sampledContext(t), func(c *dynamodb.Client) error { _, err := c.PutItem(sampledContext(t), in); return err })
	}
	if v, ok := orders.Item[tracing.ItemAttr].(*types.AttributeValueMemberS); !ok || v.Value != valid {
		t.Errorf("orders item: got %v, want tp %s", orders.Item[tracing.ItemAttr], valid)
	}
	if _, ok := users.Item[tracing.ItemAttr]; ok {
		t.Errorf("users item stamped, want it untouched")
	}
}

func image(tp string) map[string]events.DynamoDBAttributeValue {
	m := map[string]events.DynamoDBAttributeValue{"orderId": events.NewStringAttribute("o1")}
	if tp != "" {
		m[tracing.ItemAttr] = events.NewStringAttribute(tp)
	}
	return m
}

func record(event, tp string, ttl bool) events.DynamoDBEventRecord {
	r := events.DynamoDBEventRecord{EventName: event, EventID: "e-" + event, EventSourceArn: "arn:aws:dynamodb:us-east-1:1:table/shopstream-dev-orders/stream/x"}
	r.Change.Keys = map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u1"), "orderId": events.NewStringAttribute("o1")}
	r.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: time.Now().Add(-2 * time.Second)}
	if event == "REMOVE" {
		r.Change.OldImage = image(tp)
	} else {
		r.Change.NewImage = image(tp)
	}
	if ttl {
		r.UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
	}
	return r
}

func TestStreamLinksEachRecordsWriter(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := tracing.NewWith("counters", sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		record("INSERT", valid, false), record("MODIFY", "", false), record("MODIFY", "00-bad", false), record("REMOVE", valid, true),
	}}
	var inner trace.SpanContext
	h := tr.Stream("counters", func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		inner = trace.SpanContextFromContext(ctx)
		return events.DynamoDBEventResponse{}, nil
	})
	resp, err := h(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("got %v %v, want every record processed", resp, err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "process shopstream-dev-orders" || s.SpanKind != trace.SpanKindConsumer || s.Parent.IsValid() || !inner.Equal(s.SpanContext) {
		t.Errorf("got %q kind %v parent %v, want a consumer root span the handler runs in", s.Name, s.SpanKind, s.Parent)
	}
	if len(s.Links) != 2 {
		t.Fatalf("got %d links, want 2 (records without a valid traceparent get none)", len(s.Links))
	}
	got := map[string]any{}
	for _, kv := range s.Links[1].Attributes {
		got[string(kv.Key)] = kv.Value.AsInterface()
	}
	if got[tracing.AttrEvent] != "TTL" || got[tracing.AttrItem] != "o1" || got[tracing.AttrAgeMs].(int64) < 2000 {
		t.Errorf("TTL link attributes: got %v", got)
	}
	for _, kv := range s.Attributes {
		if string(kv.Key) == tracing.AttrUnlinked && kv.Value.AsInt64() != 2 {
			t.Errorf("unlinked: got %d, want 2", kv.Value.AsInt64())
		}
	}
}

func TestItemIDHashesUsers(t *testing.T) {
	review := map[string]events.DynamoDBAttributeValue{"productId": events.NewStringAttribute("p1"), "userId": events.NewStringAttribute("u1")}
	if got, want := tracing.ItemID(review), tracing.ReviewID("p1", "u1"); got != want || got == "p1/u1" {
		t.Errorf("got %q, want %q (no user id)", got, want)
	}
}

func TestLogHandlerAddsIDs(t *testing.T) {
	var buf bytes.Buffer
	l := tracing.Logger(slog.New(slog.NewJSONHandler(&buf, nil)).With("function", "api"))
	l.InfoContext(sampledContext(t), "request", "status", 200)
	l.InfoContext(context.Background(), "no span")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var first, second map[string]any
	json.Unmarshal(lines[0], &first)
	json.Unmarshal(lines[1], &second)
	if first[tracing.LogTraceID] != "4bf92f3577b34da6a3ce929d0e0e4736" || first[tracing.LogSpanID] != "00f067aa0ba902b7" || first["function"] != "api" {
		t.Errorf("got %v, want the trace and span ids", first)
	}
	if _, ok := second[tracing.LogTraceID]; ok {
		t.Errorf("got %v, want no trace id without a span", second)
	}
}

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		env      map[string]string
		endpoint string
		off, err bool
	}{
		{map[string]string{}, "", false, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"}, "http://127.0.0.1:4318/v1/traces", false, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://xray.eu-west-1.amazonaws.com/v1/traces", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.05"}, "https://xray.eu-west-1.amazonaws.com/v1/traces", false, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_SAMPLER": "always_off"}, "http://x/v1/traces", true, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, "http://x/v1/traces", true, false},
		{map[string]string{"OTEL_TRACES_SAMPLER_ARG": "2"}, "", false, true},
		{map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, "", false, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, "", false, true},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			c, err := tracing.ConfigFromEnv("api", func(k string) string { return tt.env[k] })
			if (err != nil) != tt.err {
				t.Fatalf("got err %v, want error %v", err, tt.err)
			}
			if err == nil && (c.Endpoint != tt.endpoint || c.Off != tt.off) {
				t.Errorf("got endpoint %q off %v, want %q %v", c.Endpoint, c.Off, tt.endpoint, tt.off)
			}
		})
	}
	if r, ok := tracing.XRayRegion("https://xray.eu-west-1.amazonaws.com/v1/traces"); !ok || r != "eu-west-1" {
		t.Errorf("XRayRegion: got %q %v", r, ok)
	}
	if _, ok := tracing.XRayRegion("http://127.0.0.1:4318/v1/traces"); ok {
		t.Errorf("XRayRegion of a local endpoint: got ok")
	}
}

// BenchmarkBatchTracing is the tracing's own cost on a counters batch of 100
// records, each linked to its writer: off, and sampled with a discarding
// exporter.
func BenchmarkBatchTracing(b *testing.B) {
	var recs []events.DynamoDBEventRecord
	for range 100 {
		recs = append(recs, record("INSERT", valid, false))
	}
	ev := events.DynamoDBEvent{Records: recs}
	noop := func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{}, nil
	}
	for _, mode := range []string{"off", "sampled"} {
		b.Run(mode, func(b *testing.B) {
			var tr *tracing.Tracing
			if mode == "sampled" {
				tr = tracing.NewWith("counters", sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}),
					sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{LinkCountLimit: 1000, AttributeCountLimit: 128, AttributePerLinkCountLimit: 128, EventCountLimit: 128, AttributePerEventCountLimit: 128, AttributeValueLengthLimit: -1})))
			}
			h := tr.Stream("counters", noop)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(100, "records/batch")
		})
	}
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
