package ddbfront_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// createTable makes a table keyed by pk (S) and sk (N), with a stream and,
// when ttlAttr is set, TTL on it.
func createTable(t testing.TB, db *dynamodb.Client, name, ttlAttr string) {
	t.Helper()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeN},
		},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	if ttlAttr == "" {
		return
	}
	if _, err := db.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(ttlAttr), Enabled: aws.Bool(true)},
	}); err != nil {
		t.Fatalf("enable ttl on %s: %v", name, err)
	}
}

func item(pk string, sk int, extra map[string]types.AttributeValue) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk},
		"sk": &types.AttributeValueMemberN{Value: strconv.Itoa(sk)},
	}
	for k, v := range extra {
		it[k] = v
	}
	return it
}

func key(pk string, sk int) map[string]types.AttributeValue { return item(pk, sk, nil) }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func put(t *testing.T, db *dynamodb.Client, table string, it map[string]types.AttributeValue) {
	t.Helper()
	if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
		t.Fatalf("put %s: %v", table, err)
	}
}

// records reads every record of the table's stream through the front.
func records(t *testing.T, st *endpoints.Stack, table string) []streamtypes.Record {
	t.Helper()
	desc, err := st.DynamoDB().DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("describe %s: %v", table, err)
	}
	streams := st.Streams()
	sd, err := streams.DescribeStream(ctx(t), &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn})
	if err != nil {
		t.Fatalf("describe stream of %s: %v", table, err)
	}
	var out []streamtypes.Record
	for _, sh := range sd.StreamDescription.Shards {
		it, err := streams.GetShardIterator(ctx(t), &dynamodbstreams.GetShardIteratorInput{
			StreamArn: desc.Table.LatestStreamArn, ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatalf("shard iterator: %v", err)
		}
		next := it.ShardIterator
		for next != nil {
			page, err := streams.GetRecords(ctx(t), &dynamodbstreams.GetRecordsInput{ShardIterator: next, Limit: aws.Int32(1000)})
			if err != nil {
				t.Fatalf("get records: %v", err)
			}
			out = append(out, page.Records...)
			if len(page.Records) == 0 {
				break
			}
			next = page.NextShardIterator
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return aws.ToString(out[i].Dynamodb.SequenceNumber) < aws.ToString(out[j].Dynamodb.SequenceNumber)
	})
	return out
}

type event struct {
	Name    string
	Key     string
	Service bool
}

func summarize(recs []streamtypes.Record) []event {
	var out []event
	for _, r := range recs {
		k := r.Dynamodb.Keys["pk"].(*streamtypes.AttributeValueMemberS).Value + "/" + r.Dynamodb.Keys["sk"].(*streamtypes.AttributeValueMemberN).Value
		svc := r.UserIdentity != nil && aws.ToString(r.UserIdentity.Type) == "Service" && aws.ToString(r.UserIdentity.PrincipalId) == "dynamodb.amazonaws.com"
		out = append(out, event{string(r.EventName), k, svc})
	}
	return out
}

func TestEveryWriteAPIYieldsItsRecords(t *testing.T) {
	st := stacktest.Stack(t)
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "writes"
	createTable(t, db, table, "")

	put(t, db, table, item("a", 1, map[string]types.AttributeValue{"v": num(1)}))
	if _, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key("a", 1),
		UpdateExpression:          aws.String("SET v = v + :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
	}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if _, err := db.DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("a", 1)}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	put(t, db, table, item("b", 1, nil))
	if _, err := db.BatchWriteItem(ctx(t), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: {
		{PutRequest: &types.PutRequest{Item: item("c", 1, nil)}},
		{DeleteRequest: &types.DeleteRequest{Key: key("b", 1)}},
	}}}); err != nil {
		t.Fatalf("batch write: %v", err)
	}
	if _, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: item("d", 1, nil)}},
		{Update: &types.Update{TableName: aws.String(table), Key: key("c", 1), UpdateExpression: aws.String("SET v = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(7)}}},
		{Delete: &types.Delete{TableName: aws.String(table), Key: key("c", 2)}},
	}}); err != nil {
		t.Fatalf("transact write: %v", err)
	}

	recs := records(t, st, table)
	got := summarize(recs)
	want := []event{
		{"INSERT", "a/1", false}, {"MODIFY", "a/1", false}, {"REMOVE", "a/1", false},
		{"INSERT", "b/1", false}, {"INSERT", "c/1", false}, {"REMOVE", "b/1", false},
		{"INSERT", "d/1", false}, {"MODIFY", "c/1", false},
	}
	// A batch and a transaction apply their items in no promised order.
	if diff := cmp.Diff(canon(want), canon(got)); diff != "" {
		t.Fatalf("stream records (-want +got):\n%s", diff)
	}
	// The update's record carries both images.
	mod := recs[1]
	if got, want := mod.Dynamodb.OldImage["v"].(*streamtypes.AttributeValueMemberN).Value, "1"; got != want {
		t.Errorf("old image v: got %v, want %v", got, want)
	}
	if got, want := mod.Dynamodb.NewImage["v"].(*streamtypes.AttributeValueMemberN).Value, "2"; got != want {
		t.Errorf("new image v: got %v, want %v", got, want)
	}
}

// canon orders events by key then name so that batch ordering does not matter,
// while one key's own history stays in order.
func canon(es []event) []event {
	out := append([]event(nil), es...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func TestSweepRemovesExpiredItemsAsTheService(t *testing.T) {
	now := time.Now()
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	db := st.DynamoDB()
	table := stacktest.OwnPrefix(t) + "ttl"
	createTable(t, db, table, "expiresAt")

	put(t, db, table, item("old", 1, map[string]types.AttributeValue{"expiresAt": num(now.Add(-time.Hour).Unix()), "note": &types.AttributeValueMemberS{Value: "bye"}}))
	put(t, db, table, item("new", 1, map[string]types.AttributeValue{"expiresAt": num(now.Add(time.Hour).Unix())}))
	put(t, db, table, item("none", 1, nil))
	put(t, db, table, item("text", 1, map[string]types.AttributeValue{"expiresAt": &types.AttributeValueMemberS{Value: "1"}}))
	put(t, db, table, item("ancient", 1, map[string]types.AttributeValue{"expiresAt": num(now.Add(-6 * 365 * 24 * time.Hour).Unix())}))

	n, err := st.Front.Sweep(ctx(t))
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if n != 1 {
		t.Errorf("swept: got %d, want 1", n)
	}
	recs := records(t, st, table)
	last := recs[len(recs)-1]
	if got, want := summarize([]streamtypes.Record{last})[0], (event{"REMOVE", "old/1", true}); got != want {
		t.Fatalf("last record: got %+v, want %+v", got, want)
	}
	if got, want := last.Dynamodb.OldImage["note"].(*streamtypes.AttributeValueMemberS).Value, "bye"; got != want {
		t.Errorf("old image note: got %v, want %v", got, want)
	}
	for _, k := range []string{"new", "none", "text", "ancient"} {
		out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(k, 1), ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Errorf("item %s: got %v (err %v), want it kept", k, out.Item, err)
		}
	}
	// Reading again (a second consumer, a retry) sees the same identity.
	again := summarize(records(t, st, table))
	if !again[len(again)-1].Service {
		t.Errorf("second read: got no service identity, want it")
	}
}

func TestExtendedExpirySurvivesTheSweep(t *testing.T) {
	now := time.Now()
	var db *dynamodb.Client
	var table string
	extended := atomic.Bool{}
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, AfterScan: func(tb string) {
		if tb != table || extended.Swap(true) {
			return
		}
		// The user touches the cart between the sweeper's scan and its delete.
		if _, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key("cart", 1),
			UpdateExpression:          aws.String("SET expiresAt = :e"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":e": num(now.Add(time.Hour).Unix())},
		}); err != nil {
			t.Errorf("extend: %v", err)
		}
	}})
	db = st.DynamoDB()
	table = stacktest.OwnPrefix(t) + "extend"
	createTable(t, db, table, "expiresAt")
	put(t, db, table, item("cart", 1, map[string]types.AttributeValue{"expiresAt": num(now.Add(-time.Minute).Unix())}))

	n, err := st.Front.Sweep(ctx(t))
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if !extended.Load() {
		t.Fatalf("the hook did not run")
	}
	if n != 0 {
		t.Errorf("swept: got %d, want 0", n)
	}
	// Read strongly consistent: the put and the update are younger than
	// the stale-read window, and an eventually consistent read may not see
	// the item yet, as on AWS.
	out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("cart", 1), ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("extended item: got %v (err %v), want it kept", out.Item, err)
	}
}

func TestUserDeleteOfExpiredItemIsNotTheService(t *testing.T) {
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	db := st.DynamoDB()
	table := stacktest.OwnPrefix(t) + "userdel"
	createTable(t, db, table, "expiresAt")
	expired := map[string]types.AttributeValue{"expiresAt": num(time.Now().Add(-time.Hour).Unix())}
	put(t, db, table, item("x", 1, expired))
	if _, err := db.DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("x", 1)}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if n, err := st.Front.Sweep(ctx(t)); err != nil || n != 0 {
		t.Fatalf("sweep: got %d, %v; want 0, nil", n, err)
	}
	// The same key, expired again, swept, then written and deleted by a user.
	put(t, db, table, item("x", 1, expired))
	if n, err := st.Front.Sweep(ctx(t)); err != nil || n != 1 {
		t.Fatalf("sweep: got %d, %v; want 1, nil", n, err)
	}
	put(t, db, table, item("x", 1, expired))
	if _, err := db.DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("x", 1)}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	got := summarize(records(t, st, table))
	want := []event{
		{"INSERT", "x/1", false}, {"REMOVE", "x/1", false},
		{"INSERT", "x/1", false}, {"REMOVE", "x/1", true},
		{"INSERT", "x/1", false}, {"REMOVE", "x/1", false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
}

func TestSweepManyItemsAcrossTablesAndPages(t *testing.T) {
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	db := st.DynamoDB()
	prefix := stacktest.OwnPrefix(t)
	expired := time.Now().Add(-time.Hour).Unix()
	payload := &types.AttributeValueMemberS{Value: strings.Repeat("x", 512)}
	const perTable = 700
	names := []string{prefix + "many-a", prefix + "many-b"}
	for _, name := range names {
		createTable(t, db, name, "expiresAt")
		for i := 0; i < perTable; i += 25 {
			var reqs []types.WriteRequest
			for j := i; j < i+25; j++ {
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item("k", j, map[string]types.AttributeValue{
					"expiresAt": num(expired), "payload": payload,
				})}})
			}
			for pending := map[string][]types.WriteRequest{name: reqs}; len(pending) > 0; {
				out, err := db.BatchWriteItem(ctx(t), &dynamodb.BatchWriteItemInput{RequestItems: pending})
				if err != nil {
					t.Fatalf("batch write: %v", err)
				}
				pending = out.UnprocessedItems
			}
		}
	}
	n, err := st.Front.Sweep(ctx(t))
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if n != len(names)*perTable {
		t.Errorf("swept: got %d, want %d", n, len(names)*perTable)
	}
	for _, name := range names {
		for _, i := range []int{0, 19, 350, 699} {
			out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(name), Key: key("k", i), ConsistentRead: aws.Bool(true)})
			if err != nil || out.Item != nil {
				t.Errorf("%s item %d: got %v (err %v), want it gone", name, i, out.Item, err)
			}
		}
		removed := 0
		for _, e := range summarize(records(t, st, name)) {
			if e.Name == "REMOVE" && e.Service {
				removed++
			}
		}
		if removed != perTable {
			t.Errorf("%s: service removals: got %d, want %d", name, removed, perTable)
		}
	}
}

func TestFaultHook(t *testing.T) {
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	db := st.DynamoDB()
	prefix := stacktest.Prefix(t)
	hot, cold := prefix+"hot", prefix+"cold"
	createTable(t, db, hot, "")
	createTable(t, db, cold, "")
	noRetry := func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }

	for _, code := range []string{"ProvisionedThroughputExceededException", "ThrottlingException", "InternalServerError"} {
		t.Run(code, func(t *testing.T) {
			st.Front.InjectFault(ddbfront.Fault{Table: hot, Operation: "PutItem", Code: code, Times: 2})
			for i := 0; i < 2; i++ {
				_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(hot), Item: item("a", i, nil)}, noRetry)
				var api smithy.APIError
				if !errors.As(err, &api) || api.ErrorCode() != code {
					t.Fatalf("put %d: got %v, want %s", i, err, code)
				}
			}
			if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(cold), Item: item("a", 1, nil)}, noRetry); err != nil {
				t.Fatalf("other table: got %v, want nil", err)
			}
			if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(hot), Item: item("a", 1, nil)}, noRetry); err != nil {
				t.Fatalf("after the fault: got %v, want nil", err)
			}
		})
	}
	t.Run("transaction names the table", func(t *testing.T) {
		remove := st.Front.InjectFault(ddbfront.Fault{Table: hot, Code: "ThrottlingException"})
		defer remove()
		_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(cold), Item: item("t", 1, nil)}},
			{Put: &types.Put{TableName: aws.String(hot), Item: item("t", 1, nil)}},
		}}, noRetry)
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "ThrottlingException" {
			t.Fatalf("got %v, want ThrottlingException", err)
		}
	})
	t.Run("a transaction conflict cancels with reasons, as contention does", func(t *testing.T) {
		// A single-item write fails as AWS fails one to an item a
		// transaction holds; reads pass.
		st.Front.InjectFault(ddbfront.Fault{Table: hot, Code: "TransactionConflict", Times: 1})
		if _, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(hot), Key: key("c", 0)}, noRetry); err != nil {
			t.Fatalf("get: got %v, want nil", err)
		}
		_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(hot), Item: item("c", 0, nil)}, noRetry)
		var tconf *types.TransactionConflictException
		if !errors.As(err, &tconf) {
			t.Fatalf("put: got %v, want TransactionConflictException", err)
		}
		st.Front.InjectFault(ddbfront.Fault{Table: hot, Code: "TransactionConflict", Times: 1})
		in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(cold), Item: item("c", 1, nil)}},
			{Put: &types.Put{TableName: aws.String(hot), Item: item("c", 1, nil)}},
		}}
		_, err = db.TransactWriteItems(ctx(t), in)
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			t.Fatalf("got %v, want TransactionCanceledException", err)
		}
		var codes []string
		for _, r := range tce.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
		}
		if want := []string{"None", "TransactionConflict"}; !slices.Equal(codes, want) {
			t.Errorf("reasons: got %v, want %v", codes, want)
		}
		for _, table := range []string{hot, cold} {
			out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("c", 1), ConsistentRead: aws.Bool(true)})
			if err != nil || out.Item != nil {
				t.Errorf("%s after the cancelled transaction: got %v, %v; want no item", table, out.Item, err)
			}
		}
		if _, err := db.TransactWriteItems(ctx(t), in); err != nil {
			t.Fatalf("after the fault: got %v, want nil", err)
		}
		out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(hot), Key: key("c", 1), ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Errorf("after the second transaction: got %v, %v; want the item", out.Item, err)
		}
	})
	t.Run("the SDK retries through a short fault", func(t *testing.T) {
		st.Front.InjectFault(ddbfront.Fault{Table: hot, Operation: "GetItem", Code: "ProvisionedThroughputExceededException", Times: 2})
		if _, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(hot), Key: key("a", 1)}); err != nil {
			t.Fatalf("got %v, want the default retryer to succeed", err)
		}
	})
}

func TestRestartKeepsDataSettingsAndIdentity(t *testing.T) {
	dir := t.TempDir()
	start := func() *endpoints.Stack { return startOn(t, dir) }
	st := start()
	db := st.DynamoDB()
	table := "restart"
	createTable(t, db, table, "expiresAt")
	put(t, db, table, item("kept", 1, nil))
	put(t, db, table, item("read-before", 1, map[string]types.AttributeValue{"expiresAt": num(time.Now().Add(-time.Hour).Unix())}))
	if n, err := st.Front.Sweep(ctx(t)); err != nil || n != 1 {
		t.Fatalf("sweep: got %d, %v; want 1, nil", n, err)
	}
	before := summarize(records(t, st, table))
	put(t, db, table, item("read-after", 1, map[string]types.AttributeValue{"expiresAt": num(time.Now().Add(-time.Hour).Unix())}))
	if n, err := st.Front.Sweep(ctx(t)); err != nil || n != 1 {
		t.Fatalf("sweep: got %d, %v; want 1, nil", n, err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	st = start()
	defer st.Close()
	db = st.DynamoDB()
	out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("kept", 1)})
	if err != nil || out.Item == nil {
		t.Fatalf("kept item after restart: got %v (err %v)", out.Item, err)
	}
	ttl, err := db.DescribeTimeToLive(ctx(t), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "expiresAt" {
		t.Fatalf("ttl setting after restart: got %+v (err %v)", ttl.TimeToLiveDescription, err)
	}
	after := summarize(records(t, st, table))
	want := append(before, event{"INSERT", "read-after/1", false}, event{"REMOVE", "read-after/1", true})
	if diff := cmp.Diff(want, after); diff != "" {
		t.Fatalf("records after restart (-want +got):\n%s", diff)
	}
	if got := fmt.Sprint(before[len(before)-1]); got != fmt.Sprint(event{"REMOVE", "read-before/1", true}) {
		t.Errorf("before restart: got %s", got)
	}
}

func TestTimeToLiveSettings(t *testing.T) {
	st := stacktest.Stack(t)
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "settings"
	createTable(t, db, table, "")
	describe := func() *types.TimeToLiveDescription {
		t.Helper()
		out, err := db.DescribeTimeToLive(ctx(t), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatalf("describe ttl: %v", err)
		}
		return out.TimeToLiveDescription
	}
	update := func(attr string, on bool) error {
		_, err := db.UpdateTimeToLive(ctx(t), &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(on)}})
		return err
	}
	code := func(err error) string {
		var api smithy.APIError
		if errors.As(err, &api) {
			return api.ErrorCode()
		}
		return fmt.Sprint(err)
	}
	if got := describe().TimeToLiveStatus; got != types.TimeToLiveStatusDisabled {
		t.Errorf("new table: got %v, want DISABLED", got)
	}
	if err := update("expiresAt", true); err != nil {
		t.Fatalf("enable: %v", err)
	}
	if d := describe(); d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "expiresAt" {
		t.Errorf("enabled: got %+v", d)
	}
	if got := code(update("expiresAt", true)); got != "ValidationException" {
		t.Errorf("enable twice: got %v, want ValidationException", got)
	}
	if got := code(update("other", false)); got != "ValidationException" {
		t.Errorf("disable another attribute: got %v, want ValidationException", got)
	}
	if err := update("expiresAt", false); err != nil {
		t.Fatalf("disable: %v", err)
	}
	if got := describe().TimeToLiveStatus; got != types.TimeToLiveStatusDisabled {
		t.Errorf("disabled: got %v, want DISABLED", got)
	}
	_, err := db.DescribeTimeToLive(ctx(t), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table + "-missing")})
	if got := code(err); got != "ResourceNotFoundException" {
		t.Errorf("missing table: got %v, want ResourceNotFoundException", got)
	}
}

// startOn starts a stack that keeps its data in dir, without the sweeper:
// tests that restart the stack start the next one on the same dir.
func startOn(t *testing.T, dir string) *endpoints.Stack {
	t.Helper()
	st, err := endpoints.Start(ctx(t), endpoints.Config{DataDir: dir, TTLSweepInterval: -1})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return st
}

// TestFrontGivenOnlyItsUpstream: a front configured with DynamoDB Local's
// URL alone makes its own clients, so AWS's limits (on by default) check a
// transaction's items instead of dereferencing a client it was not given.
func TestFrontGivenOnlyItsUpstream(t *testing.T) {
	upstream := stacktest.Stack(t).Upstream()
	f, err := ddbfront.New(ctx(t), ddbfront.Config{Upstream: upstream})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	db := dynamodb.NewFromConfig(endpoints.AWSConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	table := stacktest.OwnPrefix(t) + "upstream-only"
	createTable(t, db, table, "")
	if _, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: item("a", 1, nil)}},
		{Update: &types.Update{TableName: aws.String(table), Key: key("b", 1),
			UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}}},
	}}); err != nil {
		t.Fatalf("transaction: %v", err)
	}
}
