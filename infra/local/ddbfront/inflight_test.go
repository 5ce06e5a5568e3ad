package ddbfront_test

import (
	"context"
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

// statementUpdate is a PartiQL UPDATE of the item (pk, 1) of table.
func statementUpdate(table, pk string) types.BatchStatementRequest {
	return types.BatchStatementRequest{Statement: aws.String(`UPDATE "` + table + `" SET v = 2 WHERE pk = '` + pk + `' AND sk = 1`)}
}

// A BatchExecuteStatement's writes are priced together: none of them waits
// for a write of its item while the batch holds writes of its own in
// flight. Statement by statement, a batch naming one item twice waited for
// itself, and two batches naming two items in opposite orders each held
// one and waited for the other, for good.
func TestBatchStatementsNeverWaitForThemselves(t *testing.T) {
	// The front's pricing reads of both items come late, so that the
	// second batch arrives while the first is being priced.
	proxy := delayingProxyOf(t,
		delay{op: "BatchGetItem", marker: "abx", slow: 400 * time.Millisecond},
		delay{op: "BatchGetItem", marker: "aby", slow: 400 * time.Millisecond})
	st, table := frontOn(t, proxy, ddbfront.Limits{}, "batchwait")
	db := st.DynamoDB()
	within := func(d time.Duration) (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), d)
	}

	c, cancel := within(5 * time.Second)
	defer cancel()
	_, err := db.BatchExecuteStatement(c, &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{
		statementUpdate(table, "twice"), statementUpdate(table, "twice"),
	}}, noRetry)
	if c.Err() != nil {
		t.Fatalf("a batch naming one item twice: no answer in 5 s (%v)", err)
	}
	if err == nil {
		t.Error("a batch naming one item twice was accepted; DynamoDB refuses it")
	}
	c, cancel = within(5 * time.Second)
	defer cancel()
	if _, err := db.UpdateItem(c, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("twice", 1),
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(3)}}, noRetry); err != nil {
		t.Fatalf("a write of the item after that batch: %v", err)
	}

	send := func(a, b string) *late {
		return sendLate("the batch of "+a+", "+b, func() error {
			c, cancel := within(10 * time.Second)
			defer cancel()
			_, err := db.BatchExecuteStatement(c, &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{
				statementUpdate(table, a), statementUpdate(table, b),
			}}, noRetry)
			return err
		})
	}
	one := send("abx", "aby")
	time.Sleep(100 * time.Millisecond)
	two := send("aby", "abx")
	one.wait(t)
	two.wait(t)
	if w := st.Front.LimitStats().Waits; w == 0 {
		t.Error("the second batch did not wait for the first's writes of its items; the test proves nothing")
	}
}
