package store

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/users"
)

// The store's batch reads meet what AWS answers a batch with a throttled
// key: the other keys answered and that one in UnprocessedKeys. Each read
// must ask again for the unprocessed key and return every item. The front's
// clock stands still, so the spent partition stays spent until the front
// has refused the key once (RefillOnUnprocessed).
func TestBatchReadsAskAgainForUnprocessedKeys(t *testing.T) {
	clock := stacktest.NewStillClock()
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Limits: ddbfront.Limits{PartitionRCU: 10, Partitions: 1 << 30, Now: clock.Now}}) // a partition for each key value: the spent key alone is short
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := stacktest.Prefix(t)
	if err := tables.Create(ctx, st.DynamoDB(), prefix); err != nil {
		t.Fatal(err)
	}
	// No retry by the SDK: a batch refused whole fails the read, so only
	// the store's own loop over UnprocessedKeys can make it pass.
	db := dynamodb.New(st.DynamoDB().Options(), func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	s := New(db, Config{Tables: TablesWithPrefix(prefix)})
	price, stock := int64(500), int64(7)
	var ids []string
	for _, name := range []string{"Hot", "Cold", "Cool"} {
		clock.Refill()
		p, err := s.CreateProduct(ctx, products.New{Name: name, Category: "batch", PriceCents: &price, Stock: &stock})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ProductID)
	}
	hot := ids[0]
	if _, err := s.CreateUser(ctx, "u1", users.New{Email: "u1@example.com", Name: "U1"}); err != nil {
		t.Fatal(err)
	}

	t.Run("products of a cart", func(t *testing.T) {
		for _, id := range ids {
			clock.Refill()
			if _, err := s.SetCartLine(ctx, "u1", id, 1); err != nil {
				t.Fatal(err)
			}
		}
		clock.Refill()
		stacktest.SpendReads(t, st.DynamoDB(), s.t.Products, productKey(hot))
		stop := stacktest.RefillOnUnprocessed(t, st, clock)
		v, err := s.GetCart(ctx, "u1")
		if !stop() {
			t.Errorf("no key came back unprocessed")
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Lines) != len(ids) {
			t.Errorf("cart lines: got %d, want %d", len(v.Lines), len(ids))
		}
	})

	t.Run("stock of a category's products", func(t *testing.T) {
		clock.Refill()
		stacktest.SpendReads(t, st.DynamoDB(), s.t.ProductStock, bucketKey(hot, 0))
		stop := stacktest.RefillOnUnprocessed(t, st, clock)
		page, err := s.ListProductsByCategory(ctx, "batch", 10, nil)
		if !stop() {
			t.Errorf("no key came back unprocessed")
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != len(ids) {
			t.Fatalf("products: got %d, want %d", len(page.Items), len(ids))
		}
		for _, p := range page.Items {
			if p.Stock != stock {
				t.Errorf("stock of %s: got %d, want %d", p.Name, p.Stock, stock)
			}
		}
	})
}
