package ddbfront_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// A write admitted while a transaction on its item is past its window but
// still unanswered may land before or after it, as on AWS, where the
// transaction has committed by then. The front prices it by every item it
// may find, without reading the item (DynamoDB Local would answer with the
// item before the transaction, the cheaper one): here 10 units, the 10 KB
// item the transaction makes, not 1. Once both answered, the item is known
// again and the next write is priced from it, with no read either.
func TestWriteBesideAnUnansweredTransactionPricedByWhatItMayFind(t *testing.T) {
	const window, slow = 200 * time.Millisecond, 2 * time.Second
	clock := newStillClock()
	st, table := frontOn(t, slowTransactions(t, slow), ddbfront.Limits{
		TxWindow: window, PartitionWCU: 40, Now: clock.Now, Partitions: onePerKey,
	}, "possible")
	db := st.DynamoDB()
	put(t, db, table, item("slow", 1, nil))
	clock.refill()
	own := func() int64 { return st.Front.UpstreamCalls().Own["BatchGetItem"] }
	setV := func(sk int, v int64) error {
		_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("slow", sk),
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(v)}}, noRetry)
		return err
	}
	// unitsLeft spends the partition's units on 1-unit writes of other
	// items of the partition key "slow", and says how many it took.
	unitsLeft := func(from int) int {
		return admitted(t, 40, func(i int) error { return setV(from+i, 1) })
	}

	first := sendLate("the transaction", func() error {
		// 2 × 10 units of the partition's 40.
		_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
			TableName: aws.String(table), Key: key("slow", 1),
			UpdateExpression: aws.String("SET body = :b"), ExpressionAttributeValues: map[string]types.AttributeValue{":b": tenKB},
		}}}}, noRetry)
		return err
	})
	time.Sleep(window + window/2)
	ownBefore := own()
	if err := setV(1, 2); err != nil {
		t.Fatalf("a write of the item after the transaction's window: %v", err)
	}
	if n := own() - ownBefore; n != 0 {
		t.Errorf("the write beside the unanswered transaction read %d times, want 0: it knows what the item may be", n)
	}
	first.notYet(t, "the write")
	// 40 - 20 - 10 = 10 units left; 19 if the write had been priced by
	// the item before the transaction.
	if got := unitsLeft(100); got != 10 {
		t.Errorf("after the write beside the transaction, %d units left, want 10: the write was charged %d, want 10", got, 20-got)
	}
	first.wait(t)

	clock.refill()
	ownBefore = own()
	if err := setV(1, 3); err != nil {
		t.Fatal(err)
	}
	if n := own() - ownBefore; n != 0 {
		t.Errorf("the next write, both answered: %d reads, want 0 (the item is known again)", n)
	}
	if got := unitsLeft(200); got != 30 {
		t.Errorf("after a write of the 10 KB item, %d units left, want 30", got)
	}
	clock.refill()
	out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("slow", 1), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Item["body"]; !ok || out.Item["v"].(*types.AttributeValueMemberN).Value != "3" {
		t.Fatalf("the item: %v, want the transaction's body and v 3", out.Item)
	}
}

// A transaction on an item whose states the front does not follow (here an
// item it has never seen written, so no image) holds that item until its
// answer, however late: a write admitted after the window would be priced by
// a read that may not see the transaction's item.
func TestTransactionOnAnItemNotFollowedHoldsItUntilItsAnswer(t *testing.T) {
	const window, slow = 200 * time.Millisecond, 2 * time.Second
	st, table := frontOn(t, slowTransactions(t, slow), ddbfront.Limits{TxWindow: window}, "cold")
	db := st.DynamoDB()
	first := sendLate("the transaction", func() error {
		_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
			TableName: aws.String(table), Item: item("slow", 2, map[string]types.AttributeValue{"body": tenKB}),
		}}}}, noRetry)
		return err
	})
	time.Sleep(window + window/2)
	_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("slow", 2),
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)}}, noRetry)
	var tce *types.TransactionConflictException
	if !errors.As(err, &tce) {
		t.Errorf("a write of the item after the window, before the answer: got %v, want TransactionConflictException", err)
	}
	first.notYet(t, "the write")
	first.wait(t)
}

// A statement of a BatchExecuteStatement may fail inside the batch's 200
// (here an INSERT of a key that is there): the front does not follow such
// writes, so the item it keeps is not the one the statement would have
// made, and the next write of the 10 KB item is charged 10 units, not 1.
func TestAStatementRefusedInsideABatchLeavesNoImage(t *testing.T) {
	clock := newStillClock()
	st, table := frontOn(t, stacktest.Stack(t).Upstream(), ddbfront.Limits{PartitionWCU: 40, Now: clock.Now, Partitions: onePerKey}, "batchstmt")
	db := st.DynamoDB()
	put(t, db, table, item("b", 1, map[string]types.AttributeValue{"body": tenKB}))
	out, err := db.BatchExecuteStatement(ctx(t), &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{{
		Statement: aws.String(`INSERT INTO "` + table + `" VALUE {'pk': 'b', 'sk': 1}`),
	}}})
	if err != nil {
		t.Fatalf("BatchExecuteStatement: %v", err)
	}
	if len(out.Responses) != 1 || out.Responses[0].Error == nil {
		t.Fatalf("the INSERT of a key that is there: %+v, want refused inside the batch", out.Responses)
	}
	clock.refill()
	if _, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("b", 1),
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)}}, noRetry); err != nil {
		t.Fatal(err)
	}
	left := admitted(t, 40, func(i int) error {
		_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("b", 100+i),
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)}}, noRetry)
		return err
	})
	if left != 30 {
		t.Errorf("after an update of the 10 KB item, %d units left, want 30: it was charged %d, want 10", left, 40-left)
	}
}

// A transaction with two actions on one item is refused (by DynamoDB Local,
// as by AWS), and leaves the item free: no hold of it outlives the refusal.
func TestATransactionNamingAnItemTwiceHoldsNothing(t *testing.T) {
	st, table := frontOn(t, stacktest.Stack(t).Upstream(), ddbfront.Limits{TxWindow: 50 * time.Millisecond}, "twice")
	db := st.DynamoDB()
	put(t, db, table, item("x", 1, nil))
	_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String(table), Key: key("x", 1),
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("x", 1),
			ConditionExpression: aws.String("attribute_exists(pk)")}},
	}}, noRetry)
	if err == nil {
		t.Fatal("a transaction with two actions on one item was applied")
	}
	if _, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("x", 1),
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(2)}}, noRetry); err != nil {
		t.Errorf("a write of the item after the refused transaction: %v, want it free", err)
	}
}

// A batch's write of an item a transaction holds is left unprocessed (the
// transaction's item is not priced beside it), and the batch's other items
// are written. Here the transaction is freed at its window, a first batch
// Put of its item ends the item's states (a batch's answer does not say
// which items it wrote), so the transaction holds the item again until its
// answer, and a second batch meets that hold.
func TestABatchWriteOfAHeldItemIsLeftUnprocessed(t *testing.T) {
	const window, slow = 200 * time.Millisecond, 2 * time.Second
	st, table := frontOn(t, slowTransactions(t, slow), ddbfront.Limits{TxWindow: window}, "batchheld")
	db := st.DynamoDB()
	put(t, db, table, item("slow", 1, nil))
	first := sendLate("the transaction", func() error {
		_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
			TableName: aws.String(table), Key: key("slow", 1),
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)},
		}}}}, noRetry)
		return err
	})
	time.Sleep(window + window/2)
	batch := func(sk int) *dynamodb.BatchWriteItemOutput {
		t.Helper()
		out, err := db.BatchWriteItem(ctx(t), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: {
			{PutRequest: &types.PutRequest{Item: item("slow", 1, map[string]types.AttributeValue{"b": num(int64(sk))})}},
			{PutRequest: &types.PutRequest{Item: item("other", sk, nil)}},
		}}}, noRetry)
		if err != nil {
			t.Fatalf("batch %d: %v", sk, err)
		}
		return out
	}
	if out := batch(1); len(out.UnprocessedItems) != 0 {
		t.Fatalf("the first batch, the transaction freed at its window: unprocessed %v, want none", out.UnprocessedItems)
	}
	out := batch(2)
	if got := len(out.UnprocessedItems[table]); got != 1 {
		t.Fatalf("the second batch, the transaction holding its item again: %d unprocessed, want 1 (its item)", got)
	}
	if k := out.UnprocessedItems[table][0].PutRequest.Item["pk"].(*types.AttributeValueMemberS).Value; k != "slow" {
		t.Errorf("unprocessed: the item %q, want the held one", k)
	}
	first.notYet(t, "the batches")
	first.wait(t)
}
