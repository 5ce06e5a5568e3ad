package store_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/users"
)

// TestExpiredButNotYetRemoved: DynamoDB removes an expired item within days,
// not at its expiry, and reads find it until then ("Working with expired
// items", DynamoDB developer guide). The store's clock runs an hour past the
// stack's, so that every item it writes with a TTL is expired to the store
// and still there; a cart past its TTL reads empty and a new line starts a
// new cart without its old lines; an idempotency key past its TTL is free
// again and no longer recalled.
func TestExpiredButNotYetRemoved(t *testing.T) {
	prefix := stacktest.Tables(t)
	db := stacktest.DynamoDB(t)
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	st := store.New(db, store.Config{Tables: store.TablesWithPrefix(prefix), CartTTL: time.Hour, IdempotencyTTL: time.Hour, Now: now})
	ctx := context.Background()
	stock, price := int64(10), int64(500)
	p, err := st.CreateProduct(ctx, products.New{Name: "Mug", Category: "kitchen", PriceCents: &price, Stock: &stock})
	if err != nil {
		t.Fatal(err)
	}
	q, err := st.CreateProduct(ctx, products.New{Name: "Cup", Category: "kitchen", PriceCents: &price, Stock: &stock})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := st.CreateUser(ctx, "u1", users.New{Email: "u1@example.com", Name: "U1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetCartLine(ctx, "u1", p.ProductID, 2); err != nil {
		t.Fatal(err)
	}
	kept := &types.AttributeValueMemberS{Value: "first answer"}
	if err := st.Remember(ctx, "key-1", "hash-1", kept); err != nil {
		t.Fatal(err)
	}

	skew.Store(int64(2 * time.Hour)) // both past their TTL, neither removed
	c, err := st.GetCart(ctx, "u1")
	if err != nil || len(c.Lines) != 0 {
		t.Fatalf("expired cart: %+v, %v; want no line", c, err)
	}
	c, err = st.SetCartLine(ctx, "u1", q.ProductID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Lines) != 1 || c.Lines[0].ProductID != q.ProductID {
		t.Fatalf("a line added to an expired cart: %+v; want that line alone", c.Lines)
	}
	if _, ok, err := st.Recall(ctx, "key-1"); ok || err != nil {
		t.Fatalf("expired idempotency key recalled: %v, %v", ok, err)
	}
	if err := st.Remember(ctx, "key-1", "hash-2", &types.AttributeValueMemberS{Value: "second answer"}); err != nil {
		t.Fatalf("claim of an expired key: %v, want it free", err)
	}
	r, ok, err := st.Recall(ctx, "key-1")
	if err != nil || !ok || r.RequestHash != "hash-2" {
		t.Fatalf("recall after the new claim: %+v, %v, %v; want hash-2", r, ok, err)
	}
	if err := st.Remember(ctx, "key-1", "hash-3", kept); !errors.Is(err, store.ErrKeyUsed) {
		t.Fatalf("claim of a key in use: %v, want ErrKeyUsed", err)
	}
}
