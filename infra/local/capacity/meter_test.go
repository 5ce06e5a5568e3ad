package capacity_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/capacity"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/tables"
)

// TestMeterAgreesWithLocalOnSingleItemCalls: for calls outside transactions
// DynamoDB Local follows AWS's rules, so the meter's units from item sizes
// must equal what Local reports, on tables with a global index (products), a
// local and a global one (reviews) and a sparse one (orders), for puts,
// updates that move, keep or drop an index key, deletes, and reads of every
// kind.
func TestMeterAgreesWithLocalOnSingleItemCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := stacktest.Tables(t)
	m := capacity.NewMeter(stacktest.DynamoDB(t), prefix)
	name := func(logical string) *string { return aws.String(tables.Physical(prefix, logical)) }
	desc := strings.Repeat("A sturdy everyday thing. ", 50) // over 1 KB
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		must(m.PutItem(ctx, &dynamodb.PutItemInput{TableName: name(tables.Products), Item: item{
			"productId": s(fmt.Sprintf("p%d", i)), "category": s("home"), "description": s(desc[:300*(i+1)]), "version": n("1")}}))
	}
	must(m.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: name(tables.Products), Key: item{"productId": s("p0")},
		UpdateExpression: aws.String("SET description = :d"), ExpressionAttributeValues: item{":d": s(desc)}}))
	must(m.PutItem(ctx, &dynamodb.PutItemInput{TableName: name(tables.Reviews), Item: item{
		"productId": s("p0"), "userId": s("u1"), "createdAt": s("2026-11-23T09:00:00Z"), "body": s("fine"), "version": n("1")}}))
	must(m.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: name(tables.Reviews), Key: item{"productId": s("p0"), "userId": s("u1")}}))
	order := item{"userId": s("u1"), "orderId": s("o1"), "openShard": s("PLACED#1"), "status": s("PLACED"), "version": n("1")}
	must(m.PutItem(ctx, &dynamodb.PutItemInput{TableName: name(tables.Orders), Item: order}))
	key := item{"userId": s("u1"), "orderId": s("o1")}
	must(m.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: name(tables.Orders), Key: key,
		UpdateExpression: aws.String("SET openShard = :k, #s = :s"), ExpressionAttributeNames: map[string]string{"#s": "status"},
		ExpressionAttributeValues: item{":k": s("SHIPPED#1"), ":s": s("SHIPPED")}, ReturnValues: types.ReturnValueAllNew}))
	must(m.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: name(tables.Orders), Key: key,
		UpdateExpression: aws.String("REMOVE openShard SET #s = :s"), ExpressionAttributeNames: map[string]string{"#s": "status"},
		ExpressionAttributeValues: item{":s": s("DELIVERED")}}))
	must(m.GetItem(ctx, &dynamodb.GetItemInput{TableName: name(tables.Products), Key: item{"productId": s("p0")}}))
	must(m.GetItem(ctx, &dynamodb.GetItemInput{TableName: name(tables.Products), Key: item{"productId": s("p0")}, ConsistentRead: aws.Bool(true)}))
	must(m.GetItem(ctx, &dynamodb.GetItemInput{TableName: name(tables.Products), Key: item{"productId": s("none")}}))
	must(m.Query(ctx, &dynamodb.QueryInput{TableName: name(tables.Products), IndexName: aws.String(tables.ProductsByCategory),
		KeyConditionExpression: aws.String("category = :c"), ExpressionAttributeValues: item{":c": s("home")}}))
	must(m.Query(ctx, &dynamodb.QueryInput{TableName: name(tables.Products), IndexName: aws.String(tables.ProductsByCategory),
		KeyConditionExpression: aws.String("category = :c"), FilterExpression: aws.String("version > :v"),
		ExpressionAttributeValues: item{":c": s("home"), ":v": n("1")}}))
	must(m.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		*name(tables.Products): {Keys: []map[string]types.AttributeValue{{"productId": s("p1")}, {"productId": s("p2")}}, ConsistentRead: aws.Bool(true)},
	}}))
	// A key that finds nothing: the guide charges a read of a missing item,
	// and a BatchGetItem as one GetItem per key; DynamoDB Local charges
	// nothing for it, so this call is left out of the comparison.
	must(m.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		*name(tables.Products): {Keys: []map[string]types.AttributeValue{{"productId": s("p1")}, {"productId": s("p2")}, {"productId": s("none")}}, ConsistentRead: aws.Bool(true)},
	}}))

	calls := m.Calls()
	if len(calls) != 16 {
		t.Fatalf("got %d calls, want 16", len(calls))
	}
	for i, c := range calls[:15] {
		if c.Failed || c.Read != c.ReportedRead || c.Write != c.ReportedWrite {
			t.Errorf("call %d %s: by the rules %g RRU %g WRU, Local reports %g RRU %g WRU (failed %v)", i, c.Op, c.Read, c.Write, c.ReportedRead, c.ReportedWrite, c.Failed)
		}
	}
	// Spot checks of the rules themselves, Local aside: the update of p0 to
	// 1.25 KB writes the table and byCategory 2 units each; the order's
	// status move deletes and puts its open-orders entry.
	for i, want := range map[int]float64{3: 4, 4: 3, 6: 2, 7: 3, 8: 2} {
		if got := calls[i].Write; got != want {
			t.Errorf("call %d %s: got %g WRU, want %g", i, calls[i].Op, got, want)
		}
	}
	if got, want := calls[14].Read, 2.0; got != want { // 0.6 KB and 0.9 KB, one 4 KB each
		t.Errorf("batch of two keys: got %g RRU, want %g", got, want)
	}
	if got, want := calls[15].Read, 3.0; got != want {
		t.Errorf("batch of three keys, one missing: got %g RRU, want %g", got, want)
	}
}

// TestMeterChargesTransactionsPerItem: the meter charges every item of a
// transaction (five small markers: 10 WRU, a check of a product: 2 more)
// where DynamoDB Local charges less.
func TestMeterChargesTransactionsPerItem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := stacktest.Tables(t)
	m := capacity.NewMeter(stacktest.DynamoDB(t), prefix)
	events, products := tables.Physical(prefix, tables.CounterEvents), tables.Physical(prefix, tables.Products)
	if _, err := m.PutItem(ctx, &dynamodb.PutItemInput{TableName: &products, Item: item{"productId": s("p0"), "category": s("home")}}); err != nil {
		t.Fatal(err)
	}
	actions := []types.TransactWriteItem{{ConditionCheck: &types.ConditionCheck{TableName: &products, Key: item{"productId": s("p0")},
		ConditionExpression: aws.String("attribute_exists(productId)")}}}
	for i := range 5 {
		actions = append(actions, types.TransactWriteItem{Put: &types.Put{TableName: &events, Item: item{"eventKey": s(fmt.Sprintf("orders#ev-%d", i)), "expiresAt": n("1800000000")}}})
	}
	if _, err := m.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions}); err != nil {
		t.Fatal(err)
	}
	c := m.Calls()[1]
	if c.Write != 12 || c.IndexWrite != 0 {
		t.Errorf("got %g WRU (%g of indexes), want 12 (0)", c.Write, c.IndexWrite)
	}
	if c.ReportedWrite >= c.Write {
		t.Errorf("DynamoDB Local reports %g WRU for the transaction, the rules %g: Local now charges every item", c.ReportedWrite, c.Write)
	}
	t.Logf("transaction of a check and five puts: %g WRU by the rules, %g as DynamoDB Local reports", c.Write, c.ReportedWrite)
}
