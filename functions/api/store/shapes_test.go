package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/users"
)

// shapes is a store on fresh tables, with a writer of items as earlier
// releases left them.
type shapes struct {
	t      *testing.T
	db     *dynamodb.Client
	prefix string
	st     *store.Store
}

func newShapes(t *testing.T) *shapes {
	t.Helper()
	prefix := stacktest.Tables(t)
	db := stacktest.DynamoDB(t)
	s := &shapes{t: t, db: db, prefix: prefix, st: store.New(db, store.Config{Tables: store.TablesWithPrefix(prefix)})}
	if _, err := s.st.CreateUser(context.Background(), "u1", users.New{Email: "u1@example.com", Name: "U1"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// put writes an item as it stands, into a logical table.
func (s *shapes) put(table string, item map[string]any) {
	s.t.Helper()
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(tables.Physical(s.prefix, table)), Item: av}); err != nil {
		s.t.Fatal(err)
	}
	settle() // as a release before wrote it, long before
}

// catalogStocked writes a product as release 0.1.0 wrote it: its stock on the
// catalog item, no stockBuckets, no shape, no bucket.
func (s *shapes) catalogStocked(id string, units int64) {
	s.put(tables.Products, map[string]any{
		"productId": id, "name": "Mug " + id, "description": "", "category": "kitchen",
		"priceCents": 1200, "stock": units, "createdAt": "2026-11-23T10:00:00.000Z", "updatedAt": "2026-11-23T10:00:00.000Z", "version": 1,
	})
}

func (s *shapes) stock(id string) int64 {
	s.t.Helper()
	settle() // the page reads eventually consistent
	p, err := s.st.GetProduct(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return p.Stock
}

func (s *shapes) order(id string, q int) (orders.Order, error) {
	return s.st.PlaceOrder(context.Background(), "u1", orders.Request{Items: []orders.Item{{ProductID: id, Quantity: q}}}, nil)
}

// raw reads an item of a logical table as stored.
func (s *shapes) raw(table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	s.t.Helper()
	out, err := s.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(tables.Physical(s.prefix, table)), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		s.t.Fatal(err)
	}
	return out.Item
}

func productKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: id}}
}

func isConflict(err error) bool {
	var e *errcode.Error
	return errors.As(err, &e) && e.Code == errcode.Conflict
}

// TestCatalogStockedProductSellsAndSurvivesAPatch: a product of release
// 0.1.0 (stock on its catalog item) shows its stock, sells it to the unit,
// takes a cancellation's units back, and keeps every unit across a PATCH of
// a field that is not its stock, which moves the stock into its buckets.
func TestCatalogStockedProductSellsAndSurvivesAPatch(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	s.catalogStocked("p1", 10)
	if got := s.stock("p1"); got != 10 {
		t.Fatalf("stock: got %d, want 10", got)
	}
	o, err := s.order("p1", 3)
	if err != nil {
		t.Fatalf("order 3 of 10: %v", err)
	}
	if got := s.stock("p1"); got != 7 {
		t.Fatalf("stock after selling 3: got %d, want 7", got)
	}
	if _, err := s.order("p1", 8); !isConflict(err) {
		t.Fatalf("order 8 of 7: got %v, want a conflict", err)
	}
	if _, err := s.st.CancelOrder(ctx, "u1", o.OrderID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	settle()
	if got := s.stock("p1"); got != 10 {
		t.Fatalf("stock after the cancellation: got %d, want 10", got)
	}
	before, _ := s.st.GetProduct(ctx, "p1")
	desc := "stoneware"
	after, err := s.st.PatchProduct(ctx, "p1", products.Patch{Description: &desc}, nil)
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	settle()
	if after.Stock != 10 || after.Version != before.Version+1 {
		t.Fatalf("after the patch: stock %d version %d, want 10 and %d", after.Stock, after.Version, before.Version+1)
	}
	if got := s.stock("p1"); got != 10 {
		t.Fatalf("stock read after the patch: got %d, want 10", got)
	}
	item := s.raw(tables.Products, productKey("p1"))
	if _, ok := item["stock"]; ok {
		t.Errorf("the catalog item still holds stock after the patch: %v", item["stock"])
	}
	if n, ok := item["shape"].(*types.AttributeValueMemberN); !ok || n.Value != "2" {
		t.Errorf("the catalog item's shape: got %v, want 2", item["shape"])
	}
	if _, err := s.order("p1", 10); err != nil {
		t.Fatalf("order all 10 after the patch: %v", err)
	}
	if _, err := s.order("p1", 1); !isConflict(err) {
		t.Fatalf("order 1 of 0: got %v, want a conflict", err)
	}
}

// TestStockOnCatalogAndBuckets: a product whose catalog item still holds
// stock while its buckets hold some too (release 0.2.0 created buckets for a
// product of 0.1.0 on a change and restocked them) counts both and sells
// from both, to the unit.
func TestStockOnCatalogAndBuckets(t *testing.T) {
	s := newShapes(t)
	s.catalogStocked("p2", 4)
	s.put(tables.ProductStock, map[string]any{"bucketId": "p2#0", "productId": "p2", "bucket": 0, "units": 3, "priceCents": 1200, "name": "Mug p2", "version": 1})
	if got := s.stock("p2"); got != 7 {
		t.Fatalf("stock: got %d, want 7", got)
	}
	if _, err := s.order("p2", 6); err != nil {
		t.Fatalf("order 6 of 4+3: %v", err)
	}
	if got := s.stock("p2"); got != 1 {
		t.Fatalf("stock: got %d, want 1", got)
	}
	if _, err := s.order("p2", 2); !isConflict(err) {
		t.Fatalf("order 2 of 1: got %v, want a conflict", err)
	}
	if _, err := s.order("p2", 1); err != nil {
		t.Fatalf("order the last unit: %v", err)
	}
}

// TestCatalogStockedUnderLoadNeverOversells: buyers race for a product of
// 0.1.0 while an admin changes its price (which moves its stock into 4
// buckets): every unit is sold once, and only units that exist.
func TestCatalogStockedUnderLoadNeverOversells(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	const units, buyers, each = 50, 20, 3
	s.catalogStocked("p3", units)
	var wg sync.WaitGroup
	var mu sync.Mutex
	sold, refused := 0, 0
	for range buyers {
		wg.Go(func() {
			_, err := s.order("p3", each)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				sold += each
			case isConflict(err):
				refused++
			default:
				t.Errorf("order: %v", err)
			}
		})
	}
	wg.Go(func() {
		time.Sleep(5 * time.Millisecond)
		four, price := 4, int64(1300)
		if _, err := s.st.PatchProduct(ctx, "p3", products.Patch{StockBuckets: &four, PriceCents: &price}, nil); err != nil {
			t.Errorf("patch: %v", err)
		}
	})
	wg.Wait()
	left := s.stock("p3")
	if int64(sold)+left != units || left < 0 {
		t.Fatalf("sold %d, %d left: want %d in all", sold, left, units)
	}
	if want := units / each * each; sold != want {
		t.Errorf("sold %d units, want %d (%d orders of %d; refused %d)", sold, want, units/each, each, refused)
	}
}

// settle waits until the local stack's eventually consistent reads see the
// writes before it (ddbfront.Limits.StaleReads), for tests of what a page
// shows once they do.
func settle() { time.Sleep(ddbfront.DefaultStaleReads + 30*time.Millisecond) }
