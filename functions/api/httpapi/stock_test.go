package httpapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/tables"
)

// buckets reads the units of a product's bucket items straight from the
// product-stock table, by bucket index.
func (e *env) buckets(productID string) map[string]int {
	e.t.Helper()
	out := map[string]int{}
	var start map[string]types.AttributeValue
	for {
		res, err := e.db.Scan(context.Background(), &dynamodb.ScanInput{
			TableName: aws.String(tables.Physical(e.prefix, tables.ProductStock)), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start,
		})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, it := range res.Items {
			if it["productId"].(*types.AttributeValueMemberS).Value != productID {
				continue
			}
			n, _ := strconv.Atoi(it["units"].(*types.AttributeValueMemberN).Value)
			out[it["bucket"].(*types.AttributeValueMemberN).Value] = n
		}
		if start = res.LastEvaluatedKey; start == nil {
			return out
		}
	}
}

// TestStockBuckets: a product's stock spread over buckets sells as one
// stock: a quantity larger than any bucket but available in total is
// placed, 409 only when the total is short; the version (ETag) moves with
// every sale; a respread keeps the total; a stale If-Match is refused.
func TestStockBuckets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("ada")
	admin := adminCaller("root")
	r := e.do("POST", "/products", admin, map[string]any{"name": "Drop", "description": "d", "category": "drops", "priceCents": 100, "stock": 10, "stockBuckets": 4})
	want(t, r, 201)
	p := r.str("productId")
	if got := e.buckets(p); fmt.Sprint(got) != fmt.Sprint(map[string]int{"0": 3, "1": 3, "2": 2, "3": 2}) {
		t.Fatalf("buckets: got %v, want 3, 3, 2, 2", got)
	}
	first := e.eventually("/products/"+p, 200) // the page reads eventually consistent
	if first.num("stock") != 10 || first.num("stockBuckets") != 4 || first.Headers["etag"] != `W/"1"` {
		t.Fatalf("got %s, etag %s; want stock 10 over 4 buckets at version 1", first.Body, first.Headers["etag"])
	}
	if cc := first.Headers["cache-control"]; cc != "public, max-age=5" {
		t.Errorf("cache-control: got %q", cc)
	}

	order := e.mustOrder("ada", p, 5) // more than any bucket holds
	if got := e.stock(p); got != 5 {
		t.Errorf("stock after an order of 5: got %d, want 5", got)
	}
	r = e.do("POST", "/users/ada/orders", userCaller("ada"), map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 6}}})
	want(t, r, 409, "conflict")

	// The sale moved the version: the old ETag is no longer current.
	now := e.do("GET", "/products/"+p, anonymous, nil)
	if now.Headers["etag"] == first.Headers["etag"] {
		t.Fatalf("etag %s after a sale: want it moved", now.Headers["etag"])
	}
	if r := e.do("GET", "/products/"+p, anonymous, nil, "If-None-Match", first.Headers["etag"]); r.StatusCode != 200 {
		t.Errorf("stale If-None-Match: got %d, want 200", r.StatusCode)
	}
	// A list, and the tag's strong form (the previous release's): a weak
	// comparison matches either.
	r = e.do("GET", "/products/"+p, anonymous, nil, "If-None-Match", `"x", `+strings.TrimPrefix(now.Headers["etag"], "W/"))
	if r.StatusCode != 304 || r.Body != "" || r.Headers["etag"] != now.Headers["etag"] {
		t.Errorf("current If-None-Match: got %d %q etag %s, want 304, no body, the etag", r.StatusCode, r.Body, r.Headers["etag"])
	}
	want(t, e.do("PATCH", "/products/"+p, admin, map[string]any{"stock": 9}, "If-Match", first.Headers["etag"]), 412, "precondition-failed")

	r = e.do("PATCH", "/products/"+p, admin, map[string]any{"stockBuckets": 2})
	want(t, r, 200)
	if r.num("stock") != 5 || r.num("stockBuckets") != 2 || r.num("version") != now.num("version")+1 {
		t.Errorf("respread: got %s; want stock 5 over 2 buckets, version %v", r.Body, now.num("version")+1)
	}
	if got := e.buckets(p); fmt.Sprint(got) != fmt.Sprint(map[string]int{"0": 3, "1": 2}) {
		t.Errorf("buckets after the respread: got %v, want 3, 2", got)
	}
	r = e.do("PATCH", "/products/"+p, admin, map[string]any{"stock": 7}, "If-Match", r.Headers["etag"])
	want(t, r, 200)
	if r.num("stock") != 7 {
		t.Errorf("absolute stock: got %s, want 7", r.Body)
	}
	want(t, e.do("POST", "/users/ada/orders/"+order+"/cancel", userCaller("ada"), nil), 200)
	if got := e.stock(p); got != 12 {
		t.Errorf("stock after the cancellation: got %d, want 12", got)
	}
	e.mustOrder("ada", p, 12)
	want(t, e.do("POST", "/users/ada/orders", userCaller("ada"), map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 1}}}), 409, "conflict")
	want(t, e.do("DELETE", "/products/"+p, admin, nil), 204)
	if got := e.buckets(p); len(got) != 0 {
		t.Errorf("buckets of a deleted product: got %v, want none", got)
	}
}

// TestRespreadDuringSales respreads a product's stock and restocks it while
// buyers buy: no unit is lost or counted twice.
func TestRespreadDuringSales(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := adminCaller("root")
	const start = 300
	r := e.do("POST", "/products", admin, map[string]any{"name": "Busy", "description": "d", "category": "drops", "priceCents": 100, "stock": start, "stockBuckets": 4})
	want(t, r, 201)
	p := r.str("productId")
	const buyers = 6
	for i := range buyers {
		e.mustUser(fmt.Sprintf("b%d", i))
	}
	var mu sync.Mutex
	sold, added := 0, 0
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			u := fmt.Sprintf("b%d", i)
			for j := range 8 {
				q := 1 + (i+j)%3
				r := e.do("POST", "/users/"+u+"/orders", userCaller(u), map[string]any{"items": []any{map[string]any{"productId": p, "quantity": q}}})
				if r.StatusCode != 201 {
					t.Errorf("order: got %d %s", r.StatusCode, r.Body)
					continue
				}
				mu.Lock()
				sold += q
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for i := range 6 {
			var body map[string]any
			if i%2 == 0 {
				body = map[string]any{"stockBuckets": 1 + rand.IntN(8)}
			} else {
				body = map[string]any{"stockDelta": 10}
			}
			r := e.do("PATCH", "/products/"+p, admin, body)
			if r.StatusCode != 200 {
				t.Errorf("patch %v: got %d %s", body, r.StatusCode, r.Body)
				continue
			}
			if i%2 == 1 {
				mu.Lock()
				added += 10
				mu.Unlock()
			}
		}
	})
	wg.Wait()
	if got, want := e.stock(p), start+added-sold; got != want {
		t.Errorf("stock: got %d, want %d (%d + %d added - %d sold)", got, want, start, added, sold)
	}
	total := 0
	for _, u := range e.buckets(p) {
		total += u
	}
	if total != start+added-sold {
		t.Errorf("bucket items hold %d units, want %d", total, start+added-sold)
	}
}

// TestSalesWriteNoCatalogRecord: orders and their cancellations write the
// stock buckets, never the catalog item, so the products stream (read by
// the indexer) gets no record per order: only the product's creation.
func TestSalesWriteNoCatalogRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("cy")
	p := e.mustProduct("Quiet", "drops", 100, 50)
	for range 3 {
		e.mustOrder("cy", p, 2)
	}
	o := e.mustOrder("cy", p, 1)
	want(t, e.do("POST", "/users/cy/orders/"+o+"/cancel", userCaller("cy"), nil), 200)

	st := stacktest.Stack(t)
	ctx := context.Background()
	desc, err := st.DynamoDB().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tables.Physical(e.prefix, tables.Products))})
	if err != nil {
		t.Fatal(err)
	}
	sd, err := st.Streams().DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sh := range sd.StreamDescription.Shards {
		it, err := st.Streams().GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: desc.Table.LatestStreamArn, ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatal(err)
		}
		for next := it.ShardIterator; next != nil; {
			page, err := st.Streams().GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Records {
				names = append(names, string(r.EventName))
			}
			if len(page.Records) == 0 {
				break
			}
			next = page.NextShardIterator
		}
	}
	if fmt.Sprint(names) != "[INSERT]" {
		t.Errorf("products stream after 4 orders and a cancellation: got %v, want the creation's INSERT only", names)
	}
}

// TestOrderTooLargeIsAConflictOnTheWire: four products of 32 buckets and
// 1,000 units each, ordered 1,000 each, need 128 stock decrements besides
// the order, past the 100 actions of one transaction. The client gets a 409
// problem naming the four products, never a 500, with an Idempotency-Key
// too (its replay is the same 409), and no unit moves.
func TestOrderTooLargeIsAConflictOnTheWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("ada")
	var items []any
	var ids []string
	for i := range 4 {
		r := e.do("POST", "/products", adminCaller("root"), map[string]any{"name": fmt.Sprintf("Bulk %d", i), "description": "d", "category": "bulk", "priceCents": 100, "stock": 1000, "stockBuckets": 32})
		want(t, r, 201)
		ids = append(ids, r.str("productId"))
		items = append(items, map[string]any{"productId": r.str("productId"), "quantity": 1000})
	}
	for _, key := range []string{"", "bulk-1", "bulk-1"} {
		var headers []string
		if key != "" {
			headers = []string{"Idempotency-Key", key}
		}
		r := e.do("POST", "/users/ada/orders", userCaller("ada"), map[string]any{"items": items}, headers...)
		want(t, r, 409, "conflict")
		named, _ := r.json["products"].([]any)
		if len(named) != 4 {
			t.Fatalf("key %q: products %v, want the four: %s", key, named, r.Body)
		}
		if !strings.Contains(r.str("detail"), "at most 100") {
			t.Errorf("key %q: detail %q does not say the transaction's limit", key, r.str("detail"))
		}
	}
	for _, id := range ids {
		total := 0
		for _, u := range e.buckets(id) {
			total += u
		}
		if total != 1000 {
			t.Errorf("product %s: %d units in its buckets after the refusals, want 1000", id, total)
		}
	}
}
