package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/ops/audit"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/tables"
)

// streamValue turns an item's value into a stream record's.
func streamValue(t *testing.T, v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = streamValue(t, e)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		m := map[string]events.DynamoDBAttributeValue{}
		for k, e := range v.Value {
			m[k] = streamValue(t, e)
		}
		return events.NewMapAttribute(m)
	}
	t.Fatalf("unexpected attribute value %T", v)
	return events.DynamoDBAttributeValue{}
}

// TestPendingArchiverBatchIsNoDrift is the sequence an outside review ran:
// an order's TTL removal could not be archived (the archive bucket was
// gone), the archiver gave up and its batch went to the failure bucket.
// The order is then in neither the table nor the archive. An audit that
// reads only those two computed the user and the products without it and
// repaired them (orderCount 1→0, spend and unitsSold down); the replay then
// archived the order and the next audit found the opposite drift. Read
// with the failure bucket, the order is on its way: no drift, no repair;
// once replayed (archive line and marker), it counts once.
func TestPendingArchiverBatchIsNoDrift(t *testing.T) {
	t.Parallel()
	f := newFixtureRetention(t, time.Hour)
	f.createUser("u1")
	p := f.createProduct("Lamp", 2000)
	o := f.mustOrder("u1", []string{p}, []int{2})
	f.idle()
	f.checkExact()
	ctx := context.Background()
	db, s3c := f.sys.DynamoDB(), f.sys.S3()
	orders := tables.Physical(f.prefix, tables.Orders)

	// What TTL would have removed, and what the archiver's failure object
	// holds; the item leaves the table by a plain delete (no stream record
	// of TTL's, so the archiver does not see it).
	key := map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: o.UserID}, "orderId": &types.AttributeValueMemberS{Value: o.OrderID}}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(orders), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Fatalf("order item: %v", err)
	}
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(orders), Key: key}); err != nil {
		t.Fatal(err)
	}
	image := map[string]events.DynamoDBAttributeValue{}
	for k, v := range got.Item {
		image[k] = streamValue(t, v)
	}
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(orders)})
	if err != nil {
		t.Fatal(err)
	}
	stream := aws.ToString(desc.Table.LatestStreamArn)
	now := time.Now().UTC()
	rec := events.DynamoDBEventRecord{
		EventID: "ttl-remove-1", EventName: "REMOVE", EventSource: "aws:dynamodb", EventVersion: "1.1", AWSRegion: "us-east-1",
		EventSourceArn: stream,
		UserIdentity:   &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"},
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: now}, SequenceNumber: "000000000000000000900",
			Keys:     map[string]events.DynamoDBAttributeValue{"userId": image["userId"], "orderId": image["orderId"]},
			OldImage: image, StreamViewType: "NEW_AND_OLD_IMAGES", SizeBytes: 100,
		},
	}
	obj := failures.Object{
		Version: failures.Version, Timestamp: now,
		RequestContext: failures.RequestContext{RequestID: "r1", FunctionArn: "arn:aws:lambda:us-east-1:000000000000:function:archiver",
			Condition: failures.ConditionRetriesExhausted, ApproximateInvokeCount: 3},
		Batch: failures.BatchInfo{ShardID: "shardId-0001", StartSequenceNumber: "000000000000000000900", EndSequenceNumber: "000000000000000000900",
			ApproximateArrivalOfFirstRecord: now, ApproximateArrivalOfLastRecord: now, BatchSize: 1, StreamArn: stream},
		Payload: events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}},
	}
	body, err := obj.Encode()
	if err != nil {
		t.Fatal(err)
	}
	objKey := failures.NewKey(failures.LocalMappingID("orders-archiver"), "shardId-0001", now).String()
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(f.sys.FailureBucket), Key: aws.String(objKey), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}

	// Without the failure bucket the order is in neither the table nor the
	// archive; its facts are marked, and a marked fact is never taken out.
	rep := run(t, f.auditor(audit.Config{Repair: true}))
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 {
		t.Fatalf("audit without the failure bucket: drift %+v, exit %d; want none", rep.Drift, rep.ExitCode())
	}
	f.checkExact()
	// With it: the order is on its way, nothing to repair.
	rep = run(t, f.auditor(audit.Config{Repair: true, FailureBucket: f.sys.FailureBucket}))
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 {
		t.Fatalf("audit with the failure bucket: drift %+v, exit %d; want none", rep.Drift, rep.ExitCode())
	}
	f.checkExact()

	// The replay: the archiver writes the line, the replay its marker.
	var plain map[string]any
	if err := attributevalue.UnmarshalMap(got.Item, &plain); err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(map[string]any{"eventId": rec.EventID, "table": tables.Orders, "keys": map[string]any{"userId": o.UserID, "orderId": o.OrderID}, "item": plain, "removedAt": now.Format(time.RFC3339)})
	f.put(tables.Orders+"/year="+strconv.Itoa(now.Year())+"/replayed.jsonl.gz", gz(string(line)))
	rep = run(t, f.auditor(audit.Config{Repair: true, FailureBucket: f.sys.FailureBucket}))
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 {
		t.Fatalf("audit with the line archived and the object not yet marked: drift %+v; want the order once", rep.Drift)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(f.sys.FailureBucket), Key: aws.String(failures.ReplayedPrefix + objKey), Body: bytes.NewReader([]byte(`{}`))}); err != nil {
		t.Fatal(err)
	}
	rep = run(t, f.auditor(audit.Config{Repair: true, FailureBucket: f.sys.FailureBucket}))
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 {
		t.Fatalf("audit after the replay: drift %+v; want none", rep.Drift)
	}
	f.checkExact()
}
