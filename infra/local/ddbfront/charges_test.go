package ddbfront_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// stillClock is the token buckets' clock: it stands still unless a test
// moves it, so a bucket is never refilled behind a test's back.
type stillClock struct{ ns atomic.Int64 }

func newStillClock() *stillClock {
	c := &stillClock{}
	c.ns.Store(time.Unix(1_800_000_000, 0).UnixNano())
	return c
}

func (c *stillClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// refill moves the clock on far enough that every bucket is full again.
func (c *stillClock) refill() { c.ns.Add(int64(time.Minute)) }

// limitedStack is a dedicated stack whose partitions serve 12 units a second
// each way, as the measurements did, on a clock that stands still.
// onePerKey is so many partitions that the few key values of a test never
// share one.
const onePerKey = 1 << 30

func limitedStack(t *testing.T) (*endpoints.Stack, *stillClock) {
	t.Helper()
	clock := newStillClock()
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{
		PartitionWCU: 12, PartitionRCU: 12, Now: clock.Now,
		// A partition for each key value here, so that a key's units are
		// its own (TestKeyValuesShareTheirPartition covers sharing).
		Partitions: onePerKey,
	}})
	return st, clock
}

// limitedTable creates a table of the test's own under limitedStack's
// limits, and returns a client, its name and the limits' clock.
func limitedTable(t *testing.T, name string) (*dynamodb.Client, string, *stillClock) {
	t.Helper()
	st, clock := limitedStack(t)
	db := st.DynamoDB()
	table := stacktest.OwnPrefix(t) + name
	createTable(t, db, table, "")
	return db, table, clock
}

// admitted sends n requests and counts those the front let through; every
// other answer must be a ProvisionedThroughputExceededException.
func admitted(t *testing.T, n int, send func(i int) error) int {
	t.Helper()
	return admittedOr(t, n, send, func(err error) bool {
		var pte *types.ProvisionedThroughputExceededException
		return errors.As(err, &pte)
	})
}

// admittedOr is admitted with the refusal the requests may meet.
func admittedOr(t *testing.T, n int, send func(i int) error, refused func(error) bool) int {
	t.Helper()
	ok := 0
	for i := 0; i < n; i++ {
		switch err := send(i); {
		case err == nil:
			ok++
		case refused(err):
		default:
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return ok
}

// tenKB is a 10 KB attribute value: an item holding it is charged 10 write
// units and 3 strongly consistent read units.
var tenKB = &types.AttributeValueMemberS{Value: strings.Repeat("x", 10_000)}

// Each row of issue 29's table, charged as "DynamoDB read and write
// operations" (developer guide) charges it, on a still clock at 12 units a
// second: an update the larger of the item before and after; a read the whole
// item whatever its projection; a Query or Scan what it read before its
// filter, summed and rounded up to 4 KB; a PartiQL SELECT as the query it is;
// an index key moved a delete in the old key's partition and a put in the
// new one's ("Using Global Secondary Indexes in DynamoDB").
func TestChargesAsAWSCharges(t *testing.T) {
	st, clock := limitedStack(t)
	db := st.DynamoDB()
	prefix := stacktest.OwnPrefix(t)
	table := prefix + "items"
	createTable(t, db, table, "")
	setup := func(it map[string]types.AttributeValue) {
		t.Helper()
		clock.refill()
		put(t, db, table, it)
	}

	t.Run("upserts of 10 KB items", func(t *testing.T) {
		clock.refill()
		got := admitted(t, 12, func(i int) error {
			_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: key("upserts", i),
				UpdateExpression:          aws.String("SET body = :b"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":b": tenKB},
			}, noRetry)
			return err
		})
		// 10 units each from a bucket of 12.
		if want := 1; got != want {
			t.Errorf("admitted %d of 12, want %d", got, want)
		}
	})

	t.Run("updates moving items into one index key", func(t *testing.T) {
		indexed := prefix + "indexed"
		createIndexedTable(t, db, indexed)
		for i := 0; i < 30; i++ {
			clock.refill()
			if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(indexed), Item: map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: itoa(i)}, "category": &types.AttributeValueMemberS{Value: "c" + itoa(i)},
			}}); err != nil {
				t.Fatal(err)
			}
		}
		clock.refill()
		got := admitted(t, 30, func(i int) error {
			_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{
				TableName: aws.String(indexed), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: itoa(i)}},
				UpdateExpression:          aws.String("SET category = :c"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberS{Value: "hot"}},
			}, noRetry)
			return err
		})
		// Each puts a 1 KB entry in the index partition of "hot".
		if want := 12; got != want {
			t.Errorf("admitted %d of 30, want %d", got, want)
		}
	})

	t.Run("projected reads of a 10 KB item", func(t *testing.T) {
		setup(item("projected", 0, map[string]types.AttributeValue{"body": tenKB}))
		clock.refill()
		got := admitted(t, 20, func(int) error {
			_, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{
				TableName: aws.String(table), Key: key("projected", 0), ConsistentRead: aws.Bool(true),
				ProjectionExpression: aws.String("pk"),
			}, noRetry)
			return err
		})
		// 3 units each; a read passes while its partition has units left.
		if want := 4; got != want {
			t.Errorf("admitted %d of 20, want %d", got, want)
		}
	})

	for i := 0; i < 4; i++ {
		setup(item("four", i, map[string]types.AttributeValue{"body": tenKB}))
	}
	t.Run("queries whose filter drops the four 10 KB items they read", func(t *testing.T) {
		clock.refill()
		got := admitted(t, 10, func(int) error {
			out, err := db.Query(ctx(t), &dynamodb.QueryInput{
				TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				KeyConditionExpression:    aws.String("pk = :p"),
				FilterExpression:          aws.String("attribute_not_exists(body)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "four"}},
			}, noRetry)
			if err == nil && (len(out.Items) != 0 || out.ScannedCount != 4) {
				t.Fatalf("query: got %d items of %d read, want 0 of 4", len(out.Items), out.ScannedCount)
			}
			return err
		})
		// 40 KB read, 10 units each.
		if want := 2; got != want {
			t.Errorf("admitted %d of 10, want %d", got, want)
		}
	})

	t.Run("PartiQL selects of the four items", func(t *testing.T) {
		clock.refill()
		got := admitted(t, 10, func(int) error {
			_, err := db.ExecuteStatement(ctx(t), &dynamodb.ExecuteStatementInput{
				Statement:      aws.String(`SELECT pk FROM "` + table + `" WHERE pk = ?`),
				Parameters:     []types.AttributeValue{&types.AttributeValueMemberS{Value: "four"}},
				ConsistentRead: aws.Bool(true),
			}, noRetry)
			return err
		})
		if want := 2; got != want {
			t.Errorf("admitted %d of 10, want %d", got, want)
		}
	})

	t.Run("scans of a table of four 10 KB items", func(t *testing.T) {
		scanned := prefix + "scanned"
		createTable(t, db, scanned, "")
		for i := 0; i < 4; i++ {
			clock.refill()
			put(t, db, scanned, item("scan", i, map[string]types.AttributeValue{"body": tenKB}))
		}
		clock.refill()
		got := admitted(t, 10, func(int) error {
			_, err := db.Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(scanned), ConsistentRead: aws.Bool(true)}, noRetry)
			return err
		})
		if want := 2; got != want {
			t.Errorf("admitted %d of 10, want %d", got, want)
		}
	})
}

// createIndexedTable makes a table keyed by id (S) with a global index
// byCategory on category (S), projecting everything.
func createIndexedTable(t *testing.T, db *dynamodb.Client, name string, opts ...func(*dynamodb.CreateTableInput)) {
	t.Helper()
	in := &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("category"), AttributeType: types.ScalarAttributeTypeS},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("byCategory"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("category"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	}
	for _, o := range opts {
		o(in)
	}
	if _, err := db.CreateTable(ctx(t), in); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
}

// A batch is answered key by key ("BatchWriteItem", "BatchGetItem", API
// reference): the items of a throttled partition come back unprocessed, the
// others are processed, and the whole batch fails with
// ProvisionedThroughputExceededException only when nothing could be.
func TestBatchesAnsweredKeyByKey(t *testing.T) {
	st, clock := limitedStack(t)
	db := st.DynamoDB()
	table := stacktest.OwnPrefix(t) + "items"
	createTable(t, db, table, "")
	clock.refill()
	for i := 0; i < 12; i++ { // the hot partition's 12 write units
		put(t, db, table, item("hot", 100+i, nil))
	}
	var writes []types.WriteRequest
	for i := 0; i < 10; i++ {
		writes = append(writes,
			types.WriteRequest{PutRequest: &types.PutRequest{Item: item("hot", i, nil)}},
			types.WriteRequest{PutRequest: &types.PutRequest{Item: item("cold"+itoa(i), i, nil)}})
	}
	out, err := db.BatchWriteItem(ctx(t), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: writes}}, noRetry)
	if err != nil {
		t.Fatalf("batch write of 10 hot and 10 cold items: %v", err)
	}
	if got := len(out.UnprocessedItems[table]); got != 10 {
		t.Errorf("unprocessed items: got %d, want the 10 hot ones", got)
	}
	for _, w := range out.UnprocessedItems[table] {
		if pk := w.PutRequest.Item["pk"].(*types.AttributeValueMemberS).Value; pk != "hot" {
			t.Errorf("unprocessed item of partition %s, want only hot's", pk)
		}
	}
	for i := 0; i < 10; i++ {
		got, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("cold"+itoa(i), i), ConsistentRead: aws.Bool(true)})
		if err != nil || got.Item == nil {
			t.Errorf("cold item %d: got %v, %v; want it written", i, got.Item, err)
		}
	}
	_, err = db.BatchWriteItem(ctx(t), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: writes[:1]}}, noRetry)
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Errorf("batch write of hot items only: got %v, want ProvisionedThroughputExceededException", err)
	}

	// Reads: the hot partition's 12 read units spent, a GetItem refused.
	clock.refill()
	for {
		_, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("hot", 100), ConsistentRead: aws.Bool(true)}, noRetry)
		if errors.As(err, &pte) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	var keys []map[string]types.AttributeValue
	for i := 0; i < 5; i++ {
		keys = append(keys, key("hot", 100+i))
	}
	for i := 0; i < 10; i++ {
		keys = append(keys, key("cold"+itoa(i), i))
	}
	got, err := db.BatchGetItem(ctx(t), &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pk, sk")},
	}}, noRetry)
	if err != nil {
		t.Fatalf("batch get of 5 hot and 10 cold keys: %v", err)
	}
	if n := len(got.Responses[table]); n != 10 {
		t.Errorf("answered: got %d, want the 10 cold keys", n)
	}
	un := got.UnprocessedKeys[table]
	if len(un.Keys) != 5 || aws.ToString(un.ProjectionExpression) != "pk, sk" || !aws.ToBool(un.ConsistentRead) {
		t.Errorf("unprocessed keys: got %d keys, projection %q, consistent %v; want the 5 hot ones as asked", len(un.Keys), aws.ToString(un.ProjectionExpression), aws.ToBool(un.ConsistentRead))
	}
	_, err = db.BatchGetItem(ctx(t), &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: {Keys: keys[:5]}}}, noRetry)
	if !errors.As(err, &pte) {
		t.Errorf("batch get of hot keys only: got %v, want ProvisionedThroughputExceededException", err)
	}
	if got := st.Front.LimitStats().Unprocessed; got != 15 {
		t.Errorf("stats: got %d unprocessed keys, want 15", got)
	}
}

// TestScanChargedByPartitionNotByKey: a Scan of many small items of distinct
// key values is charged by its partitions' parts, each summed and rounded
// once, as AWS charges it, not 0.5 a key value.
func TestScanChargedByPartitionNotByKey(t *testing.T) {
	clock := newStillClock()
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{
		PartitionRCU: 4, PartitionWCU: 1000, Partitions: 4, Now: clock.Now,
	}})
	db := st.DynamoDB()
	table := stacktest.OwnPrefix(t) + "small-items"
	createTable(t, db, table, "")
	for i := 0; i < 40; i++ {
		put(t, db, table, item("k"+itoa(i), 0, nil)) // 40 values of ~10 B: 400 B in all
	}
	clock.refill()
	got := admitted(t, 10, func(int) error {
		_, err := db.Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(table)}, noRetry)
		return err
	})
	// Each partition's part rounds to 0.5 RCU: 8 scans fill a partition's 4.
	// Charged 0.5 a key value, a scan would take ~5 of each partition's 4.
	if got < 8 {
		t.Errorf("admitted %d of 10 scans, want at least 8 (0.5 RCU a partition a scan)", got)
	}
}
