package ddbfront_test

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

var noRetry = func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }

func reasonCodes(err error) []string {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	var codes []string
	for _, r := range tce.CancellationReasons {
		codes = append(codes, aws.ToString(r.Code))
	}
	return codes
}

// The rules of "Transaction conflict handling in DynamoDB" (developer
// guide, transaction-apis): while a TransactWriteItems is in progress on an
// item, a single-item write of it fails with TransactionConflictException,
// and another TransactWriteItems or a TransactGetItems naming it is
// cancelled with TransactionConflict at its position and None elsewhere.
func TestTransactionConflicts(t *testing.T) {
	const window = 3 * time.Second
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{TxWindow: window}})
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "items"
	createTable(t, db, table, "")
	put := func(pk string, sk int) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item(pk, sk, nil)}}
	}

	first := make(chan error, 1)
	go func() {
		_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put("a", 1), put("b", 1)}}, noRetry)
		first <- err
	}()
	// Once the first transaction is in progress, a put of its item fails.
	deadline := time.Now().Add(window / 2)
	for {
		_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", 1, nil)}, noRetry)
		var tce *types.TransactionConflictException
		if errors.As(err, &tce) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("put of the item of a transaction in progress: got %v, want TransactionConflictException", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("c", 1),
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)}}, noRetry); err != nil {
		t.Errorf("update of another item: got %v, want nil", err)
	}
	_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put("d", 1), put("b", 1)}}, noRetry)
	if got, want := reasonCodes(err), []string{"None", "TransactionConflict"}; !slices.Equal(got, want) {
		t.Errorf("second transaction: got %v (%v), want reasons %v", got, err, want)
	}
	_, err = db.TransactGetItems(ctx(t), &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
		{Get: &types.Get{TableName: aws.String(table), Key: key("a", 1)}},
		{Get: &types.Get{TableName: aws.String(table), Key: key("c", 1)}},
	}}, noRetry)
	if got, want := reasonCodes(err), []string{"TransactionConflict", "None"}; !slices.Equal(got, want) {
		t.Errorf("transact get: got %v (%v), want reasons %v", got, err, want)
	}
	select {
	case err := <-first:
		t.Fatalf("the first transaction answered (%v) before the checks ended; they prove nothing", err)
	default:
	}
	out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("d", 1), ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item != nil {
		t.Errorf("item of the cancelled transaction: got %v, %v; want none", out.Item, err)
	}

	// Once the first transaction has answered, its items are free: its
	// client's next write never meets it.
	if err := <-first; err != nil {
		t.Fatalf("first transaction: %v", err)
	}
	if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", 1, nil)}, noRetry); err != nil {
		t.Fatalf("put after the transaction answered: %v", err)
	}
	// The holds are counted: the first transaction held its items the
	// window at least; the refused ones held nothing (they were not
	// admitted).
	if s := st.Front.LimitStats(); s.Holds != 1 || s.HeldFor < window || s.LongestHold != s.HeldFor {
		t.Errorf("holds: %d, %s in all, longest %s; want 1 of %s or more", s.Holds, s.HeldFor, s.LongestHold, window)
	}
}

// Concurrent transactions on one item meet TransactionConflict, as on AWS;
// DynamoDB Local alone serialises them and never does.
func TestConcurrentTransactionsOnOneItemConflict(t *testing.T) {
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "hot"
	createTable(t, db, table, "")
	put(t, db, table, item("hot", 0, map[string]types.AttributeValue{"n": num(0)}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, conflicts := 0, 0
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
					TableName: aws.String(table), Key: key("hot", 0),
					UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
				}}}}, noRetry)
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case slices.Equal(reasonCodes(err), []string{"TransactionConflict"}):
					conflicts++
				default:
					t.Errorf("transaction: %v", err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if conflicts == 0 {
		t.Errorf("80 transactions of 8 writers on one item: no conflict")
	}
	out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("hot", 0), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Item["n"].(*types.AttributeValueMemberN).Value; got != itoa(ok) {
		t.Errorf("n: got %s, want the %d transactions that succeeded", got, ok)
	}
	if s := st.Front.LimitStats(); s.Conflicts != int64(conflicts) {
		t.Errorf("stats: got %d conflicts, want %d", s.Conflicts, conflicts)
	}
	t.Logf("%d committed, %d conflicts", ok, conflicts)
}

// A partition key value serves PartitionWCU write units per second, a
// transaction costing twice; over it, writes fail as AWS fails an on-demand
// table's hot key: ProvisionedThroughputExceededException with the reason
// TableWriteKeyRangeThroughputExceeded, or a transaction cancelled with
// ThrottlingError. The clock stands still, so the buckets do not refill.
func TestPartitionWriteThroughput(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{PartitionWCU: 4, PartitionRCU: 3, Partitions: onePerKey, Now: func() time.Time { return now }}})
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "items"
	createTable(t, db, table, "")

	for i := 0; i < 4; i++ {
		if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("hot", i, nil)}, noRetry); err != nil {
			t.Fatalf("put %d within the partition's units: %v", i, err)
		}
	}
	_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("hot", 9, nil)}, noRetry)
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Fatalf("fifth put: got %v, want ProvisionedThroughputExceededException", err)
	}
	if len(pte.ThrottlingReasons) != 1 || aws.ToString(pte.ThrottlingReasons[0].Reason) != "TableWriteKeyRangeThroughputExceeded" ||
		aws.ToString(pte.ThrottlingReasons[0].Resource) != "arn:aws:dynamodb:us-east-1:000000000000:table/"+table {
		t.Errorf("throttling reasons: got %+v", pte.ThrottlingReasons)
	}
	if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("cold", 0, nil)}, noRetry); err != nil {
		t.Errorf("another partition key: got %v, want nil", err)
	}
	// A transaction costs two units per item: two fit in four units, the third does not.
	for i := 0; i < 3; i++ {
		_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: item("other"+itoa(i), 0, nil)}},
			{Put: &types.Put{TableName: aws.String(table), Item: item("tx", i, nil)}},
		}}, noRetry)
		want := []string(nil)
		if i == 2 {
			want = []string{"None", "ThrottlingError"}
		}
		if got := reasonCodes(err); !slices.Equal(got, want) || (want == nil && err != nil) {
			t.Errorf("transaction %d: got %v (%v), want reasons %v", i, got, err, want)
		}
	}
	// Reads: three strongly consistent reads of a small item, then throttled.
	for i := 0; i < 4; i++ {
		_, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("cold", 0), ConsistentRead: aws.Bool(true)}, noRetry)
		var pte *types.ProvisionedThroughputExceededException
		switch {
		case i < 3 && err != nil:
			t.Errorf("read %d: %v", i, err)
		case i == 3 && (!errors.As(err, &pte) || aws.ToString(pte.ThrottlingReasons[0].Reason) != "TableReadKeyRangeThroughputExceeded"):
			t.Errorf("read %d: got %v, want TableReadKeyRangeThroughputExceeded", i, err)
		}
	}
	if s := st.Front.LimitStats(); s.Throttles != 3 {
		t.Errorf("stats: got %d throttles, want 3", s.Throttles)
	}
	// Time passing refills the buckets.
	now = now.Add(time.Second)
	if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("hot", 9, nil)}, noRetry); err != nil {
		t.Errorf("put a second later: %v", err)
	}
}

// An index write is charged to the index's partition: writes of different
// items that share a global index's key value exhaust the index's partition
// and are throttled with IndexWriteKeyRangeThroughputExceeded.
func TestIndexPartitionHoldsBackTableWrites(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{PartitionWCU: 3, Partitions: onePerKey, Now: func() time.Time { return now }}})
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "indexed"
	_, err := db.CreateTable(ctx(t), &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
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
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: itoa(i)}, "category": &types.AttributeValueMemberS{Value: "kitchen"},
		}}, noRetry)
		var pte *types.ProvisionedThroughputExceededException
		switch {
		case i < 3 && err != nil:
			t.Errorf("put %d: %v", i, err)
		case i == 3 && (!errors.As(err, &pte) || aws.ToString(pte.ThrottlingReasons[0].Reason) != "IndexWriteKeyRangeThroughputExceeded" ||
			aws.ToString(pte.ThrottlingReasons[0].Resource) != "arn:aws:dynamodb:us-east-1:000000000000:table/"+table+"/index/byCategory"):
			t.Errorf("put %d: got %v, want IndexWriteKeyRangeThroughputExceeded on byCategory", i, err)
		}
	}
	out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "3"}}, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item != nil {
		t.Errorf("the throttled item: got %v, %v; want none written", out.Item, err)
	}
	// An item out of the category writes another index partition.
	if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: "9"}, "category": &types.AttributeValueMemberS{Value: "garden"},
	}}, noRetry); err != nil {
		t.Errorf("another category: %v", err)
	}
}

// Off turns the limits off, for debugging.
func TestLimitsOff(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{Off: true, PartitionWCU: 1, Now: func() time.Time { return now }}})
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "items"
	createTable(t, db, table, "")
	for i := 0; i < 5; i++ {
		if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("hot", i, nil)}, noRetry); err != nil {
			t.Fatalf("put %d with the limits off: %v", i, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// PartiQL statements meet the conflicts of the operations they stand for:
// while a TransactWriteItems holds an item, an ExecuteStatement UPDATE of it
// fails with TransactionConflictException, an ExecuteTransaction naming it
// is cancelled with TransactionConflict at its position, and a
// BatchExecuteStatement statement on it fails alone with TransactionConflict.
func TestPartiQLTransactionConflicts(t *testing.T) {
	const window = 3 * time.Second
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{TxWindow: window}})
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "items"
	createTable(t, db, table, "")
	put(t, db, table, item("a", 1, nil))
	put(t, db, table, item("b", 1, nil))
	first := make(chan error, 1)
	go func() {
		_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
			TableName: aws.String(table), Key: key("a", 1), UpdateExpression: aws.String("SET v = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1)},
		}}}}, noRetry)
		first <- err
	}()
	update := func(pk string) *string {
		return aws.String(`UPDATE "` + table + `" SET v = 2 WHERE pk = '` + pk + `' AND sk = 1`)
	}
	deadline := time.Now().Add(window / 2)
	for {
		_, err := db.ExecuteStatement(ctx(t), &dynamodb.ExecuteStatementInput{Statement: update("a")}, noRetry)
		var tce *types.TransactionConflictException
		if errors.As(err, &tce) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ExecuteStatement UPDATE of the item of a transaction in progress: got %v, want TransactionConflictException", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := db.ExecuteTransaction(ctx(t), &dynamodb.ExecuteTransactionInput{TransactStatements: []types.ParameterizedStatement{
		{Statement: update("b")}, {Statement: update("a")},
	}}, noRetry)
	if got, want := reasonCodes(err), []string{"None", "TransactionConflict"}; !slices.Equal(got, want) {
		t.Errorf("ExecuteTransaction: got %v (%v), want reasons %v", got, err, want)
	}
	_, err = db.ExecuteTransaction(ctx(t), &dynamodb.ExecuteTransactionInput{TransactStatements: []types.ParameterizedStatement{
		{Statement: aws.String(`SELECT * FROM "` + table + `" WHERE pk = 'a' AND sk = 1`)},
	}}, noRetry)
	if got, want := reasonCodes(err), []string{"TransactionConflict"}; !slices.Equal(got, want) {
		t.Errorf("ExecuteTransaction of a SELECT: got %v (%v), want reasons %v", got, err, want)
	}
	out, err := db.BatchExecuteStatement(ctx(t), &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{
		{Statement: update("a")}, {Statement: update("b")},
	}}, noRetry)
	if err != nil {
		t.Fatalf("BatchExecuteStatement: %v", err)
	}
	if len(out.Responses) != 2 || out.Responses[0].Error == nil || out.Responses[0].Error.Code != types.BatchStatementErrorCodeEnumTransactionConflict || out.Responses[1].Error != nil {
		t.Errorf("BatchExecuteStatement: got %+v, want TransactionConflict for a and success for b", out.Responses)
	}
	select {
	case err := <-first:
		t.Fatalf("the transaction answered (%v) before the checks ended; they prove nothing", err)
	default:
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	got, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("b", 1), ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item["v"] == nil || got.Item["v"].(*types.AttributeValueMemberN).Value != "2" {
		t.Errorf("b after the batch: got %v, %v; want v 2", got.Item, err)
	}
}

// PartiQL writes are charged as the writes they stand for, on a still
// clock at 12 units a second: an INSERT of a 10 KB item 10 units, an
// ExecuteTransaction twice that, and a BatchExecuteStatement statement
// whose partition cannot pay fails alone.
func TestPartiQLWriteThroughput(t *testing.T) {
	db, table, clock := limitedTable(t, "items")
	insert := func(pk string, sk int) *dynamodb.ExecuteStatementInput {
		return &dynamodb.ExecuteStatementInput{Statement: aws.String(`INSERT INTO "` + table + `" VALUE {'pk': ?, 'sk': ?, 'body': ?}`),
			Parameters: []types.AttributeValue{&types.AttributeValueMemberS{Value: pk}, num(int64(sk)), tenKB}}
	}
	clock.refill()
	got := admitted(t, 5, func(i int) error {
		_, err := db.ExecuteStatement(ctx(t), insert("hot", i), noRetry)
		return err
	})
	if got != 1 {
		t.Errorf("10 KB inserts admitted: got %d of 5, want 1", got)
	}
	clock.refill()
	_, err := db.ExecuteTransaction(ctx(t), &dynamodb.ExecuteTransactionInput{TransactStatements: []types.ParameterizedStatement{
		{Statement: aws.String(`UPDATE "` + table + `" SET n = 1 WHERE pk = 'hot' AND sk = 0`)},
	}}, noRetry)
	if err != nil {
		t.Fatalf("a transaction of 20 units from a full bucket of 12: %v", err)
	}
	_, err = db.ExecuteTransaction(ctx(t), &dynamodb.ExecuteTransactionInput{TransactStatements: []types.ParameterizedStatement{
		{Statement: aws.String(`UPDATE "` + table + `" SET n = 2 WHERE pk = 'hot' AND sk = 0`)},
	}}, noRetry)
	if got, want := reasonCodes(err), []string{"ThrottlingError"}; !slices.Equal(got, want) {
		t.Errorf("second transaction: got %v (%v), want reasons %v", got, err, want)
	}
	out, err := db.BatchExecuteStatement(ctx(t), &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{
		{Statement: insert("hot", 7).Statement, Parameters: insert("hot", 7).Parameters},
		{Statement: insert("cold", 7).Statement, Parameters: insert("cold", 7).Parameters},
	}}, noRetry)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Responses) != 2 || out.Responses[0].Error == nil || out.Responses[0].Error.Code != types.BatchStatementErrorCodeEnumProvisionedThroughputExceeded || out.Responses[1].Error != nil {
		t.Errorf("batch: got %+v, want the hot insert refused and the cold one run", out.Responses)
	}
	out, err = db.BatchExecuteStatement(ctx(t), &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{
		{Statement: insert("hot", 8).Statement, Parameters: insert("hot", 8).Parameters},
	}}, noRetry)
	if err != nil || len(out.Responses) != 1 || out.Responses[0].Error == nil {
		t.Errorf("batch of hot inserts only: got %+v, %v; want its statement refused", out, err)
	}
}

// A TransactWriteItems sent again with the token of one still in progress
// (its client gave up waiting) is refused with TransactionInProgressException,
// as AWS refuses it ("TransactWriteItems", API reference: errors), not run
// beside the first; once the first answered, the token replays its outcome.
func TestSameTokenWhileInProgress(t *testing.T) {
	const window = 2 * time.Second
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{TxWindow: window}})
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "tokens"
	createTable(t, db, table, "")
	in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("order-1"), TransactItems: []types.TransactWriteItem{{Update: &types.Update{
		TableName: aws.String(table), Key: key("a", 1),
		UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
	}}}}
	first := make(chan error, 1)
	go func() {
		_, err := db.TransactWriteItems(ctx(t), in, noRetry)
		first <- err
	}()
	// The first is in progress once a read of its item conflicts.
	deadline := time.Now().Add(window / 2)
	for {
		_, err := db.TransactGetItems(ctx(t), &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
			{Get: &types.Get{TableName: aws.String(table), Key: key("a", 1)}},
		}}, noRetry)
		if slices.Equal(reasonCodes(err), []string{"TransactionConflict"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read of the first transaction's item: got %v, want a TransactionConflict", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := db.TransactWriteItems(ctx(t), in, noRetry)
	var tip *types.TransactionInProgressException
	if !errors.As(err, &tip) {
		t.Fatalf("the same token while the first is in progress: got %v, want TransactionInProgressException", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first: %v", err)
	}
	if _, err := db.TransactWriteItems(ctx(t), in, noRetry); err != nil {
		t.Fatalf("the same token once the first answered: %v", err)
	}
	out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a", 1), ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item["n"].(*types.AttributeValueMemberN).Value != "1" {
		t.Fatalf("n: got %v, %v; want 1 (one transaction applied)", out.Item, err)
	}
}

// An empty TransactWriteItems with a ClientRequestToken is DynamoDB's to
// refuse, and leaves the token free: the same token on a real transaction
// then runs, not TransactionInProgressException.
func TestEmptyTransactionHoldsNoToken(t *testing.T) {
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "empty"
	createTable(t, db, table, "")
	token := aws.String("empty-" + table)
	if _, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{ClientRequestToken: token, TransactItems: []types.TransactWriteItem{}}, noRetry); err == nil {
		t.Fatal("an empty transaction: got nil, want DynamoDB's refusal")
	}
	_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{ClientRequestToken: token,
		TransactItems: []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(table), Item: item("a", 1, nil)}}}}, noRetry)
	if err != nil {
		t.Fatalf("the same token on a transaction with an item: %v", err)
	}
}
