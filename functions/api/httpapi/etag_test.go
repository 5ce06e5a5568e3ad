package httpapi_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/functions/api/store/replicas"
	"github.com/shopstream/shopstream/shared/tables"
)

// TestProductTagNeverNamesTwoBodies: a product's page is its catalog item
// and its stock bucket, read eventually consistent, and its version is the
// sum of theirs. Two API instances whose reads are behind on different
// items (one on the catalog item after a change of its description, the
// other on the bucket after a sale) answer two different pages of one
// version. Under a strong ETag ("3") that claimed they were the same bytes,
// and a cache holding one got 304 for the other (a black-box review saw two
// bodies under one tag in every sale it ran). The tag is weak (W/"3"): it
// names the version, which If-Match takes, not the bytes.
func TestProductTagNeverNamesTwoBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("ada")
	p := e.mustProduct("Kettle", "kitchen", 2500, 10)
	catalog := tables.Physical(e.prefix, tables.Products)
	stock := tables.Physical(e.prefix, tables.ProductStock)
	read := func(table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
		t.Helper()
		out, err := e.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Fatalf("read %s: %v, %v", table, out, err)
		}
		return out.Item
	}
	id := &types.AttributeValueMemberS{Value: p}
	oldCatalog := read(catalog, map[string]types.AttributeValue{"productId": id})
	bucket0 := p + "#0"
	oldBucket := read(stock, map[string]types.AttributeValue{"bucketId": &types.AttributeValueMemberS{Value: bucket0}})

	want(t, e.do("POST", "/users/ada/orders", userCaller("ada"), map[string]any{"items": []map[string]any{{"productId": p, "quantity": 1}}}), 201)
	want(t, e.do("PATCH", "/products/"+p, adminCaller("root"), map[string]any{"description": "now in steel"}), 200)

	time.Sleep(staleReads) // the local stack's own replicas catch up
	// One instance behind on the catalog item, one behind on the bucket.
	instance := func(table, key string, item map[string]types.AttributeValue) *env {
		return e.instance(store.New(&replicas.Behind{DB: e.db, Items: map[string]map[string]map[string]types.AttributeValue{table: {key: item}}},
			store.Config{Tables: store.TablesWithPrefix(e.prefix)}))
	}
	a := instance(catalog, p, oldCatalog).do("GET", "/products/"+p, anonymous, nil)
	b := instance(stock, bucket0, oldBucket).do("GET", "/products/"+p, anonymous, nil)
	want(t, a, 200)
	want(t, b, 200)
	if a.num("version") != b.num("version") || a.Body == b.Body {
		t.Fatalf("the two pages: %s and %s; want one version and two bodies", a.Body, b.Body)
	}
	ta, tb := a.Headers["etag"], b.Headers["etag"]
	if ta == tb && !strings.HasPrefix(ta, "W/") {
		t.Errorf("two bodies under one strong tag %s:\n%s\n%s", ta, a.Body, b.Body)
	}
	// The tag still names the version: a revalidation with the current
	// one is a 304 (a weak comparison, as RFC 9110 asks of If-None-Match),
	// and If-Match takes it.
	now := e.do("GET", "/products/"+p, anonymous, nil)
	want(t, now, 200)
	tag := now.Headers["etag"]
	if tag != `W/"`+strconv.Itoa(int(now.num("version")))+`"` {
		t.Errorf("tag %s of version %v: want W/\"%v\"", tag, now.num("version"), now.num("version"))
	}
	if r := e.do("GET", "/products/"+p, anonymous, nil, "If-None-Match", tag); r.StatusCode != 304 || r.Headers["etag"] != tag {
		t.Errorf("If-None-Match %s: got %d, tag %s; want 304 and the same tag", tag, r.StatusCode, r.Headers["etag"])
	}
	want(t, e.do("PATCH", "/products/"+p, adminCaller("root"), map[string]any{"stock": 20}, "If-Match", tag), 200)
	// A user's page is one item: its tag names its bytes, and stays strong.
	if u := e.do("GET", "/users/ada", userCaller("ada"), nil); strings.HasPrefix(u.Headers["etag"], "W/") || u.Headers["etag"] == "" {
		t.Errorf("a user's tag %q: want a strong one", u.Headers["etag"])
	}
}
