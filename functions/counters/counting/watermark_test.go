package counting_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/ddbstream"
)

// createdAt sets the time a record's change was made.
func createdAt(r events.DynamoDBEventRecord, t time.Time) events.DynamoDBEventRecord {
	r.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: t}
	return r
}

// repairItem does what the audit's repair does to a counter item: sets its
// counters and its watermark, and bumps its version.
func (f *fixture) repairItem(table, keyName, key string, through time.Time, counters map[string]int64) {
	f.t.Helper()
	upd := expression.Set(expression.Name(counting.Watermark), expression.Value(through.Unix())).
		Add(expression.Name("version"), expression.Value(1))
	for k, v := range counters {
		upd = upd.Set(expression.Name(k), expression.Value(v))
	}
	e, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = f.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{keyName: s(key)},
		UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		f.t.Fatalf("repair %s: %v", key, err)
	}
}

func (f *fixture) hasMarker(r events.DynamoDBEventRecord) bool {
	f.t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.tables.CounterEvents),
		Key: map[string]types.AttributeValue{"eventKey": s(ddbstream.TableName(r) + "#" + r.EventID)}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		f.t.Fatalf("get marker: %v", err)
	}
	return out.Item != nil
}

// counted drops versions and the watermark: what a reader sees.
func counted(m map[string]int64) map[string]int64 {
	delete(m, "version")
	delete(m, counting.Watermark)
	return m
}

// TestRepairedItemHoldsTheRecordsBeforeItsWatermark: an audit repaired u1
// while an order's record was still on its way (retried, or in the failure
// bucket): the repaired counters hold that order. When the record comes, u1
// does not take it again, its products (not repaired) do, and a record
// created after the repair counts everywhere.
func TestRepairedItemHoldsTheRecordsBeforeItsWatermark(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	repairedAt := time.Now().Truncate(time.Second)
	before := createdAt(f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "o1", "PLACED", 500, line{"p1", 2})), repairedAt.Add(-40*time.Second))
	after := createdAt(f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", "o2", "PLACED", 300, line{"p1", 1})), repairedAt)
	f.repairItem(f.tables.Users, "userId", "u1", repairedAt, map[string]int64{"orderCount": 1, "lifetimeSpendCents": 500})

	f.deliver(before, after)
	f.deliver(before, after) // and again: a redelivery changes nothing
	if d := cmp.Diff(map[string]int64{"orderCount": 2, "lifetimeSpendCents": 800}, counted(f.user("u1"))); d != "" {
		t.Errorf("u1 (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int64{"unitsSold": 3}, counted(f.product("p1"))); d != "" {
		t.Errorf("p1 (-want +got):\n%s", d)
	}
}

// TestRecordsOnlyARepairHoldsWriteNoCounter: a review whose user and product
// were both repaired after it was created changes neither, and its marker is
// still written, so it can never count later.
func TestRecordsOnlyARepairHoldsWriteNoCounter(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	repairedAt := time.Now().Truncate(time.Second)
	rec := createdAt(f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p2", "u2", 4)), repairedAt.Add(-time.Second))
	f.repairItem(f.tables.Users, "userId", "u2", repairedAt, map[string]int64{"reviewCount": 1})
	f.repairItem(f.tables.Products, "productId", "p2", repairedAt, map[string]int64{"reviewCount": 1, "ratingTotal": 4})
	before := f.snapshot(true)

	f.deliver(rec)
	if d := cmp.Diff(before, f.snapshot(true)); d != "" {
		t.Errorf("counter items (-before +after):\n%s", d)
	}
	if !f.hasMarker(rec) {
		t.Error("no marker for the record the repair held")
	}
}

// TestZeroSumRecordsAreHeldToTheWatermark: a review created before p1's
// repair (which holds it) and deleted after it arrive in one batch. Their
// deltas sum to zero, yet only the deletion is new to p1: p1 must lose the
// review.
func TestZeroSumRecordsAreHeldToTheWatermark(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	repairedAt := time.Now().Truncate(time.Second)
	img := reviewImage("p1", "u1", 5)
	created := createdAt(f.record(f.tables.Reviews, "INSERT", nil, img), repairedAt.Add(-10*time.Second))
	deleted := createdAt(f.record(f.tables.Reviews, "REMOVE", img, nil), repairedAt.Add(2*time.Second))
	f.repairItem(f.tables.Products, "productId", "p1", repairedAt, map[string]int64{"reviewCount": 1, "ratingTotal": 5})

	f.deliver(created, deleted)
	if d := cmp.Diff(map[string]int64{"reviewCount": 0, "ratingTotal": 0}, counted(f.product("p1"))); d != "" {
		t.Errorf("p1 (-want +got):\n%s", d)
	}
	// u1 was not repaired: both records count on it, and cancel out.
	if got := counted(f.user("u1"))["reviewCount"]; got != 0 {
		t.Errorf("u1 reviewCount: got %d, want 0", got)
	}
}

// TestRecordWithoutCreationTimeFails: a record that changes counters but
// carries no creation time cannot be held to a watermark; it fails (and goes
// to the failure bucket) rather than risk counting twice.
func TestRecordWithoutCreationTimeFails(t *testing.T) {
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	ok := f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p1", "u1", 3))
	noTime := createdAt(f.record(f.tables.Reviews, "INSERT", nil, reviewImage("p2", "u1", 2)), time.Time{})
	if got, want := f.handle(ok, noTime), seqs(noTime); !cmp.Equal(got, want) {
		t.Errorf("batch item failures: got %v, want %v", got, want)
	}
	if got := counted(f.user("u1"))["reviewCount"]; got != 1 {
		t.Errorf("u1 reviewCount: got %d, want 1", got)
	}
}
