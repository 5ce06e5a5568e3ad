package ddbfront_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A write priced from the item the front saw the previous write leave (the
// image cache), or from the item read when there is none, is charged what
// AWS charges: the larger of the item before and after, twice in a
// transaction, a Put that replaces an item included. Each step writes item 0 of one
// partition; what it was charged is read from how many one-unit writes of
// the partition's other items still pass on a still clock at 12 units.
func TestWritesPricedFromTheLastWriteSeen(t *testing.T) {
	db, table, clock := limitedTable(t, "priced")
	fiveKB := &types.AttributeValueMemberS{Value: strings.Repeat("x", 5_000)}
	update := func(expr string, vals map[string]types.AttributeValue) error {
		_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key("p", 0), UpdateExpression: aws.String(expr),
			ExpressionAttributeValues: vals,
		}, noRetry)
		return err
	}
	steps := []struct {
		name  string
		write func() error
		units int
	}{
		{"put a 5 KB item", func() error {
			_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("p", 0, map[string]types.AttributeValue{"body": fiveKB})}, noRetry)
			return err
		}, 5},
		{"a small change of it", func() error { return update("SET v = :v", map[string]types.AttributeValue{":v": num(1)}) }, 5},
		{"its body removed in a transaction", func() error {
			_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
				TableName: aws.String(table), Key: key("p", 0), UpdateExpression: aws.String("REMOVE body"),
			}}}}, noRetry)
			return err
		}, 10},
		{"a small change of the small item", func() error { return update("SET v = :v", map[string]types.AttributeValue{":v": num(2)}) }, 1},
		{"its body back", func() error { return update("SET body = :b", map[string]types.AttributeValue{":b": fiveKB}) }, 5},
		{"deleted", func() error {
			_, err := db.DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("p", 0)}, noRetry)
			return err
		}, 5},
		{"created again by an update", func() error { return update("SET v = :v", map[string]types.AttributeValue{":v": num(4)}) }, 1},
		{"written 5 KB by a batch, which leaves no image", func() error {
			_, err := db.BatchWriteItem(ctx(t), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
				table: {{PutRequest: &types.PutRequest{Item: item("p", 0, map[string]types.AttributeValue{"body": fiveKB})}}},
			}}, noRetry)
			return err
		}, 5},
		{"replaced by a small item: the 5 KB before read", func() error {
			_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("p", 0, nil)}, noRetry)
			return err
		}, 5},
	}
	for i, s := range steps {
		clock.refill()
		if err := s.write(); err != nil {
			t.Fatalf("step %d, %s: %v", i, s.name, err)
		}
		got := spent(t, db, table, "p")
		if got != s.units {
			t.Errorf("step %d, %s: got %d units charged, want %d", i, s.name, got, s.units)
		}
	}
}

// A write the limits cannot read (here a PartiQL transaction with an EXISTS
// condition) leaves no image behind it: the next write of the item it grew
// is priced from the item as it now is.
func TestWriteTheLimitsCannotReadDropsImages(t *testing.T) {
	db, table, clock := limitedTable(t, "unread")
	clock.refill()
	put(t, db, table, item("q", 0, nil))
	put(t, db, table, item("q", 1, nil))
	clock.refill()
	if _, err := db.ExecuteTransaction(ctx(t), &dynamodb.ExecuteTransactionInput{TransactStatements: []types.ParameterizedStatement{
		{Statement: aws.String(`EXISTS(SELECT * FROM "` + table + `" WHERE pk = 'q' AND sk = 1 AND pk IS NOT MISSING)`)},
		{Statement: aws.String(`UPDATE "` + table + `" SET body = ? WHERE pk = 'q' AND sk = 0`), Parameters: []types.AttributeValue{
			&types.AttributeValueMemberS{Value: strings.Repeat("x", 5_000)},
		}},
	}}, noRetry); err != nil {
		t.Fatal(err)
	}
	clock.refill()
	if _, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key("q", 0), UpdateExpression: aws.String("SET v = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)},
	}, noRetry); err != nil {
		t.Fatal(err)
	}
	got := spent(t, db, table, "q")
	if got != 5 {
		t.Errorf("the update after the transaction: got %d units charged, want 5", got)
	}
}

// A Put that applies only where no item is, refused because one is, is
// charged what AWS charges a failed condition: the item it found.
func TestRefusedPutChargedByTheItemFound(t *testing.T) {
	db, table, clock := limitedTable(t, "found")
	clock.refill()
	// Written by a batch, so that the front keeps no image of it.
	if _, err := db.BatchWriteItem(ctx(t), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		table: {{PutRequest: &types.PutRequest{Item: item("f", 0, map[string]types.AttributeValue{"body": &types.AttributeValueMemberS{Value: strings.Repeat("x", 5_000)}})}}},
	}}); err != nil {
		t.Fatal(err)
	}
	clock.refill()
	_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{
		TableName: aws.String(table), Item: item("f", 0, nil),
		ConditionExpression:      aws.String("attribute_not_exists (#k)"),
		ExpressionAttributeNames: map[string]string{"#k": "pk"},
	}, noRetry)
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("put over an item: got %v, want ConditionalCheckFailedException", err)
	}
	got := spent(t, db, table, "f")
	if got != 5 {
		t.Errorf("the refused put: got %d units charged, want 5", got)
	}
}

// spent is what the last write took from the partition pk of table, on a
// still clock at 12 units a second refilled before it: the one-unit writes
// of the partition's other items that no longer pass.
func spent(t *testing.T, db *dynamodb.Client, table, pk string) int {
	t.Helper()
	return 12 - admitted(t, 13, func(j int) error {
		_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item(pk, 100+j, nil)}, noRetry)
		return err
	})
}
