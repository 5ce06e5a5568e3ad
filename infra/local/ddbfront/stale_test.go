package ddbfront_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// TestEventuallyConsistentReadsLag: for StaleReads after a write, an
// eventually consistent GetItem or BatchGetItem of the item sees it as it was
// before (a new item absent, a deleted one still there, projected as asked);
// a strongly consistent read and a transaction see it as it is; past
// StaleReads every read does.
func TestEventuallyConsistentReadsLag(t *testing.T) {
	const window = time.Second // far longer than a pause between two requests of one test
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{StaleReads: window}})
	db := st.DynamoDB()
	table := "stale-reads"
	createTable(t, db, table, "")
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	get := func(k map[string]types.AttributeValue, consistent bool, projection string) map[string]types.AttributeValue {
		t.Helper()
		in := &dynamodb.GetItemInput{TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(consistent)}
		if projection != "" {
			in.ProjectionExpression = aws.String(projection)
			in.ExpressionAttributeNames = map[string]string{"#v": "v"}
		}
		out, err := db.GetItem(ctx(t), in)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		return out.Item
	}
	v := func(it map[string]types.AttributeValue) string {
		if it == nil {
			return "absent"
		}
		if x, ok := it["v"].(*types.AttributeValueMemberS); ok {
			return x.Value
		}
		return "no v"
	}
	settle := func() { time.Sleep(window + 50*time.Millisecond) }

	put(t, db, table, item("a", 1, map[string]types.AttributeValue{"v": s("one"), "w": s("x")}))
	if got := v(get(key("a", 1), false, "")); got != "absent" {
		t.Errorf("eventually consistent read of a new item: got %s, want absent", got)
	}
	if got := v(get(key("a", 1), true, "")); got != "one" {
		t.Errorf("strongly consistent read of a new item: got %s, want one", got)
	}
	settle()
	if got := v(get(key("a", 1), false, "")); got != "one" {
		t.Errorf("eventually consistent read past the window: got %s, want one", got)
	}

	put(t, db, table, item("a", 1, map[string]types.AttributeValue{"v": s("two"), "w": s("x")}))
	got := get(key("a", 1), false, "#v")
	if v(got) != "one" || len(got) != 1 {
		t.Errorf("projected eventually consistent read after an overwrite: got %v, want only v = one", got)
	}
	tx, err := db.TransactGetItems(ctx(t), &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{{Get: &types.Get{TableName: aws.String(table), Key: key("a", 1)}}}})
	if err != nil || v(tx.Responses[0].Item) != "two" {
		t.Errorf("transactional read: got %v, %v; want two", tx, err)
	}
	settle()

	put(t, db, table, item("b", 1, map[string]types.AttributeValue{"v": s("b")}))
	settle()
	if _, err := db.DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("b", 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("a", 1),
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("three")}}); err != nil {
		t.Fatal(err)
	}
	batch := func(consistent bool) map[string]string {
		t.Helper()
		out, err := db.BatchGetItem(ctx(t), &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			table: {Keys: []map[string]types.AttributeValue{key("a", 1), key("b", 1)}, ConsistentRead: aws.Bool(consistent)},
		}})
		if err != nil {
			t.Fatalf("batch get: %v", err)
		}
		seen := map[string]string{}
		for _, it := range out.Responses[table] {
			seen[it["pk"].(*types.AttributeValueMemberS).Value] = v(it)
		}
		return seen
	}
	if got := batch(false); got["a"] != "two" || got["b"] != "b" || len(got) != 2 {
		t.Errorf("eventually consistent batch after an update and a delete: got %v, want a = two and b still there", got)
	}
	if got := batch(true); got["a"] != "three" || len(got) != 1 {
		t.Errorf("strongly consistent batch: got %v, want a = three alone", got)
	}
	settle()
	if got := batch(false); got["a"] != "three" || len(got) != 1 {
		t.Errorf("eventually consistent batch past the window: got %v, want a = three alone", got)
	}
}
