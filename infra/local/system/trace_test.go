package system_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/otlp"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/tracing"
	"github.com/shopstream/shopstream/shared/ulid"
)

// traceOf waits until the receiver holds a batch of function linking to
// item, and returns the item's spans.
func traceOf(t *testing.T, sys *system.System, item, function string) otlp.Found {
	t.Helper()
	var found otlp.Found
	eventually(t, function+" batch of "+item, func() string {
		if err := sys.FlushTraces(context.Background()); err != nil {
			return err.Error()
		}
		f, err := sys.Traces.Find(item)
		if err != nil {
			return err.Error()
		}
		if _, ok := batchOf(f, item, function); !ok {
			return fmt.Sprintf("no %s batch links to %s among %d spans", function, item, len(f.Spans))
		}
		found = f
		return ""
	})
	return found
}

// batchOf is function's batch span linking to item, with that link.
func batchOf(f otlp.Found, item, function string) (otlp.Span, bool) {
	for _, s := range f.Spans {
		if s.Service != function || s.Kind != "consumer" {
			continue
		}
		for _, l := range s.Links {
			if l.Attrs[tracing.AttrItem] == item {
				return s, true
			}
		}
	}
	return otlp.Span{}, false
}

// linkedSpan is the span a batch's link for item points at.
func linkedSpan(t *testing.T, f otlp.Found, batch otlp.Span, item string) otlp.Span {
	t.Helper()
	for _, l := range batch.Links {
		if l.Attrs[tracing.AttrItem] != item {
			continue
		}
		for _, s := range f.Spans {
			if s.TraceID == l.TraceID && s.SpanID == l.SpanID {
				return s
			}
		}
		t.Fatalf("%s batch links to %s/%s, a span the receiver does not hold", batch.Service, l.TraceID, l.SpanID)
	}
	t.Fatalf("%s batch has no link for %s", batch.Service, item)
	return otlp.Span{}
}

// rootOf is the server span of a trace.
func rootOf(t *testing.T, f otlp.Found, traceID string) otlp.Span {
	t.Helper()
	for _, s := range f.Spans {
		if s.TraceID == traceID && s.ParentID == "" {
			return s
		}
	}
	t.Fatalf("no root span in trace %s", traceID)
	return otlp.Span{}
}

func TestTraceFollowsAnOrderToEveryProcessor(t *testing.T) {
	sys := start(t, map[string]string{"ORDER_RETENTION": "1s"}, 200*time.Millisecond)
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Teapot", 10)
	c.must(201, "POST", "/users", "u1", map[string]any{"email": "u1@example.com", "name": "U One"}, nil)
	var order struct {
		OrderID string `json:"orderId"`
	}
	c.must(201, "POST", "/users/u1/orders", "u1", map[string]any{"items": []map[string]any{{"productId": pid, "quantity": 2}}}, &order)

	f := traceOf(t, sys, order.OrderID, "counters")
	if len(f.Writers) != 1 {
		t.Fatalf("order %s: got %d writer traces, want 1", order.OrderID, len(f.Writers))
	}
	batch, _ := batchOf(f, order.OrderID, "counters")
	write := linkedSpan(t, f, batch, order.OrderID)
	if write.TraceID != f.Writers[0] || write.Service != "api" || write.Name != "DynamoDB.TransactWriteItems" {
		t.Errorf("counters' link: got %s %q in trace %s, want the api's DynamoDB.TransactWriteItems in %s", write.Service, write.Name, write.TraceID, f.Writers[0])
	}
	if batch.TraceID == write.TraceID || batch.ParentID != "" {
		t.Errorf("counters' batch span: got trace %s parent %q, want a root of its own linked to %s", batch.TraceID, batch.ParentID, write.TraceID)
	}
	root := rootOf(t, f, write.TraceID)
	if root.Kind != "server" || root.Name != "POST /users/{userId}/orders" || root.Attrs[tracing.AttrStatus] != float64(201) {
		t.Errorf("api span: got %s %q %v, want server POST /users/{userId}/orders 201", root.Kind, root.Name, root.Attrs[tracing.AttrStatus])
	}
	if _, ok := write.Attrs[tracing.AttrUnits]; !ok {
		t.Errorf("the write's span has no consumed units: %v", write.Attrs)
	}
	for _, s := range f.Spans {
		for k, v := range s.Attrs {
			if v == "u1" || v == "u1@example.com" {
				t.Errorf("span %s %q: attribute %s holds the user id or email", s.Service, s.Name, k)
			}
		}
	}
	// The counters' own writes are the batch's children.
	children := 0
	for _, s := range f.Spans {
		if s.ParentID == batch.SpanID && s.Service == "counters" {
			children++
		}
	}
	if children == 0 {
		t.Errorf("counters' batch span has no child span for its writes")
	}

	// Delivered, the order expires after ORDER_RETENTION; TTL removes it
	// and the archiver's batch links back to the order's last write.
	for _, status := range []string{"SHIPPED", "DELIVERED"} {
		c.must(200, "PATCH", "/users/u1/orders/"+order.OrderID, "admin", map[string]any{"status": status}, nil)
	}
	f = traceOf(t, sys, order.OrderID, "archiver")
	archived, _ := batchOf(f, order.OrderID, "archiver")
	last := linkedSpan(t, f, archived, order.OrderID)
	if last.Service != "api" {
		t.Errorf("archiver's link: got a %s span, want the api's write", last.Service)
	}
	for _, l := range archived.Links {
		if l.Attrs[tracing.AttrItem] == order.OrderID && l.Attrs[tracing.AttrEvent] != "TTL" {
			t.Errorf("archiver's link event: got %v, want TTL", l.Attrs[tracing.AttrEvent])
		}
	}
}

func TestTraceFollowsReviewsAndProducts(t *testing.T) {
	sys := start(t, nil, -1)
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Kettle", 10)
	c.must(201, "POST", "/users", "u2", map[string]any{"email": "u2@example.com", "name": "U Two"}, nil)
	c.must(201, "PUT", "/products/"+pid+"/reviews/u2", "u2", map[string]any{"rating": 5, "title": "Good", "body": "Boils fast"}, nil)

	review := tracing.ReviewID(pid, "u2")
	f := traceOf(t, sys, review, "counters")
	batch, _ := batchOf(f, review, "counters")
	if w := linkedSpan(t, f, batch, review); w.Service != "api" {
		t.Errorf("counters' link for the review: got a %s span, want the api's", w.Service)
	}

	f = traceOf(t, sys, pid, "stream-indexer")
	idx, _ := batchOf(f, pid, "stream-indexer")
	if w := linkedSpan(t, f, idx, pid); w.Service != "api" && w.Service != "counters" {
		t.Errorf("indexer's link for the product: got a %s span, want the api's or the counters' write", w.Service)
	}
	search := false
	for _, s := range f.Spans {
		if s.ParentID == idx.SpanID && s.Attrs["db.system"] == "opensearch" {
			search = true
		}
	}
	if !search {
		t.Errorf("the indexer's batch has no search span")
	}
}

// TestTraceOfMalformedTraceparent: records with no traceparent or a
// malformed one are processed as any other, under a batch span of their own.
func TestTraceOfMalformedTraceparent(t *testing.T) {
	sys := start(t, nil, -1)
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Mug", 10)
	c.must(201, "POST", "/users", "u3", map[string]any{"email": "u3@example.com", "name": "U Three"}, nil)
	var order struct {
		OrderID string `json:"orderId"`
	}
	c.must(201, "POST", "/users/u3/orders", "u3", map[string]any{"items": []map[string]any{{"productId": pid, "quantity": 1}}}, &order)
	traceOf(t, sys, order.OrderID, "counters")

	// Two more orders written as an earlier release or another writer
	// would: one without tp, one with a malformed one.
	db := sys.DynamoDB()
	table := sys.Env[mustTable(t, tables.Orders).EnvVar]
	got, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
		"userId": &types.AttributeValueMemberS{Value: "u3"}, "orderId": &types.AttributeValueMemberS{Value: order.OrderID}},
		ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Fatalf("get order: %v", err)
	}
	if _, ok := got.Item[tracing.ItemAttr]; !ok {
		t.Fatalf("the order carries no %s", tracing.ItemAttr)
	}
	// Fresh ids: a copy must be a new order (an INSERT), never the first
	// one rewritten.
	ids := ulid.New(time.Now)
	for _, tp := range []string{"", "00-not-a-traceparent-01"} {
		item := map[string]types.AttributeValue{}
		for k, v := range got.Item {
			item[k] = v
		}
		item["orderId"] = &types.AttributeValueMemberS{Value: ids.Make()}
		delete(item, tracing.ItemAttr)
		if tp != "" {
			item[tracing.ItemAttr] = &types.AttributeValueMemberS{Value: tp}
		}
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the two orders counted", func() string {
		var u user
		c.must(200, "GET", "/users/u3", "u3", nil, &u)
		if u.OrderCount != 3 {
			return fmt.Sprintf("got %d orders counted, want 3", u.OrderCount)
		}
		return ""
	})
	eventually(t, "a batch span with unlinked records", func() string {
		sys.FlushTraces(context.Background())
		unlinked := 0.0
		for _, s := range sys.Traces.Spans() {
			if s.Service == "counters" && s.Kind == "consumer" {
				if s.Failed {
					return fmt.Sprintf("a counters batch failed: %s", s.Error)
				}
				n, _ := s.Attrs[tracing.AttrUnlinked].(float64)
				unlinked += n
			}
		}
		if unlinked < 2 {
			return fmt.Sprintf("got %v unlinked records, want 2", unlinked)
		}
		return ""
	})
}

// TestSamplingOffWritesNothing: with the sampler off no span is sent and
// no item carries a traceparent.
func TestSamplingOffWritesNothing(t *testing.T) {
	sys := start(t, map[string]string{tracing.EnvSampler: "always_off"}, -1)
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Pan", 10)
	c.must(201, "POST", "/users", "u4", map[string]any{"email": "u4@example.com", "name": "U Four"}, nil)
	var order struct {
		OrderID string `json:"orderId"`
	}
	c.must(201, "POST", "/users/u4/orders", "u4", map[string]any{"items": []map[string]any{{"productId": pid, "quantity": 1}}}, &order)
	eventually(t, "the order counted", func() string {
		var u user
		c.must(200, "GET", "/users/u4", "u4", nil, &u)
		if u.OrderCount != 1 {
			return fmt.Sprintf("got %d orders counted, want 1", u.OrderCount)
		}
		return ""
	})
	got, err := sys.DynamoDB().GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(sys.Env[mustTable(t, tables.Orders).EnvVar]),
		Key: map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: "u4"}, "orderId": &types.AttributeValueMemberS{Value: order.OrderID}}})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got.Item[tracing.ItemAttr]; ok {
		t.Errorf("the order carries %s %v with sampling off", tracing.ItemAttr, v)
	}
	if err := sys.FlushTraces(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(sys.Traces.Spans()); n != 0 {
		t.Errorf("got %d spans with sampling off, want 0", n)
	}
}

func mustTable(t *testing.T, name string) tables.Table {
	t.Helper()
	def, err := tables.ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return def
}
