package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/infra/ops/audit"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// reviewImage reads the review item as a stream image.
func (f *fixture) reviewImage(productID, userID string) map[string]events.DynamoDBAttributeValue {
	f.t.Helper()
	out, err := f.sys.DynamoDB().GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(tables.Physical(f.prefix, tables.Reviews)), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: productID}, "userId": &types.AttributeValueMemberS{Value: userID}},
	})
	if err != nil || out.Item == nil {
		f.t.Fatalf("review %s/%s: %v", productID, userID, err)
	}
	img := map[string]events.DynamoDBAttributeValue{}
	for k, v := range out.Item {
		img[k] = streamValue(f.t, v)
	}
	return img
}

// TestCompensatingReviewsAcrossTheRepair is the sequence an outside review
// ran against the audit by sums: the reviews' counters stalled; product P
// has unrelated drift (unitsSold); x's review A is in the table; while the
// audit runs, y writes review B with A's rating and x deletes A, so the
// sums do not move. The audit by sums repaired unitsSold and set a
// watermark that, once the counters resumed, held back B's INSERT and let
// A's REMOVE through: P ended at 0 reviews for 1. By fact, the repair folds
// in B's version (proved by the table) and nothing of A (no marker, not in
// the table); the resumed records then apply A's in and out and are dropped
// on B's marker, whatever their stream times (an hour before the audit, an
// hour after it, none): exact.
func TestCompensatingReviewsAcrossTheRepair(t *testing.T) {
	t.Parallel()
	f := newFixtureMappings(t, time.Hour, func(m wiring.Mapping) bool { return m.Name != "reviews-counters" })
	f.createUser("x")
	f.createUser("y")
	p := f.createProduct("Lamp", 2000)
	if err := f.review(p, "x", 4); err != nil {
		t.Fatal(err)
	}
	a := f.reviewImage(p, "x")
	f.tamper(product(p), "unitsSold", 2)

	var b map[string]events.DynamoDBAttributeValue
	rep := run(t, f.auditor(audit.Config{Repair: true, BeforeSource: func(int) {
		if err := f.review(p, "y", 4); err != nil {
			t.Error(err)
		}
		b = f.reviewImage(p, "y")
		f.deleteReview(p, "x")
	}}))
	if rep.ExitCode() != 0 || len(rep.Remaining()) != 0 {
		t.Fatalf("repair: exit %d, remaining %+v", rep.ExitCode(), rep.Remaining())
	}

	// The counters resume: A's INSERT, B's INSERT, A's REMOVE.
	h := counting.New(counting.Deps{DB: f.sys.DynamoDB(), Tables: tables.WithPrefix(f.prefix)})
	arn := "arn:aws:dynamodb:us-east-1:000000000000:table/" + tables.Physical(f.prefix, tables.Reviews) + "/stream/2026-11-24T00:00:00.000"
	now := time.Now()
	rec := func(id, name string, old, new map[string]events.DynamoDBAttributeValue, at time.Time) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{EventID: id, EventName: name, EventSource: "aws:dynamodb", EventSourceArn: arn, AWSRegion: "us-east-1",
			Change: events.DynamoDBStreamRecord{OldImage: old, NewImage: new, SequenceNumber: id, ApproximateCreationDateTime: events.SecondsEpochTime{Time: at}}}
	}
	batch := []events.DynamoDBEventRecord{
		rec("1", "INSERT", nil, a, now.Add(-time.Hour)),
		rec("2", "INSERT", nil, b, now.Add(time.Hour)),
		rec("3", "REMOVE", a, nil, time.Time{}),
	}
	for _, recs := range [][]events.DynamoDBEventRecord{batch, batch[1:], batch} { // and redelivered
		resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("counters: %v, %+v", err, resp.BatchItemFailures)
		}
	}
	f.checkExact()
	if got, _ := f.stored(product(p)); got["reviewCount"] != 1 || got["ratingTotal"] != 4 || got["unitsSold"] != 0 {
		t.Errorf("P: got %v, want 1 review, rating total 4, 0 units sold", got)
	}
	if rep := run(t, f.auditor(audit.Config{})); len(rep.Drift) != 0 || rep.ExitCode() != 0 {
		t.Errorf("audit after: drift %+v, exit %d", rep.Drift, rep.ExitCode())
	}
}
