package ddbfront_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// A table or global index created with a maximum on-demand throughput
// (OnDemandThroughput) serves at most that many units a second over all its
// partitions; a request beyond it is throttled with a ThrottlingException
// whose MaxOnDemandThroughputExceeded reason names the table or index ("On-demand
// maximum throughput exceeded", DynamoDB's throttling guide), although no
// partition is near its own 12 units. UpdateTable moves the maximum.
func TestTableMaximumThroughput(t *testing.T) {
	st, clock := limitedStack(t)
	db := st.DynamoDB()
	table := stacktest.OwnPrefix(t) + "capped"
	createIndexedTable(t, db, table, func(in *dynamodb.CreateTableInput) {
		in.OnDemandThroughput = &types.OnDemandThroughput{MaxReadRequestUnits: aws.Int64(3), MaxWriteRequestUnits: aws.Int64(5)}
		in.GlobalSecondaryIndexes[0].OnDemandThroughput = &types.OnDemandThroughput{MaxReadRequestUnits: aws.Int64(100), MaxWriteRequestUnits: aws.Int64(2)}
	})
	put := func(id, category string) error {
		item := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}
		if category != "" {
			item["category"] = &types.AttributeValueMemberS{Value: category}
		}
		_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}, noRetry)
		return err
	}
	reason := func(err error) string {
		var te *types.ThrottlingException
		if !errors.As(err, &te) || len(te.ThrottlingReasons) != 1 {
			return fmt.Sprintf("not a ThrottlingException with one reason: %v", err)
		}
		return aws.ToString(te.ThrottlingReasons[0].Reason) + " " + aws.ToString(te.ThrottlingReasons[0].Resource)
	}
	arn := "arn:aws:dynamodb:us-east-1:000000000000:table/" + table

	// Writes of 1 unit to 8 different keys: the table's 5 a second pass.
	if got := admittedUnderMax(t, 8, func(i int) error { return put(fmt.Sprintf("w%d", i), "") }); got != 5 {
		t.Errorf("writes admitted: got %d, want the table's 5", got)
	}
	if got, want := reason(put("w9", "")), "TableWriteMaxOnDemandThroughputExceeded "+arn; got != want {
		t.Errorf("reason: got %q, want %q", got, want)
	}

	// Eventually consistent reads of 0.5 unit: a read passes while the
	// table has units left, so 6 of 3 units.
	clock.refill()
	get := func(i int) error {
		_, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("w%d", i%5)}}}, noRetry)
		return err
	}
	if got := admittedUnderMax(t, 10, get); got != 6 {
		t.Errorf("reads admitted: got %d, want 6 (3 units of 0.5)", got)
	}
	if got, want := reason(get(0)), "TableReadMaxOnDemandThroughputExceeded "+arn; got != want {
		t.Errorf("reason: got %q, want %q", got, want)
	}

	// The index's own maximum: 2 writes that reach it, in different
	// index partitions, then the third is refused by the index.
	clock.refill()
	if got := admittedUnderMax(t, 4, func(i int) error { return put(fmt.Sprintf("c%d", i), fmt.Sprintf("cat%d", i)) }); got != 2 {
		t.Errorf("indexed writes admitted: got %d, want the index's 2", got)
	}
	if got, want := reason(put("c9", "cat9")), "IndexWriteMaxOnDemandThroughputExceeded "+arn+"/index/byCategory"; got != want {
		t.Errorf("reason: got %q, want %q", got, want)
	}

	// UpdateTable raises the table's maximum; the front follows it.
	if _, err := db.UpdateTable(ctx(t), &dynamodb.UpdateTableInput{TableName: aws.String(table),
		OnDemandThroughput: &types.OnDemandThroughput{MaxReadRequestUnits: aws.Int64(3), MaxWriteRequestUnits: aws.Int64(8)}}); err != nil {
		t.Fatalf("update table: %v", err)
	}
	clock.refill()
	if got := admittedUnderMax(t, 10, func(i int) error { return put(fmt.Sprintf("u%d", i), "") }); got != 8 {
		t.Errorf("writes admitted after the update: got %d, want 8", got)
	}

	// A Scan of the table's 15 small items, one a partition, is charged to
	// the table as one read of their total size (0.5 unit), not each
	// partition's rounded share (0.5 unit each, 7.5 of the table's 3): a
	// read still passes after it.
	clock.refill()
	if _, err := db.Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(table)}, noRetry); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if err := get(0); err != nil {
		t.Errorf("read after a scan: %v", err)
	}
}

// admittedUnderMax sends n requests and counts those the front let through;
// every other answer must be a ThrottlingException.
func admittedUnderMax(t *testing.T, n int, send func(i int) error) int {
	t.Helper()
	return admittedOr(t, n, send, func(err error) bool {
		var te *types.ThrottlingException
		return errors.As(err, &te)
	})
}
