package ddbfront_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// spacing separates the writes of a test by more than a second, so that
// second-precision times tell them apart.
const spacing = 1200 * time.Millisecond

// timedWrite is a write and the interval the client saw it take.
type timedWrite struct {
	name       string
	do         func() error
	want       []event // the records it yields, in order
	start, end time.Time
}

func (w *timedWrite) run(t *testing.T) {
	t.Helper()
	w.start = time.Now()
	if err := w.do(); err != nil {
		t.Fatalf("%s: %v", w.name, err)
	}
	w.end = time.Now()
}

// checkCreationTimes matches the records, in stream order, to the writes
// that yielded them and checks that each record's ApproximateCreationDateTime
// is a whole second within its write: from the second the write started in
// to the moment its answer arrived.
func checkCreationTimes(t *testing.T, recs []streamtypes.Record, writes []*timedWrite) {
	t.Helper()
	var want []event
	for _, w := range writes {
		want = append(want, w.want...)
	}
	if diff := cmp.Diff(want, summarize(recs)); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	i := 0
	for _, w := range writes {
		lo, hi := w.start.Truncate(time.Second), w.end
		for range w.want {
			got := aws.ToTime(recs[i].Dynamodb.ApproximateCreationDateTime)
			if got.IsZero() || got.Before(lo) || got.After(hi) || !got.Equal(got.Truncate(time.Second)) {
				t.Errorf("%s, record %d: ApproximateCreationDateTime got %s, want a whole second in [%s, %s]",
					w.name, i, got.UTC().Format(time.RFC3339Nano), lo.UTC().Format(time.RFC3339Nano), hi.UTC().Format(time.RFC3339Nano))
			}
			i++
		}
	}
}

func TestStreamRecordsCarryTheSecondOfTheirWrite(t *testing.T) {
	st := stacktest.Stack(t)
	db := st.DynamoDB()
	table := stacktest.Prefix(t) + "stamps"
	createTable(t, db, table, "")
	quoted := `"` + table + `"`
	writes := []*timedWrite{
		{name: "PutItem", want: []event{{"INSERT", "a/1", false}}, do: func() error {
			_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", 1, map[string]types.AttributeValue{"v": num(1)})})
			return err
		}},
		{name: "UpdateItem", want: []event{{"MODIFY", "a/1", false}}, do: func() error {
			_, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("a", 1),
				UpdateExpression: aws.String("SET v = v + :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}})
			return err
		}},
		{name: "TransactWriteItems", want: []event{{"INSERT", "b/1", false}, {"MODIFY", "a/1", false}}, do: func() error {
			_, err := db.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(table), Item: item("b", 1, nil)}},
				{Update: &types.Update{TableName: aws.String(table), Key: key("a", 1), UpdateExpression: aws.String("SET v = :v"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(10)}}},
			}})
			return err
		}},
		{name: "BatchWriteItem", want: []event{{"INSERT", "c/1", false}}, do: func() error {
			_, err := db.BatchWriteItem(ctx(t), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: {
				{PutRequest: &types.PutRequest{Item: item("c", 1, nil)}},
			}}})
			return err
		}},
		{name: "ExecuteStatement", want: []event{{"MODIFY", "a/1", false}}, do: func() error {
			_, err := db.ExecuteStatement(ctx(t), &dynamodb.ExecuteStatementInput{Statement: aws.String(`UPDATE ` + quoted + ` SET v = 20 WHERE pk = 'a' AND sk = 1`)})
			return err
		}},
		{name: "ExecuteTransaction", want: []event{{"INSERT", "d/1", false}}, do: func() error {
			_, err := db.ExecuteTransaction(ctx(t), &dynamodb.ExecuteTransactionInput{TransactStatements: []types.ParameterizedStatement{
				{Statement: aws.String(`INSERT INTO ` + quoted + ` VALUE {'pk': 'd', 'sk': 1}`)},
			}})
			return err
		}},
		{name: "BatchExecuteStatement", want: []event{{"REMOVE", "d/1", false}}, do: func() error {
			out, err := db.BatchExecuteStatement(ctx(t), &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{
				{Statement: aws.String(`DELETE FROM ` + quoted + ` WHERE pk = 'd' AND sk = 1`)},
			}})
			if err == nil && out.Responses[0].Error != nil {
				t.Fatalf("batch statement: %s", aws.ToString(out.Responses[0].Error.Message))
			}
			return err
		}},
		{name: "DeleteItem", want: []event{{"REMOVE", "a/1", false}}, do: func() error {
			_, err := db.DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("a", 1)})
			return err
		}},
	}
	for i, w := range writes {
		if i > 0 {
			time.Sleep(spacing)
		}
		w.run(t)
	}
	recs := records(t, st, table)
	checkCreationTimes(t, recs, writes)
	seen := map[int64]bool{}
	for _, r := range recs {
		seen[aws.ToTime(r.Dynamodb.ApproximateCreationDateTime).Unix()] = true
	}
	// The transaction's two records share a second; every write has its own.
	if got, want := len(seen), len(writes); got != want {
		t.Errorf("distinct creation seconds: got %d, want %d", got, want)
	}
}

func TestSweptRecordCarriesTheSecondOfTheSweep(t *testing.T) {
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	db := st.DynamoDB()
	table := stacktest.OwnPrefix(t) + "sweptstamp"
	createTable(t, db, table, "expiresAt")
	put := &timedWrite{name: "PutItem", want: []event{{"INSERT", "old/1", false}}, do: func() error {
		_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table),
			Item: item("old", 1, map[string]types.AttributeValue{"expiresAt": num(time.Now().Add(-time.Hour).Unix())})})
		return err
	}}
	put.run(t)
	time.Sleep(spacing)
	sweep := &timedWrite{name: "Sweep", want: []event{{"REMOVE", "old/1", true}}, do: func() error {
		n, err := st.Front.Sweep(ctx(t))
		if err == nil && n != 1 {
			t.Fatalf("swept: got %d, want 1", n)
		}
		return err
	}}
	sweep.run(t)
	checkCreationTimes(t, records(t, st, table), []*timedWrite{put, sweep})
}

// TestCreationSecondsSurviveARestart stops a front that keeps its data on
// disk and starts another on the same directory: the records the first one
// saw keep their seconds; a record written past the front, which neither saw
// being written, keeps DynamoDB Local's minute; writes through the new front
// get their seconds.
func TestCreationSecondsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	start := func() *endpoints.Stack { return startOn(t, dir) }
	st := start()
	db := st.DynamoDB()
	table := "stamps-restart"
	createTable(t, db, table, "")
	seen := &timedWrite{name: "PutItem before the restart", want: []event{{"INSERT", "x/1", false}}, do: func() error {
		_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("x", 1, nil)})
		return err
	}}
	seen.run(t)
	first := records(t, st, table)
	checkCreationTimes(t, first, []*timedWrite{seen})
	time.Sleep(spacing)
	direct := dynamodb.NewFromConfig(endpoints.AWSConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(st.Upstream()) })
	bypass := &timedWrite{name: "PutItem past the front", want: []event{{"INSERT", "y/1", false}}, do: func() error {
		_, err := direct.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("y", 1, nil)})
		return err
	}}
	bypass.run(t)
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	st = start()
	defer st.Close()
	db = st.DynamoDB()
	recs := records(t, st, table)
	if diff := cmp.Diff([]event{{"INSERT", "x/1", false}, {"INSERT", "y/1", false}}, summarize(recs)); diff != "" {
		t.Fatalf("records after the restart (-want +got):\n%s", diff)
	}
	if got, want := aws.ToTime(recs[0].Dynamodb.ApproximateCreationDateTime), aws.ToTime(first[0].Dynamodb.ApproximateCreationDateTime); !got.Equal(want) {
		t.Errorf("record seen before the restart: got %s, want %s", got.UTC(), want.UTC())
	}
	got := aws.ToTime(recs[1].Dynamodb.ApproximateCreationDateTime)
	if lo := bypass.start.Truncate(time.Minute); !got.Equal(got.Truncate(time.Minute)) || got.Before(lo) || got.After(bypass.end) {
		t.Errorf("record written past the front: got %s, want DynamoDB Local's minute in [%s, %s]",
			got.UTC().Format(time.RFC3339Nano), lo.UTC().Format(time.RFC3339Nano), bypass.end.UTC().Format(time.RFC3339Nano))
	}

	time.Sleep(spacing)
	later := &timedWrite{name: "PutItem after the restart", want: []event{{"INSERT", "z/1", false}}, do: func() error {
		_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("z", 1, nil)})
		return err
	}}
	later.run(t)
	recs = records(t, st, table)
	if len(recs) != 3 {
		t.Fatalf("records after the last write: got %d, want 3", len(recs))
	}
	checkCreationTimes(t, []streamtypes.Record{recs[0], recs[2]}, []*timedWrite{seen, later})
}
