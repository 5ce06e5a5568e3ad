package ddbfront_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
)

// Two writes of an item the front does not follow (one it has never seen
// written, so it has no image of it), the second admitted while the first
// is unanswered. The first, a put of a 10 KB item, reaches DynamoDB Local
// late; the second reaches it later still, and meets the 10 KB item, by
// which AWS charges it: 10 units for an update, 20 for a transaction's. A
// read of the item as the second arrives would find nothing there yet (1
// unit, 2), so the front does not price it by one: it waits for the first
// write's answer, and prices it by the item that write left.
func TestAWriteBesideAnUnfollowedWriteInFlightIsPricedByWhatItMeets(t *testing.T) {
	late := map[string]types.AttributeValue{":v": num(1), ":m": &types.AttributeValueMemberS{Value: "late"}}
	for _, tc := range []struct {
		op    string
		units int
		send  func(db *dynamodb.Client, table string) error
	}{
		{"UpdateItem", 10, func(db *dynamodb.Client, table string) error {
			_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("cold", 1),
				UpdateExpression: aws.String("SET v = :v, m = :m"), ExpressionAttributeValues: late}, noRetry)
			return err
		}},
		{"TransactWriteItems", 20, func(db *dynamodb.Client, table string) error {
			_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
				TableName: aws.String(table), Key: key("cold", 1),
				UpdateExpression: aws.String("SET v = :v, m = :m"), ExpressionAttributeValues: late,
			}}}}, noRetry)
			return err
		}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			clock := newStillClock()
			proxy := delayingProxyOf(t,
				delay{op: "PutItem", marker: "slow", slow: 600 * time.Millisecond},
				delay{op: tc.op, marker: "late", slow: 1200 * time.Millisecond})
			st, table := frontOn(t, proxy, ddbfront.Limits{PartitionWCU: 40, Now: clock.Now, Partitions: onePerKey}, "inflight")
			db := st.DynamoDB()
			first := sendLate("the put", func() error {
				_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table),
					Item: item("cold", 1, map[string]types.AttributeValue{"body": tenKB, "tag": &types.AttributeValueMemberS{Value: "slow"}})}, noRetry)
				return err
			})
			time.Sleep(150 * time.Millisecond) // the put admitted, not yet in DynamoDB Local
			if err := tc.send(db, table); err != nil {
				t.Fatalf("the second write: %v", err)
			}
			first.wait(t)
			// 40 - 10 (the put) - the second write's units are left.
			left := admitted(t, 40, func(i int) error {
				_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("cold", 100+i),
					UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)}}, noRetry)
				return err
			})
			if want := 30 - tc.units; left != want {
				t.Errorf("%d units left, want %d: the second write was charged %d, want %d (the 10 KB item it met)", left, want, 30-left, tc.units)
			}
			clock.refill()
			out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("cold", 1), ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := out.Item["body"]; !ok || out.Item["m"] == nil {
				t.Fatalf("the item: %v attributes, want the put's body and the second write's m (applied after the put)", len(out.Item))
			}
		})
	}
}
