package ddbfront_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// AWS charges a projected read the whole item, so the front learns the
// item's size by reading it again whole: a call AWS does not make, which
// DynamoDB Local serves on the same thread as the code under test. An item
// whose last write the front saw commit alone is in its image cache, and
// the read is charged from it with no second read; a front that has not
// seen the item reads it, and keeps what it read.
func TestProjectedReadsChargedFromTheImageCache(t *testing.T) {
	writer := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	other := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	db := writer.DynamoDB()
	table := stacktest.OwnPrefix(t) + "projected"
	createTable(t, db, table, "")
	put(t, db, table, item("user", 1, map[string]types.AttributeValue{"body": tenKB}))

	ownReads := func(st *endpoints.Stack, read func(db *dynamodb.Client) error) int64 {
		t.Helper()
		before := st.Front.UpstreamCalls().Own["BatchGetItem"]
		if err := read(st.DynamoDB()); err != nil {
			t.Fatal(err)
		}
		return st.Front.UpstreamCalls().Own["BatchGetItem"] - before
	}
	get := func(db *dynamodb.Client) error {
		_, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("user", 1),
			ProjectionExpression: aws.String("pk")})
		return err
	}
	batch := func(db *dynamodb.Client) error {
		_, err := db.BatchGetItem(ctx(t), &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			table: {Keys: []map[string]types.AttributeValue{key("user", 1)}, ProjectionExpression: aws.String("pk, sk")},
		}})
		return err
	}
	if n := ownReads(writer, get); n != 0 {
		t.Errorf("projected GetItem through the front that saw the write: %d reads of its own, want 0", n)
	}
	if n := ownReads(writer, batch); n != 0 {
		t.Errorf("projected BatchGetItem through the front that saw the write: %d reads of its own, want 0", n)
	}
	if n := ownReads(other, batch); n != 1 {
		t.Errorf("projected BatchGetItem through a front that did not see the write: %d reads of its own, want 1", n)
	}
	// That read found the item with no write of it about: it is kept.
	if n := ownReads(other, get); n != 0 {
		t.Errorf("projected GetItem after the front read the item whole: %d reads of its own, want 0", n)
	}
}
