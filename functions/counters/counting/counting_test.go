package counting_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/stack"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/tables"
)

type fixture struct {
	t      testing.TB
	db     *dynamodb.Client
	tables counting.Tables
	h      *counting.Handler
	tx     *counted
	seq    atomic.Int64
}

// counted passes transactions to DynamoDB and counts them.
type counted struct {
	*dynamodb.Client
	calls atomic.Int64
}

func (c *counted) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.calls.Add(1)
	return c.Client.TransactWriteItems(ctx, in, opts...)
}

func newFixture(t testing.TB, db *dynamodb.Client, prefix string) *fixture {
	t.Helper()
	names := tables.Names(prefix)
	f := &fixture{t: t, db: db, tables: counting.Tables{
		Orders: names[tables.Orders], Reviews: names[tables.Reviews], Users: names[tables.Users],
		Products: names[tables.Products], CounterEvents: names[tables.CounterEvents],
	}}
	f.tx = &counted{Client: db}
	f.h = counting.New(counting.Deps{DB: f.tx, Tables: f.tables})
	for _, u := range []string{"u1", "u2"} {
		f.put(f.tables.Users, map[string]types.AttributeValue{"userId": s(u), "version": n(1)})
	}
	for _, p := range []string{"p1", "p2"} {
		f.put(f.tables.Products, map[string]types.AttributeValue{"productId": s(p), "version": n(1)})
	}
	return f
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func (f *fixture) put(table string, item map[string]types.AttributeValue) {
	f.t.Helper()
	if _, err := f.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		f.t.Fatalf("put: %v", err)
	}
}

func (f *fixture) counters(table, keyName, key string) map[string]int64 {
	f.t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{keyName: s(key)}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		f.t.Fatalf("get: %v", err)
	}
	got := map[string]int64{}
	for k, v := range out.Item {
		if nv, ok := v.(*types.AttributeValueMemberN); ok {
			got[k], _ = strconv.ParseInt(nv.Value, 10, 64)
		}
	}
	return got
}

func (f *fixture) user(id string) map[string]int64 { return f.counters(f.tables.Users, "userId", id) }
func (f *fixture) product(id string) map[string]int64 {
	return f.counters(f.tables.Products, "productId", id)
}

func (f *fixture) record(table, name string, old, new map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	seq := f.seq.Add(1)
	return events.DynamoDBEventRecord{
		EventID: fmt.Sprintf("ev-%d", seq), EventName: name, EventSource: "aws:dynamodb", AWSRegion: "us-east-1",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/stream/2026-11-22T00:00:00.000",
		Change: events.DynamoDBStreamRecord{OldImage: old, NewImage: new, SequenceNumber: fmt.Sprintf("%021d", seq),
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Now()}},
	}
}

type line struct {
	product string
	qty     int
}

func orderImage(user, status string, total int64, lines ...line) map[string]events.DynamoDBAttributeValue {
	var ls []events.DynamoDBAttributeValue
	for _, l := range lines {
		ls = append(ls, events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
			"productId": events.NewStringAttribute(l.product), "quantity": events.NewNumberAttribute(strconv.Itoa(l.qty)),
		}))
	}
	return map[string]events.DynamoDBAttributeValue{
		"userId": events.NewStringAttribute(user), "orderId": events.NewStringAttribute("o-" + status),
		"status": events.NewStringAttribute(status), "totalCents": events.NewNumberAttribute(strconv.FormatInt(total, 10)),
		"lines": events.NewListAttribute(ls),
	}
}

func reviewImage(product, user string, rating int) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{"productId": events.NewStringAttribute(product), "userId": events.NewStringAttribute(user),
		"rating": events.NewNumberAttribute(strconv.Itoa(rating))}
}

func (f *fixture) deliver(recs ...events.DynamoDBEventRecord) events.DynamoDBEventResponse {
	f.t.Helper()
	resp, err := f.h.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
	if err != nil {
		f.t.Fatalf("handle: %v", err)
	}
	return resp
}

func want(t *testing.T, what string, got map[string]int64, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s %s: got %d, want %d (all: %v)", what, k, got[k], v, got)
		}
	}
}

func TestOrdersCountOnceHoweverDelivered(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	placed := f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "PLACED", 1500, line{"p1", 2}, line{"p2", 1}, line{"p1", 1}))
	placed2 := f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "PLACED", 700, line{"p2", 7}))
	shipped := f.record(f.tables.Orders, "MODIFY", orderImage("u1", "PLACED", 700, line{"p2", 7}), orderImage("u1", "SHIPPED", 700, line{"p2", 7}))
	cancelled := f.record(f.tables.Orders, "MODIFY", orderImage("u1", "PLACED", 1500, line{"p1", 3}, line{"p2", 1}), orderImage("u1", "CANCELLED", 1500, line{"p1", 3}, line{"p2", 1}))
	ttl := f.record(f.tables.Orders, "REMOVE", orderImage("u1", "DELIVERED", 700, line{"p2", 7}), nil)
	ttl.UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}

	all := []events.DynamoDBEventRecord{placed, placed2, shipped, cancelled, ttl}
	f.deliver(all...)
	f.deliver(all...)     // the whole batch again
	f.deliver(all[2:]...) // a retry after a partial failure at the third record
	f.deliver(all[:2]...) // bisected halves
	f.deliver(all[2:]...)
	f.deliver(cancelled, cancelled) // the cancel twice in one batch
	want(t, "user", f.user("u1"), map[string]int64{"orderCount": 2, "lifetimeSpendCents": 700})
	want(t, "p1", f.product("p1"), map[string]int64{"unitsSold": 0})
	want(t, "p2", f.product("p2"), map[string]int64{"unitsSold": 7})
}

func TestConcurrentBatchesOnOneCounterItem(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	var recs []events.DynamoDBEventRecord
	for i := 0; i < 40; i++ {
		recs = append(recs, f.record(f.tables.Orders, "INSERT", nil, orderImage("u2", "PLACED", 100, line{"p1", 1})))
	}
	var wg sync.WaitGroup
	for shard := 0; shard < 4; shard++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := recs[shard*10 : shard*10+10]
			for r := 0; r < 2; r++ { // each shard's batch delivered twice
				resp, err := f.h.Handle(context.Background(), events.DynamoDBEvent{Records: part})
				if err != nil || len(resp.BatchItemFailures) != 0 {
					t.Errorf("shard %d: got %v, %v", shard, resp.BatchItemFailures, err)
				}
			}
		}()
	}
	wg.Wait()
	want(t, "user", f.user("u2"), map[string]int64{"orderCount": 40, "lifetimeSpendCents": 4000})
	want(t, "p1", f.product("p1"), map[string]int64{"unitsSold": 40})
}

func TestReviews(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	ins := f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 4))
	ins2 := f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u2", 5))
	mod := f.record(f.tables.Reviews, "MODIFY", reviewImage("p1", "u1", 4), reviewImage("p1", "u1", 2))
	del := f.record(f.tables.Reviews, "REMOVE", reviewImage("p1", "u2", 5), nil)
	f.deliver(ins, ins2, mod)
	f.deliver(mod, ins)
	want(t, "p1", f.product("p1"), map[string]int64{"reviewCount": 2, "ratingTotal": 7})
	want(t, "u1", f.user("u1"), map[string]int64{"reviewCount": 1})
	f.deliver(del, del)
	want(t, "p1 after delete", f.product("p1"), map[string]int64{"reviewCount": 1, "ratingTotal": 2})
	want(t, "u2 after delete", f.user("u2"), map[string]int64{"reviewCount": 0})
}

func TestEachCounterWriteBumpsVersionOncePerBatch(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	var recs []events.DynamoDBEventRecord
	for i := 0; i < 5; i++ {
		recs = append(recs, f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p2", fmt.Sprintf("x%d", i), 3)))
	}
	f.deliver(recs...)
	want(t, "p2", f.product("p2"), map[string]int64{"reviewCount": 5, "version": 2})
}

func TestMalformedAndUnknownRecords(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	good := f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 3))
	bad := f.record(f.tables.Reviews, "INSERT", nil, map[string]events.DynamoDBAttributeValue{"productId": events.NewStringAttribute("p1"), "rating": events.NewStringAttribute("five")})
	stranger := f.record("some-other-table", "INSERT", nil, reviewImage("p1", "u1", 3))
	ghost := f.record(f.tables.Reviews, "INSERT", nil, reviewImage("no-such-product", "u1", 3))
	resp := f.deliver(good, bad, stranger, ghost)
	var ids []string
	for _, x := range resp.BatchItemFailures {
		ids = append(ids, x.ItemIdentifier)
	}
	if got, wantIDs := fmt.Sprint(ids), fmt.Sprint([]string{bad.Change.SequenceNumber, stranger.Change.SequenceNumber}); got != wantIDs {
		t.Errorf("failures: got %v, want %v (by sequence number)", got, wantIDs)
	}
	want(t, "p1", f.product("p1"), map[string]int64{"reviewCount": 1})
	out, _ := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.tables.Products), Key: map[string]types.AttributeValue{"productId": s("no-such-product")}})
	if out.Item != nil {
		t.Errorf("a counter created a phantom product: %v", out.Item)
	}
}

func TestThrottlingFailsRecordsThenRedeliveryIsExact(t *testing.T) {
	st := stacktest.Dedicated(t, stack.Config{TTLSweepInterval: -1})
	prefix := stacktest.Tables(t)
	f := newFixture(t, st.DynamoDB(), prefix)
	// Retries of the SDK's standard retryer are exhausted before the fault is.
	remove := st.Front.InjectFault(ddbfront.Fault{Table: f.tables.Users, Operation: "TransactWriteItems", Code: "ThrottlingException"})
	rec := f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "PLACED", 900, line{"p1", 3}))
	resp := f.deliver(rec)
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != rec.Change.SequenceNumber {
		t.Fatalf("under throttling: got %v, want the record failed", resp.BatchItemFailures)
	}
	want(t, "p1 (its own item was not throttled)", f.product("p1"), map[string]int64{"unitsSold": 3})
	remove()
	if resp := f.deliver(rec); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("after the fault: got %v, want none", resp.BatchItemFailures)
	}
	want(t, "user", f.user("u1"), map[string]int64{"orderCount": 1, "lifetimeSpendCents": 900})
	want(t, "p1", f.product("p1"), map[string]int64{"unitsSold": 3})
}

// BenchmarkSkewedBatches: 1,000 order records over 10 products, batches of 100.
func BenchmarkSkewedBatches(b *testing.B) {
	db := stacktest.DynamoDB(b)
	for i := 0; i < b.N; i++ {
		f := newFixture(b, db, stacktest.Tables(b))
		for p := 0; p < 10; p++ {
			f.put(f.tables.Products, map[string]types.AttributeValue{"productId": s(fmt.Sprintf("sku-%d", p)), "version": n(1)})
		}
		var batches, records int
		before := f.tx.calls.Load()
		for batch := 0; batch < 10; batch++ {
			var recs []events.DynamoDBEventRecord
			for r := 0; r < 100; r++ {
				sku := fmt.Sprintf("sku-%d", (r*r+batch)%10)
				if r%3 == 0 {
					sku = "sku-0" // a best seller
				}
				recs = append(recs, f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "PLACED", 100, line{sku, 1})))
			}
			f.deliver(recs...)
			batches++
			records += len(recs)
		}
		writes := f.tx.calls.Load() - before
		b.ReportMetric(float64(records)/float64(batches), "records/batch")
		b.ReportMetric(float64(writes)/float64(batches), "counter-writes/batch")
	}
}
