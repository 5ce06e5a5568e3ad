package counting_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/tables"
)

type fixture struct {
	t      testing.TB
	prefix string
	db     *dynamodb.Client
	tables tables.Names
	h      *counting.Handler
	tx     *faulty
	seq    atomic.Int64
}

// faulty passes transactions to DynamoDB, counts them, and fails those its
// fault function picks: before the transaction reaches DynamoDB, or after it
// committed (a response lost on the way back, a timeout).
type faulty struct {
	*dynamodb.Client
	calls atomic.Int64
	mu    sync.Mutex
	fault func(*dynamodb.TransactWriteItemsInput) (fail, afterCommit bool)
}

var errInjected = errors.New("injected failure")

func (c *faulty) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	fault := c.fault
	var fail, after bool
	if fault != nil {
		fail, after = fault(in)
	}
	c.mu.Unlock()
	if fail && !after {
		return nil, errInjected
	}
	c.calls.Add(1)
	out, err := c.Client.TransactWriteItems(ctx, in, opts...)
	if fail && err == nil {
		return nil, fmt.Errorf("%w after commit", errInjected)
	}
	return out, err
}

func (c *faulty) inject(f func(*dynamodb.TransactWriteItemsInput) (fail, afterCommit bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fault = f
}

// counterKeyOf returns the key of the counter item a counters transaction updates.
func counterKeyOf(in *dynamodb.TransactWriteItemsInput) string {
	for _, a := range in.TransactItems {
		if a.Update != nil {
			for _, v := range a.Update.Key {
				if s, ok := v.(*types.AttributeValueMemberS); ok {
					return s.Value
				}
			}
		}
	}
	return ""
}

var (
	users    = []string{"u1", "u2"}
	products = []string{"p1", "p2"}
)

func newFixture(t testing.TB, db *dynamodb.Client, prefix string) *fixture {
	t.Helper()
	f := &fixture{t: t, prefix: prefix, db: db, tables: tables.WithPrefix(prefix)}
	f.tx = &faulty{Client: db}
	f.h = counting.New(counting.Deps{DB: f.tx, Tables: f.tables})
	for _, u := range users {
		f.put(f.tables.Users, map[string]types.AttributeValue{"userId": s(u), "version": n(1)})
	}
	for _, p := range products {
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

// counters returns the number attributes of a counter item (counters and version).
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

// snapshot holds every counter item of the fixture, without versions.
type snapshot map[string]map[string]int64

func (f *fixture) snapshot(withVersion bool) snapshot {
	f.t.Helper()
	out := snapshot{}
	for _, u := range users {
		out["user "+u] = f.user(u)
	}
	for _, p := range products {
		out["product "+p] = f.product(p)
	}
	if !withVersion {
		for _, m := range out {
			delete(m, "version")
		}
	}
	return out
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

func ttlRemoval(r events.DynamoDBEventRecord) events.DynamoDBEventRecord {
	r.UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
	return r
}

type line struct {
	product string
	qty     int
}

func orderImage(user, order, status string, total int64, lines ...line) map[string]events.DynamoDBAttributeValue {
	var ls []events.DynamoDBAttributeValue
	for _, l := range lines {
		ls = append(ls, events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
			"productId": events.NewStringAttribute(l.product), "productName": events.NewStringAttribute("name of " + l.product),
			"unitPriceCents": events.NewNumberAttribute("100"), "quantity": events.NewNumberAttribute(strconv.Itoa(l.qty)),
		}))
	}
	return map[string]events.DynamoDBAttributeValue{
		"userId": events.NewStringAttribute(user), "orderId": events.NewStringAttribute(order),
		"status": events.NewStringAttribute(status), "totalCents": events.NewNumberAttribute(strconv.FormatInt(total, 10)),
		"lines": events.NewListAttribute(ls), "version": events.NewNumberAttribute("1"),
	}
}

// reviewImage is a review's first version.
func reviewImage(product, user string, rating int) map[string]events.DynamoDBAttributeValue {
	return reviewVersion(product, user, rating, 1, "2026-11-22T00:00:00.000Z")
}

// reviewVersion is one version of the review instance product, user, createdAt.
func reviewVersion(product, user string, rating, version int, createdAt string) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{"productId": events.NewStringAttribute(product), "userId": events.NewStringAttribute(user),
		"rating": events.NewNumberAttribute(strconv.Itoa(rating)), "title": events.NewStringAttribute("t"),
		"createdAt": events.NewStringAttribute(createdAt), "version": events.NewNumberAttribute(strconv.Itoa(version))}
}

// replaced is the next version of a first version, with another rating.
func replaced(product, user string, rating int) map[string]events.DynamoDBAttributeValue {
	return reviewVersion(product, user, rating, 2, "2026-11-22T00:00:00.000Z")
}

func (f *fixture) handle(recs ...events.DynamoDBEventRecord) []string {
	f.t.Helper()
	resp, err := f.h.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
	if err != nil {
		f.t.Fatalf("handle: %v", err)
	}
	ids := []string{}
	for _, x := range resp.BatchItemFailures {
		ids = append(ids, x.ItemIdentifier)
	}
	return ids
}

// deliver hands a batch to the handler and expects every record applied.
func (f *fixture) deliver(recs ...events.DynamoDBEventRecord) {
	f.t.Helper()
	if ids := f.handle(recs...); len(ids) != 0 {
		f.t.Fatalf("batch item failures: got %v, want none", ids)
	}
}

func seqs(recs ...events.DynamoDBEventRecord) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.Change.SequenceNumber)
	}
	return out
}

// from returns the records from the one with sequence number seq on: what
// Lambda delivers again after a partial batch response naming seq first.
func from(recs []events.DynamoDBEventRecord, seq string) []events.DynamoDBEventRecord {
	for i, r := range recs {
		if r.Change.SequenceNumber == seq {
			return recs[i:]
		}
	}
	return nil
}

// workload is a stream's worth of orders and reviews and what applying each
// record once leaves on the counters.
func workload(f *fixture) ([]events.DynamoDBEventRecord, snapshot) {
	o1 := orderImage("u1", "o1", "PLACED", 1500, line{"p1", 2}, line{"p2", 1})
	o2 := orderImage("u1", "o2", "PLACED", 700, line{"p2", 7})
	o3 := orderImage("u2", "o3", "PLACED", 300, line{"p1", 3})
	recs := []events.DynamoDBEventRecord{
		f.record(f.tables.Orders, "INSERT", nil, o1),
		f.record(f.tables.Orders, "INSERT", nil, o2),
		f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 4)),
		f.record(f.tables.Orders, "MODIFY", o2, orderImage("u1", "o2", "SHIPPED", 700, line{"p2", 7})),
		f.record(f.tables.Orders, "MODIFY", o1, orderImage("u1", "o1", "CANCELLED", 1500, line{"p1", 2}, line{"p2", 1})),
		f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u2", 5)),
		f.record(f.tables.Orders, "INSERT", nil, o3),
		f.record(f.tables.Reviews, "MODIFY", reviewImage("p1", "u1", 4), replaced("p1", "u1", 2)),
		ttlRemoval(f.record(f.tables.Orders, "REMOVE", orderImage("u1", "o1", "CANCELLED", 1500, line{"p1", 2}, line{"p2", 1}), nil)),
		f.record(f.tables.Reviews, "REMOVE", reviewImage("p1", "u2", 5), nil),
		f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p2", "u2", 3)),
		f.record(f.tables.Orders, "MODIFY", orderImage("u1", "o2", "SHIPPED", 700, line{"p2", 7}), orderImage("u1", "o2", "DELIVERED", 700, line{"p2", 7})),
	}
	return recs, snapshot{
		"user u1":    {"orderCount": 2, "lifetimeSpendCents": 700, "reviewCount": 1},
		"user u2":    {"orderCount": 1, "lifetimeSpendCents": 300, "reviewCount": 1},
		"product p1": {"unitsSold": 3, "reviewCount": 1, "ratingTotal": 2},
		"product p2": {"unitsSold": 7, "reviewCount": 1, "ratingTotal": 3},
	}
}

// TestRedeliveryIsExact delivers the same records the ways Lambda may, and
// expects the counters each record applied once gives.
func TestRedeliveryIsExact(t *testing.T) {
	type batches func(r []events.DynamoDBEventRecord) [][]events.DynamoDBEventRecord
	tests := []struct {
		name    string
		batches batches
	}{
		{"once", func(r []events.DynamoDBEventRecord) [][]events.DynamoDBEventRecord {
			return [][]events.DynamoDBEventRecord{r}
		}},
		{"whole batch twice (a timeout)", func(r []events.DynamoDBEventRecord) [][]events.DynamoDBEventRecord {
			return [][]events.DynamoDBEventRecord{r, r}
		}},
		{"retry from the fifth record after a partial failure", func(r []events.DynamoDBEventRecord) [][]events.DynamoDBEventRecord {
			return [][]events.DynamoDBEventRecord{r, r[4:]}
		}},
		{"bisected and retried in halves", func(r []events.DynamoDBEventRecord) [][]events.DynamoDBEventRecord {
			h := len(r) / 2
			return [][]events.DynamoDBEventRecord{r, r[:h], r[h:]}
		}},
		{"bisected twice, each half again", func(r []events.DynamoDBEventRecord) [][]events.DynamoDBEventRecord {
			h, q := len(r)/2, len(r)/4
			return [][]events.DynamoDBEventRecord{r[:h], r[:q], r[q:h], r[q:h], r[h:], r[h:]}
		}},
		{"one record per batch, each twice", func(r []events.DynamoDBEventRecord) [][]events.DynamoDBEventRecord {
			var out [][]events.DynamoDBEventRecord
			for i := range r {
				out = append(out, r[i:i+1], r[i:i+1])
			}
			return out
		}},
		{"overlapping windows", func(r []events.DynamoDBEventRecord) [][]events.DynamoDBEventRecord {
			return [][]events.DynamoDBEventRecord{r[:5], r[3:9], r[2:], r[7:]}
		}},
		{"the cancel twice in one batch", func(r []events.DynamoDBEventRecord) [][]events.DynamoDBEventRecord {
			withCopy := append(append([]events.DynamoDBEventRecord{}, r[:5]...), r[4])
			return [][]events.DynamoDBEventRecord{withCopy, r[5:], r[4:5]}
		}},
	}
	db, prefixes := stacktest.DynamoDB(t), make([]string, len(tests))
	for i := range tests {
		prefixes[i] = stacktest.Tables(t)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, db, prefixes[i])
			recs, want := workload(f)
			for _, b := range tt.batches(recs) {
				f.deliver(b...)
			}
			if d := cmp.Diff(want, f.snapshot(false)); d != "" {
				t.Errorf("counters (-want +got):\n%s", d)
			}
		})
	}
}

// TestRedeliveryChangesNothing: a batch already applied writes nothing, not
// even a version.
func TestRedeliveryChangesNothing(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	recs, _ := workload(f)
	f.deliver(recs...)
	before, calls := f.snapshot(true), f.tx.calls.Load()
	f.deliver(recs...)
	if d := cmp.Diff(before, f.snapshot(true)); d != "" {
		t.Errorf("after redelivery (-before +after):\n%s", d)
	}
	// The batch fits one transaction; refused on its markers, it writes nothing.
	if got, want := f.tx.calls.Load()-calls, int64(1); got != want {
		t.Errorf("transactions for a redelivered batch: got %d, want %d", got, want)
	}
}

func TestTTLRemovalChangesNothing(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	placed := orderImage("u1", "o1", "PLACED", 1500, line{"p1", 2})
	f.deliver(f.record(f.tables.Orders, "INSERT", nil, placed))
	before, calls := f.snapshot(true), f.tx.calls.Load()
	for _, status := range []string{"DELIVERED", "CANCELLED", "PLACED"} {
		f.deliver(ttlRemoval(f.record(f.tables.Orders, "REMOVE", orderImage("u1", "o1", status, 1500, line{"p1", 2}), nil)))
	}
	if d := cmp.Diff(before, f.snapshot(true)); d != "" {
		t.Errorf("after TTL removals (-before +after):\n%s", d)
	}
	if got := f.tx.calls.Load() - calls; got != 0 {
		t.Errorf("transactions for TTL removals: got %d, want 0", got)
	}
}

// markersOf returns the marker keys a counters transaction writes.
func markersOf(in *dynamodb.TransactWriteItemsInput) []string {
	var out []string
	for _, a := range in.TransactItems {
		if a.Put != nil {
			if k, ok := a.Put.Item["eventKey"].(*types.AttributeValueMemberS); ok {
				out = append(out, k.Value)
			}
		}
	}
	return out
}

// factKeys returns the keys of the facts a record carries.
func factKeys(t *testing.T, f *fixture, r events.DynamoDBEventRecord) []string {
	t.Helper()
	fs, err := counting.RecordFacts(r, f.tables.Orders, f.tables.Reviews)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range fs {
		out = append(out, x.Key)
	}
	return out
}

// TestFailuresThenRedelivery fails one transaction of a batch that needs
// several, before or after it commits, and then redelivers as Lambda does:
// from the lowest failed sequence number on. The failed records are exactly
// those whose markers the failed transaction held, and the result is exact.
func TestFailuresThenRedelivery(t *testing.T) {
	tests := []struct {
		name        string
		record      int // in workload
		afterCommit bool
		times       int
	}{
		{"the transaction of o2's placement refused", 1, false, 1},
		{"the transaction of o2's placement committed, answer lost", 1, true, 1},
		{"the transaction of u2's review of p2 refused twice", 10, false, 2},
		{"the transaction of u2's review of p2 committed, answer lost", 10, true, 1},
	}
	db, prefixes := stacktest.DynamoDB(t), make([]string, len(tests))
	for i := range tests {
		prefixes[i] = stacktest.Tables(t)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, db, prefixes[i])
			recs, want := workload(f)
			target := factKeys(t, f, recs[tt.record])[0]
			// 150 one-line orders more, so that the batch takes several
			// transactions (100 actions each).
			for j := range 150 {
				u, p := users[j%2], products[j%3%2]
				recs = append(recs, f.record(f.tables.Orders, "INSERT", nil, orderImage(u, fmt.Sprintf("x%d", j), "PLACED", 10, line{p, 1})))
				want["user "+u]["orderCount"]++
				want["user "+u]["lifetimeSpendCents"] += 10
				want["product "+p]["unitsSold"]++
			}
			left := tt.times
			var failedMarkers []string
			f.tx.inject(func(in *dynamodb.TransactWriteItemsInput) (bool, bool) {
				if left > 0 && slices.Contains(markersOf(in), target) {
					left--
					if failedMarkers == nil {
						failedMarkers = markersOf(in)
					}
					return true, tt.afterCommit
				}
				return false, false
			})
			batch := recs
			for attempt := 0; ; attempt++ {
				got := f.handle(batch...)
				if attempt == 0 {
					var wantFailed []events.DynamoDBEventRecord
					for _, r := range recs {
						if slices.ContainsFunc(factKeys(t, f, r), func(k string) bool { return slices.Contains(failedMarkers, k) }) {
							wantFailed = append(wantFailed, r)
						}
					}
					if len(wantFailed) == 0 || len(wantFailed) >= len(recs)-3 {
						t.Fatalf("the failed transaction held %d of %d records; want a part of the batch", len(wantFailed), len(recs))
					}
					if d := cmp.Diff(seqs(wantFailed...), got); d != "" {
						t.Errorf("failed records (-want +got):\n%s", d)
					}
				}
				if len(got) == 0 {
					break
				}
				if attempt > tt.times {
					t.Fatalf("still failing after %d redeliveries: %v", attempt, got)
				}
				batch = from(recs, got[0])
			}
			if d := cmp.Diff(want, f.snapshot(false)); d != "" {
				t.Errorf("counters (-want +got):\n%s", d)
			}
		})
	}
}

func TestConcurrentBatchesOnOneCounterItem(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	const shards, perShard = 6, 15
	var recs []events.DynamoDBEventRecord
	for i := 0; i < shards*perShard; i++ {
		recs = append(recs, f.record(f.tables.Orders, "INSERT", nil, orderImage("u2", fmt.Sprintf("o%d", i), "PLACED", 100, line{"p1", 1})))
	}
	var wg sync.WaitGroup
	for shard := 0; shard < shards; shard++ {
		part := recs[shard*perShard : (shard+1)*perShard]
		// Each shard's batch twice at once (a duplicate in flight), then its halves.
		for _, b := range [][]events.DynamoDBEventRecord{part, part, part[:perShard/2], part[perShard/2:]} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := f.h.Handle(context.Background(), events.DynamoDBEvent{Records: b})
				if err != nil || len(resp.BatchItemFailures) != 0 {
					t.Errorf("shard %d: got %v, %v; want no failure", shard, resp.BatchItemFailures, err)
				}
			}()
		}
	}
	wg.Wait()
	want := snapshot{
		"user u1": {}, "user u2": {"orderCount": shards * perShard, "lifetimeSpendCents": 100 * shards * perShard},
		"product p1": {"unitsSold": shards * perShard}, "product p2": {},
	}
	if d := cmp.Diff(want, f.snapshot(false)); d != "" {
		t.Errorf("counters (-want +got):\n%s", d)
	}
}

func TestReviews(t *testing.T) {
	tests := []struct {
		name string
		recs func(f *fixture) []events.DynamoDBEventRecord
		want snapshot
	}{
		{"created", func(f *fixture) []events.DynamoDBEventRecord {
			return []events.DynamoDBEventRecord{f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 4))}
		}, snapshot{"user u1": {"reviewCount": 1}, "user u2": {}, "product p1": {"reviewCount": 1, "ratingTotal": 4}, "product p2": {}}},
		{"replaced with another rating", func(f *fixture) []events.DynamoDBEventRecord {
			return []events.DynamoDBEventRecord{
				f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 4)),
				f.record(f.tables.Reviews, "MODIFY", reviewImage("p1", "u1", 4), replaced("p1", "u1", 1)),
			}
		}, snapshot{"user u1": {"reviewCount": 1}, "user u2": {}, "product p1": {"reviewCount": 1, "ratingTotal": 1}, "product p2": {}}},
		{"replaced with the same rating", func(f *fixture) []events.DynamoDBEventRecord {
			return []events.DynamoDBEventRecord{
				f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 4)),
				f.record(f.tables.Reviews, "MODIFY", reviewImage("p1", "u1", 4), replaced("p1", "u1", 4)),
			}
		}, snapshot{"user u1": {"reviewCount": 1}, "user u2": {}, "product p1": {"reviewCount": 1, "ratingTotal": 4}, "product p2": {}}},
		{"deleted", func(f *fixture) []events.DynamoDBEventRecord {
			return []events.DynamoDBEventRecord{
				f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 4)),
				f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u2", 5)),
				f.record(f.tables.Reviews, "REMOVE", reviewImage("p1", "u1", 4), nil),
			}
		}, snapshot{"user u1": {"reviewCount": 0}, "user u2": {"reviewCount": 1}, "product p1": {"reviewCount": 1, "ratingTotal": 5}, "product p2": {}}},
	}
	db, prefixes := stacktest.DynamoDB(t), make([]string, len(tests))
	for i := range tests {
		prefixes[i] = stacktest.Tables(t)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, db, prefixes[i])
			recs := tt.recs(f)
			for _, r := range recs { // one record per batch, then all again
				f.deliver(r)
			}
			f.deliver(recs...)
			if d := cmp.Diff(tt.want, f.snapshot(false)); d != "" {
				t.Errorf("counters (-want +got):\n%s", d)
			}
		})
	}
}

func TestEachCounterWriteBumpsVersionOncePerBatch(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	var recs []events.DynamoDBEventRecord
	for i := 0; i < 5; i++ { // five instances: written, deleted (not in the batch), written again
		recs = append(recs, f.record(f.tables.Reviews, "INSERT", nil, reviewVersion("p2", "u1", 3, 1, fmt.Sprintf("2026-11-22T00:00:0%d.000Z", i))))
	}
	f.deliver(recs...)
	got := f.product("p2")
	if got["reviewCount"] != 5 || got["version"] != 2 {
		t.Errorf("p2: got %v, want reviewCount 5 and version 2", got)
	}
}

// A review replaced with the same rating changes no counter, but its markers
// are written: the version of each item they touch moves with them, or an
// audit reading half of them would judge the item unmoved (docs/counters.md).
func TestCancellingDeltasStillBumpTheVersion(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	f.deliver(f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 4)))
	u, p := f.user("u1"), f.product("p1")
	f.deliver(f.record(f.tables.Reviews, "MODIFY", reviewImage("p1", "u1", 4), replaced("p1", "u1", 4)))
	u2, p2 := f.user("u1"), f.product("p1")
	if u2["reviewCount"] != 1 || p2["reviewCount"] != 1 || p2["ratingTotal"] != 4 {
		t.Errorf("counters: user %v, product %v; want 1 review of 4", u2, p2)
	}
	if u2["version"] != u["version"]+1 || p2["version"] != p["version"]+1 {
		t.Errorf("versions: user %d→%d, product %d→%d; want each bumped by 1", u["version"], u2["version"], p["version"], p2["version"])
	}
}

func TestMalformedRecordsFailAlone(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	malformed := map[string]events.DynamoDBEventRecord{
		"rating not a number":      f.record(f.tables.Reviews, "INSERT", nil, map[string]events.DynamoDBAttributeValue{"productId": events.NewStringAttribute("p1"), "userId": events.NewStringAttribute("u1"), "rating": events.NewStringAttribute("five")}),
		"rating out of range":      f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 6)),
		"review without old image": f.record(f.tables.Reviews, "REMOVE", nil, nil),
		"order without lines":      f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "o1", "PLACED", 100)),
		"order line of quantity 0": f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "o1", "PLACED", 100, line{"p1", 0})),
		"order without new image":  f.record(f.tables.Orders, "INSERT", nil, nil),
		"a zero attribute value":   f.record(f.tables.Orders, "INSERT", nil, map[string]events.DynamoDBAttributeValue{"userId": {}}),
		"a table not followed":     f.record("carts", "INSERT", nil, reviewImage("p1", "u1", 3)),
		"unknown event name":       f.record(f.tables.Reviews, "UPSERT", nil, reviewImage("p1", "u1", 3)),
	}
	noID := f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 3))
	noID.EventID = ""
	malformed["no eventID"] = noID
	i := 0
	for name, bad := range malformed {
		i++
		t.Run(name, func(t *testing.T) {
			good := f.record(f.tables.Reviews, "INSERT", nil, reviewVersion("p2", "u2", 3, 1, fmt.Sprintf("2026-11-22T00:00:%02d.000Z", i)))
			before := f.product("p2")["reviewCount"]
			if d := cmp.Diff(seqs(bad), f.handle(good, bad)); d != "" {
				t.Errorf("failed records (-want +got):\n%s", d)
			}
			if got := f.product("p2")["reviewCount"]; got != before+1 {
				t.Errorf("the good record of the batch: got reviewCount %d, want %d", got, before+1)
			}
		})
	}
	if got := f.product("p1"); got["reviewCount"] != 0 || got["unitsSold"] != 0 {
		t.Errorf("p1 after malformed records: got %v, want no counts", got)
	}
}

// TestMissingCounterItem: a record on a product that does not exist (deleted)
// is applied to the items that do exist, creates no phantom and fails nothing.
// Its marker then says "applied to every item there is"; a product that is
// gone never comes back (ids are never reused), so a redelivery that finds the
// marker has nothing left to add, also when the product was deleted between
// the first delivery and the redelivery.
func TestMissingCounterItem(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	rec := f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "o1", "PLACED", 500, line{"gone", 2}, line{"p1", 3}))
	review := f.record(f.tables.Reviews, "INSERT", nil, reviewImage("gone", "u2", 4))
	later := f.record(f.tables.Orders, "INSERT", nil, orderImage("u2", "o2", "PLACED", 70, line{"p2", 1}))
	f.deliver(rec, review, later)
	if _, err := f.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(f.tables.Products), Key: map[string]types.AttributeValue{"productId": s("p2")}}); err != nil {
		t.Fatal(err)
	}
	f.deliver(rec)
	f.deliver(later, review)
	for _, id := range []string{"gone", "p2"} {
		out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.tables.Products), Key: map[string]types.AttributeValue{"productId": s(id)}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Item != nil {
			t.Errorf("a counter created a phantom product %s: %v", id, out.Item)
		}
	}
	got := map[string]map[string]int64{"user u1": f.user("u1"), "user u2": f.user("u2"), "product p1": f.product("p1")}
	for _, m := range got {
		delete(m, "version")
	}
	want := map[string]map[string]int64{"user u1": {"orderCount": 1, "lifetimeSpendCents": 500}, "user u2": {"reviewCount": 1, "orderCount": 1, "lifetimeSpendCents": 70},
		"product p1": {"unitsSold": 3}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("counters (-want +got):\n%s", d)
	}
}

// TestRecordWithNoItemLeft: a record whose every counter item is gone writes
// nothing, not even its marker, and fails nothing.
func TestRecordWithNoItemLeft(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	f.deliver(f.record(f.tables.Reviews, "MODIFY", reviewImage("gone", "gone-user", 2), replaced("gone", "gone-user", 5)))
	out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(f.tables.CounterEvents)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 0 {
		t.Errorf("markers: got %v, want none", out.Items)
	}
}

// Two facts whose deltas cancel on a user that exists, their products gone:
// the group is not gone (that is decided fact by fact), so their markers
// are written, and a redelivery of one of them alone counts nothing.
func TestFactsCancellingOnALiveItemAreNotGone(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	f.deliver(f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p2", "u1", 3)))
	for _, p := range []string{"p1", "p2"} {
		if _, err := f.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(f.tables.Products),
			Key: map[string]types.AttributeValue{"productId": s(p)}}); err != nil {
			t.Fatal(err)
		}
	}
	in := f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 4))
	out := f.record(f.tables.Reviews, "REMOVE", reviewImage("p2", "u1", 3), nil)
	f.deliver(in, out)
	f.deliver(in) // resumed from a later failure: the first record again, alone
	if got := f.user("u1"); got["reviewCount"] != 1 {
		t.Errorf("u1: got %v, want reviewCount 1 (one review in, one out, one left)", got)
	}
}

func TestThrottlingFailsRecordsThenRedeliveryIsExact(t *testing.T) {
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	prefix := stacktest.Tables(t)
	f := newFixture(t, st.DynamoDB(), prefix)
	// Retries of the SDK's standard retryer are exhausted before the fault is.
	remove := st.Front.InjectFault(ddbfront.Fault{Table: f.tables.Users, Operation: "TransactWriteItems", Code: "ThrottlingException"})
	rec := f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "o1", "PLACED", 900, line{"p1", 3}))
	if d := cmp.Diff(seqs(rec), f.handle(rec)); d != "" {
		t.Fatalf("under throttling, failed records (-want +got):\n%s", d)
	}
	// A record is applied to all its items or to none: p1, not throttled
	// itself, waits for the user's update.
	if got := f.product("p1")["unitsSold"]; got != 0 {
		t.Errorf("p1 while the user's update is throttled: got unitsSold %d, want 0", got)
	}
	remove()
	f.deliver(rec)
	want := snapshot{"user u1": {"orderCount": 1, "lifetimeSpendCents": 900}, "user u2": {}, "product p1": {"unitsSold": 3}, "product p2": {}}
	if d := cmp.Diff(want, f.snapshot(false)); d != "" {
		t.Errorf("counters (-want +got):\n%s", d)
	}
}

// TestTransactionConflictIsRetriedInBatch: a counter write cancelled because
// another transaction holds the item (TransactionConflict) is retried within
// the batch, not failed back to Lambda, and counts once.
func TestTransactionConflictIsRetriedInBatch(t *testing.T) {
	st := stacktest.Stack(t)
	f := newFixture(t, st.DynamoDB(), stacktest.Tables(t))
	st.Front.InjectFault(ddbfront.Fault{Table: f.tables.Users, Code: "TransactionConflict", Times: 3})
	rec := f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "o1", "PLACED", 700, line{"p1", 2}))
	if failed := f.handle(rec); len(failed) != 0 {
		t.Fatalf("failed records: got %v, want none (contention is retried)", failed)
	}
	for _, left := range st.Front.ActiveFaults() {
		if left.Table == f.tables.Users {
			t.Fatalf("fault left: %+v; the batch never met the conflict", left)
		}
	}
	f.deliver(rec)
	want := snapshot{"user u1": {"orderCount": 1, "lifetimeSpendCents": 700}, "user u2": {}, "product p1": {"unitsSold": 2}, "product p2": {}}
	if d := cmp.Diff(want, f.snapshot(false)); d != "" {
		t.Errorf("counters (-want +got):\n%s", d)
	}
}

// TestSameSequenceNumberOnTwoShards: sequence numbers are unique only within
// a shard, so two records that share one are still two records.
func TestSameSequenceNumberOnTwoShards(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	a := f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 4))
	b := f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u2", 2))
	b.Change.SequenceNumber = a.Change.SequenceNumber
	f.deliver(a)
	f.deliver(b)
	if got := f.product("p1"); got["reviewCount"] != 2 || got["ratingTotal"] != 6 {
		t.Errorf("p1: got %v, want reviewCount 2 and ratingTotal 6", got)
	}
}

// TestMarkersAreKeyedByFact: one marker per fact, whatever the number of
// counter items it changes or the records that carry it, holding the fact's
// effects, and kept (no expiry): a record or a fold of the fact a year later
// still finds it.
func TestMarkersAreKeyedByFact(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	f.deliver(f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 4)),
		f.record(f.tables.Reviews, "MODIFY", reviewImage("p1", "u1", 4), replaced("p1", "u1", 2)),
		f.record(f.tables.Orders, "INSERT", nil, orderImage("u2", "o1", "PLACED", 300, line{"p1", 1}, line{"p2", 2})))
	out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(f.tables.CounterEvents), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]facts.Effects{}
	for _, m := range out.Items {
		if _, ok := m["expiresAt"]; ok {
			t.Errorf("marker %v expires", m)
		}
		fact, err := facts.DecodeMarker(m)
		if err != nil {
			t.Fatal(err)
		}
		got[fact.Key] = fact.Effects
	}
	in := "review#p1#u1#2026-11-22T00:00:00.000Z"
	want := map[string]facts.Effects{
		in + "#v1#in":  {{Kind: facts.User, ID: "u1"}: {"reviewCount": 1}, {Kind: facts.Product, ID: "p1"}: {"reviewCount": 1, "ratingTotal": 4}},
		in + "#v1#out": {{Kind: facts.User, ID: "u1"}: {"reviewCount": -1}, {Kind: facts.Product, ID: "p1"}: {"reviewCount": -1, "ratingTotal": -4}},
		in + "#v2#in":  {{Kind: facts.User, ID: "u1"}: {"reviewCount": 1}, {Kind: facts.Product, ID: "p1"}: {"reviewCount": 1, "ratingTotal": 2}},
		"order#o1#placed": {{Kind: facts.User, ID: "u2"}: {"orderCount": 1, "lifetimeSpendCents": 300},
			{Kind: facts.Product, ID: "p1"}: {"unitsSold": 1}, {Kind: facts.Product, ID: "p2"}: {"unitsSold": 2}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("markers (-want +got):\n%s", d)
	}
}

// TestFoldAndRecordApplyAFactOnce: a fact folded in (the audit's repair) and
// the record that carries it, in either order, count once.
func TestFoldAndRecordApplyAFactOnce(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	o := facts.Order{UserID: "u1", OrderID: "o1", Status: "PLACED", TotalCents: 300, Lines: []facts.Line{{ProductID: "p1", Quantity: 1}, {ProductID: "p2", Quantity: 2}}}
	if res := f.h.Fold(context.Background(), []facts.Fact{facts.Placed(o)}); len(res.Applied) != 1 || len(res.Failed) != 0 {
		t.Fatalf("fold: %+v", res)
	}
	f.deliver(f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "o1", "PLACED", 300, line{"p1", 1}, line{"p2", 2})))
	f.deliver(f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u2", 5)))
	r := facts.Review{ProductID: "p1", UserID: "u2", CreatedAt: "2026-11-22T00:00:00.000Z", Version: 1, Rating: 5}
	if res := f.h.Fold(context.Background(), []facts.Fact{facts.In(r), facts.Placed(o)}); len(res.Applied) != 0 || len(res.Failed) != 0 {
		t.Fatalf("fold of applied facts: %+v, want none applied", res)
	}
	want := snapshot{"user u1": {"orderCount": 1, "lifetimeSpendCents": 300}, "user u2": {"reviewCount": 1},
		"product p1": {"unitsSold": 1, "reviewCount": 1, "ratingTotal": 5}, "product p2": {"unitsSold": 2}}
	if d := cmp.Diff(want, f.snapshot(false)); d != "" {
		t.Errorf("counters (-want +got):\n%s", d)
	}
}

// crowded cancels, as AWS does when another transaction holds one of its
// items, every transaction of more than max actions: a large group always
// meets one of its items busy elsewhere.
type crowded struct {
	*dynamodb.Client
	max int
}

func (c crowded) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if len(in.TransactItems) <= c.max {
		return c.Client.TransactWriteItems(ctx, in, opts...)
	}
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	for i := range reasons {
		reasons[i] = types.CancellationReason{Code: aws.String("None")}
	}
	reasons[0] = types.CancellationReason{Code: aws.String("TransactionConflict"), Message: aws.String("Transaction is ongoing for the item")}
	return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
}

// TestContendedGroupIsAppliedInHalves: a batch's facts on different items
// are coalesced into one transaction; when it keeps meeting contention, its
// halves, each on fewer items, are applied one after the other, and the
// counters come out exact (the group gave up after its attempts before).
func TestContendedGroupIsAppliedInHalves(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	h := counting.New(counting.Deps{DB: crowded{Client: f.db, max: 3}, Tables: f.tables})
	recs := []events.DynamoDBEventRecord{
		f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "o1", "PLACED", 100, line{"p1", 1})),
		f.record(f.tables.Orders, "INSERT", nil, orderImage("u2", "o2", "PLACED", 250, line{"p2", 3})),
	}
	resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("got %v, %v; want no failure", resp.BatchItemFailures, err)
	}
	want := snapshot{
		"user u1": {"orderCount": 1, "lifetimeSpendCents": 100}, "user u2": {"orderCount": 1, "lifetimeSpendCents": 250},
		"product p1": {"unitsSold": 1}, "product p2": {"unitsSold": 3},
	}
	if d := cmp.Diff(want, f.snapshot(false)); d != "" {
		t.Errorf("counters (-want +got):\n%s", d)
	}
}
