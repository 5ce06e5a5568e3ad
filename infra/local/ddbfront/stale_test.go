package ddbfront_test

import (
	"fmt"
	"slices"
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

// TestEventuallyConsistentQueriesLag: an eventually consistent Query or Scan
// of a table, and any read of a global index, sees the items written in the
// last StaleReads as they were before: a new item is not in it yet, a changed
// one shows its previous values, and an item whose index key changed is not
// yet in its new place in the index. Strongly consistent queries and scans
// see the items as they are.
func TestEventuallyConsistentQueriesLag(t *testing.T) {
	const window = time.Second
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{StaleReads: window}})
	db := st.DynamoDB()
	table := "stale-queries"
	if _, err := db.CreateTable(ctx(t), &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("l"), AttributeType: types.ScalarAttributeTypeS},
		},
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{{
			IndexName: aws.String("byL"), KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("l"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String("byG"), KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"v"}},
		}},
	}); err != nil {
		t.Fatal(err)
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	// seen lists the items' "pk=v" as the read answered them, and checks
	// that Count says as many.
	seen := func(items []map[string]types.AttributeValue, count int32) []string {
		t.Helper()
		out := []string{}
		for _, it := range items {
			pk, _ := it["pk"].(*types.AttributeValueMemberS)
			v, _ := it["v"].(*types.AttributeValueMemberS)
			w := "-"
			if _, ok := it["w"]; ok {
				w = "w"
			}
			if pk == nil || v == nil {
				out = append(out, fmt.Sprintf("%v", it))
				continue
			}
			out = append(out, pk.Value+"="+v.Value+w)
		}
		if int(count) != len(items) {
			t.Errorf("Count %d for %d items", count, len(items))
		}
		return out
	}
	query := func(consistent bool, projection string) []string {
		t.Helper()
		in := &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s("a")}, ConsistentRead: aws.Bool(consistent)}
		if projection != "" {
			in.ProjectionExpression = aws.String(projection)
		}
		out, err := db.Query(ctx(t), in)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		if out.ScannedCount != out.Count {
			t.Errorf("unfiltered query: ScannedCount %d, Count %d", out.ScannedCount, out.Count)
		}
		return seen(out.Items, out.Count)
	}
	local := func(pk, projection string) []string {
		t.Helper()
		in := &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String("byL"), KeyConditionExpression: aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk)}}
		if projection != "" {
			in.ProjectionExpression = aws.String(projection)
		}
		out, err := db.Query(ctx(t), in)
		if err != nil {
			t.Fatalf("local index query: %v", err)
		}
		return seen(out.Items, out.Count)
	}
	filtered := func(v string) []string {
		t.Helper()
		out, err := db.Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(table), FilterExpression: aws.String("v = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": s(v)}})
		if err != nil {
			t.Fatalf("filtered scan: %v", err)
		}
		return seen(out.Items, out.Count)
	}
	index := func(g string) []string {
		t.Helper()
		out, err := db.Query(ctx(t), &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String("byG"),
			KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: map[string]types.AttributeValue{":g": s(g)}})
		if err != nil {
			t.Fatalf("index query: %v", err)
		}
		return seen(out.Items, out.Count)
	}
	scan := func(consistent bool) []string {
		t.Helper()
		out, err := db.Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(consistent)})
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		got := seen(out.Items, out.Count)
		slices.Sort(got)
		return got
	}
	settle := func() { time.Sleep(window + 50*time.Millisecond) }
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}

	put(t, db, table, item("a", 1, map[string]types.AttributeValue{"v": s("one"), "w": s("x"), "g": s("G")}))
	put(t, db, table, item("b", 1, map[string]types.AttributeValue{"v": s("b"), "g": s("G")}))
	check("eventually consistent query of a new item", query(false, ""))
	check("strongly consistent query of a new item", query(true, ""), "a=onew")
	check("index query of new items", index("G"))
	check("eventually consistent scan of new items", scan(false))
	check("strongly consistent scan of new items", scan(true), "a=onew", "b=b-")
	settle()
	check("eventually consistent query past the window", query(false, ""), "a=onew")
	check("index query past the window", index("G"), "a=one-", "b=b-")

	put(t, db, table, item("a", 1, map[string]types.AttributeValue{"v": s("two"), "g": s("G"), "l": s("L")}))
	check("eventually consistent query after an overwrite", query(false, ""), "a=onew")
	check("local index query of an item not yet in it", local("a", ""))
	check("projected query after an overwrite", query(false, "pk, sk, v"), "a=one-")
	check("index query after an overwrite", index("G"), "a=one-", "b=b-")
	check("eventually consistent scan after an overwrite", scan(false), "a=onew", "b=b-")
	check("strongly consistent scan after an overwrite", scan(true), "a=two-", "b=b-")
	// What the item was may not pass the filter: it is shown as it is.
	check("filtered scan after an overwrite", filtered("two"), "a=two-")
	settle()

	put(t, db, table, item("a", 1, map[string]types.AttributeValue{"v": s("three"), "g": s("G"), "l": s("L")}))
	// Asked for what it does not project, a local index reads the table.
	check("local index query of an attribute it fetches from the table", local("a", "pk, sk, l, v"), "a=two-")
	// A number key written "1.0" is the item DynamoDB prints with "1".
	if _, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": s("c"), "sk": &types.AttributeValueMemberN{Value: "1.0"}, "v": s("c")}}); err != nil {
		t.Fatal(err)
	}
	out, err := db.Query(ctx(t), &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s("c")}})
	if err != nil || len(out.Items) != 0 {
		t.Errorf("eventually consistent query of an item written with key 1.0: got %v, %v; want no item yet", out, err)
	}
	settle()

	if _, err := db.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("b", 1),
		UpdateExpression: aws.String("SET g = :g"), ExpressionAttributeValues: map[string]types.AttributeValue{":g": s("H")}}); err != nil {
		t.Fatal(err)
	}
	check("index query of the index key an item just moved to", index("H"))
	settle()
	check("index query past the window", index("H"), "b=b-")
}
