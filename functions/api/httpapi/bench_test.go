package httpapi_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/cursor"
)

// timedDB adds up the wall time during which at least one DynamoDB call is in
// flight (parallel shard queries count once) and counts the calls.
type timedDB struct {
	*dynamodb.Client
	ns, calls atomic.Int64

	mu     sync.Mutex
	active int
	since  time.Time
}

// track marks a call's start; the returned func marks its end.
func (d *timedDB) track() func() {
	d.calls.Add(1)
	d.mu.Lock()
	if d.active == 0 {
		d.since = time.Now()
	}
	d.active++
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.active--; d.active == 0 {
			d.ns.Add(int64(time.Since(d.since)))
		}
	}
}

func (d *timedDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	defer d.track()()
	return d.Client.GetItem(ctx, in, o...)
}

func (d *timedDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	defer d.track()()
	return d.Client.PutItem(ctx, in, o...)
}

func (d *timedDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	defer d.track()()
	return d.Client.UpdateItem(ctx, in, o...)
}

func (d *timedDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	defer d.track()()
	return d.Client.DeleteItem(ctx, in, o...)
}

func (d *timedDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	defer d.track()()
	return d.Client.Query(ctx, in, o...)
}

func (d *timedDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	defer d.track()()
	return d.Client.BatchGetItem(ctx, in, o...)
}

func (d *timedDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	defer d.track()()
	return d.Client.TransactWriteItems(ctx, in, o...)
}

// BenchmarkHandler reports, per route, the time in the handler outside
// DynamoDB (handler-µs/op: decoding, validation, routing, encoding, metrics)
// and the DynamoDB calls per request. DynamoDB Local's own latency is in
// dynamodb-ms/op and says nothing about AWS.
func BenchmarkHandler(b *testing.B) {
	db := &timedDB{Client: stacktest.DynamoDB(b)}
	prefix := stacktest.Tables(b)
	st := store.New(db, store.Config{Tables: store.TablesWithPrefix(prefix)})
	e := &env{t: b, st: st, metrics: &syncBuffer{}}
	e.h = httpapi.New(httpapi.Deps{Store: st, Cursors: cursor.NewSigner([]byte(testSecret))})
	e.mustUser("bench")
	p := e.mustProduct("Bench", "bench", 100, 1_000_000_000)
	order := e.mustOrder("bench", p, 1)
	me := userCaller("bench")
	for _, bc := range []struct {
		route, method, target string
		who                   caller
		body                  any
	}{
		{"GET /healthz", "GET", "/healthz", anonymous, nil},
		{"GET /products/{productId}", "GET", "/products/" + p, anonymous, nil},
		{"GET /products", "GET", "/products?category=bench", anonymous, nil},
		{"GET /users/{userId}/orders/{orderId}", "GET", "/users/bench/orders/" + order, me, nil},
		{"POST /users/{userId}/orders", "POST", "/users/bench/orders", me, map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 1}}}},
		{"PUT /users/{userId}/cart/{productId}", "PUT", "/users/bench/cart/" + p, me, map[string]any{"quantity": 1}},
		{"GET /orders", "GET", "/orders?status=PLACED", adminCaller("root"), nil},
	} {
		b.Run(bc.route, func(b *testing.B) {
			ev := event(bc.method, bc.target, bc.who, bc.body)
			db.ns.Store(0)
			db.calls.Store(0)
			start := time.Now()
			for b.Loop() {
				r, err := e.h.Handle(context.Background(), ev)
				if err != nil || r.StatusCode >= 300 {
					b.Fatalf("got %d %v: %s", r.StatusCode, err, r.Body)
				}
			}
			total := time.Since(start)
			n := float64(b.N)
			b.ReportMetric(float64(total-time.Duration(db.ns.Load()))/n/1e3, "handler-µs/op")
			b.ReportMetric(float64(db.ns.Load())/n/1e6, "dynamodb-ms/op")
			b.ReportMetric(float64(db.calls.Load())/n, "calls/op")
		})
	}
}
