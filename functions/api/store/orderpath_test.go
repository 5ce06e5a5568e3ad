package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/functions/api/store/replicas"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/tables"
)

// TestOrderTooLargeForOneTransaction: four products over 32 buckets of about
// 31 units each, ordered 1,000 each, need 4×32 decrements besides the order:
// more than the 100 actions one transaction holds. The
// order is refused with a conflict naming the products (it was a 500 from
// DynamoDB's ValidationException), and nothing is written.
func TestOrderTooLargeForOneTransaction(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	var items []orders.Item
	var ids []string
	for range 4 {
		p, err := s.st.CreateProduct(ctx, products.New{Name: "Bulk", Category: "bulk", PriceCents: ptr[int64](100), Stock: ptr[int64](1000), StockBuckets: ptr(32)})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, orders.Item{ProductID: p.ProductID, Quantity: 1000})
		ids = append(ids, p.ProductID)
	}
	_, err := s.st.PlaceOrder(ctx, "u1", orders.Request{Items: items}, nil)
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != errcode.Conflict || len(e.Products) == 0 {
		t.Fatalf("got %v, want a conflict naming the products", err)
	}
	for _, id := range ids {
		if got := s.stock(id); got != 1000 {
			t.Errorf("product %s: stock %d after a refused order, want 1000", id, got)
		}
	}
	// Half of each fits: 4×16 decrements.
	for i := range items {
		items[i].Quantity = 500
	}
	o, err := s.st.PlaceOrder(ctx, "u1", orders.Request{Items: items}, nil)
	if err != nil {
		t.Fatalf("an order of 500 each: %v", err)
	}
	// Its cancel puts 500 back into one bucket of each.
	if _, err := s.st.CancelOrder(ctx, "u1", o.OrderID); err != nil {
		t.Fatalf("cancel the order of 500 each: %v", err)
	}
	for _, id := range ids {
		if got := s.stock(id); got != 1000 {
			t.Errorf("product %s: stock %d after the cancel, want 1000", id, got)
		}
	}
}

// TestStaleBucketCountIsNotShortOfStock: after a PATCH spreads 100 units
// over 32 buckets, an eventually consistent read of the catalog item may
// still say 1 bucket. An order of 50 must not be refused for the 4 units of
// bucket 0: the retry reads the catalog item consistently and plans over
// all 32 buckets (it was a 409 "short of stock").
func TestStaleBucketCountIsNotShortOfStock(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p, db := s.respreadBehindAStaleRead()
	st := s.storeOn(db, 0)
	if _, err := st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 50}}}, nil); err != nil {
		t.Fatalf("order 50 of 100 with a stale bucket count: %v", err)
	}
	if got := s.stock(p.ProductID); got != 50 {
		t.Fatalf("stock: got %d, want 50", got)
	}
}

func ptr[T any](v T) *T { return &v }

// interleaved answers batch reads of the stock buckets (eventually
// consistent ones, or with consistent set, consistent ones) with the
// buckets in old as they were and the others as they are: a read that
// straddles a write, as BatchGetItem's read-committed isolation allows
// even to a consistent read, each item read on its own.
type interleaved struct {
	store.DB
	table      string
	old        map[string]map[string]types.AttributeValue
	consistent bool
}

func (d interleaved) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := d.DB.BatchGetItem(ctx, in, opts...)
	if err != nil || aws.ToBool(in.RequestItems[d.table].ConsistentRead) != d.consistent {
		return out, err
	}
	for i, it := range out.Responses[d.table] {
		if was, ok := d.old[it["bucketId"].(*types.AttributeValueMemberS).Value]; ok {
			out.Responses[d.table][i] = was
		}
	}
	return out, nil
}

// TestStockIsReadAsOfOneInstant: units move between buckets by a respread,
// and by a sale followed by a restock. Buckets [5,0]: a PATCH of stock 5
// respreads them to [3,2]; or a PATCH of stockDelta -5 takes bucket 0's
// five and one of +5 spreads them back as [3,2]. A read of bucket 0 from
// before and bucket 1 from after showed 7 for a product that never held
// more than 5. A consistent BatchGetItem reads each item on its own too
// (the page of several buckets reads them so since 0.19.0), and the list
// reads them eventually consistent: both find the buckets stamped by
// different writes (a restock stamps them all since 0.22.0, as a respread
// does) and read them again as of one instant.
func TestStockIsReadAsOfOneInstant(t *testing.T) {
	five, less, more := int64(5), int64(-5), int64(5)
	for _, w := range []struct {
		name    string
		patches []products.Patch
	}{
		{"respread", []products.Patch{{Stock: &five}}},
		{"sale then restock", []products.Patch{{StockDelta: &less}, {StockDelta: &more}}},
	} {
		for _, consistent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/consistent=%v", w.name, consistent), func(t *testing.T) {
				s := newShapes(t)
				ctx := context.Background()
				p, err := s.st.CreateProduct(ctx, products.New{Name: "Vase", Category: "home", PriceCents: ptr[int64](100), Stock: ptr[int64](5), StockBuckets: ptr(2)})
				if err != nil {
					t.Fatal(err)
				}
				settle() // another instance's eventually consistent read finds it
				// Buckets [5,0], as sales from bucket 1 and restocks into
				// bucket 0 leave them.
				s.setBucket(p.ProductID, 0, 5)
				s.setBucket(p.ProductID, 1, 0)
				key := p.ProductID + "#0"
				old := map[string]map[string]types.AttributeValue{key: s.raw(tables.ProductStock, map[string]types.AttributeValue{"bucketId": &types.AttributeValueMemberS{Value: key}})}
				for _, patch := range w.patches {
					if _, err := s.st.PatchProduct(ctx, p.ProductID, patch, nil); err != nil {
						t.Fatal(err)
					}
				}
				settle() // [3,2] is what any read sees now, but bucket 0's old 5
				st := store.New(interleaved{DB: s.db, table: tables.Physical(s.prefix, tables.ProductStock), old: old, consistent: consistent}, store.Config{Tables: store.TablesWithPrefix(s.prefix)})
				got, err := st.GetProduct(ctx, p.ProductID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Stock != 5 {
					t.Fatalf("page: stock %d, want 5 (the product never held more)", got.Stock)
				}
				wantListed(t, st, p.Category, 5)
			})
		}
	}
}

// TestAHeldBucketIsNotDrawnAgain: an order whose bucket another transaction
// holds goes again on another bucket of the product (at once: the bucket it
// met is the only item that refused it), and is placed there.
func TestAHeldBucketIsNotDrawnAgain(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	for range 10 { // the draw is random: ten orders, each first refused
		p, err := s.st.CreateProduct(ctx, products.New{Name: "Drop", Category: "drops", PriceCents: ptr[int64](100), Stock: ptr[int64](16), StockBuckets: ptr(2)})
		if err != nil {
			t.Fatal(err)
		}
		var rounds [][]string
		stock := tables.Physical(s.prefix, tables.ProductStock)
		db := holding{DB: s.db, stock: stock, held: map[string]bool{stock: true}, refuse: 1, mu: &sync.Mutex{}, rounds: &rounds}
		if _, err := s.storeOn(db, 0).PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}, nil); err != nil {
			t.Fatal(err)
		}
		if len(rounds) != 2 || rounds[0][0] == rounds[1][0] {
			t.Fatalf("the order's transactions decremented %v, want the held bucket, then the other", rounds)
		}
	}
}

// holding refuses transactions as DynamoDB does one that meets other
// transactions on the items of the tables in held: their reasons
// TransactionConflict, the others None. It refuses the first refuse of them
// (0: all) and passes the rest on, and records the stock buckets each
// transaction decremented.
type holding struct {
	store.DB
	stock  string
	held   map[string]bool
	refuse int
	mu     *sync.Mutex
	rounds *[][]string
}

func (d holding) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	d.mu.Lock()
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	var took []string
	for i, a := range in.TransactItems {
		reasons[i].Code = aws.String("None")
		var table string
		switch {
		case a.Update != nil:
			table = aws.ToString(a.Update.TableName)
			if table == d.stock {
				took = append(took, a.Update.Key["bucketId"].(*types.AttributeValueMemberS).Value)
			}
		case a.Put != nil:
			table = aws.ToString(a.Put.TableName)
		}
		if d.held[table] {
			reasons[i].Code = aws.String("TransactionConflict")
		}
	}
	refused := d.refuse == 0 || len(*d.rounds) < d.refuse
	*d.rounds = append(*d.rounds, took)
	d.mu.Unlock()
	if !refused {
		return d.DB.TransactWriteItems(ctx, in, opts...)
	}
	return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
}

// TestAHeldBucketGoesAgainAtOnceOnceInARow: every round of an order meets
// another transaction. Where only its bucket was held, the next round goes
// at once on another bucket, and the round after it waits; where the
// order's idempotency claim was held too, the next round waits. The
// request's deadline is under the backoff's margin, so the first wait ends
// the order (503) and the rounds before it are counted: 2 and 1. (A round
// that went at once every time would run to MaxAttempts, 20.)
func TestAHeldBucketGoesAgainAtOnceOnceInARow(t *testing.T) {
	s := newShapes(t)
	p, err := s.st.CreateProduct(context.Background(), products.New{Name: "Drop", Category: "drops", PriceCents: ptr[int64](100), Stock: ptr[int64](80), StockBuckets: ptr(8)})
	if err != nil {
		t.Fatal(err)
	}
	stockTable := tables.Physical(s.prefix, tables.ProductStock)
	claimTable := tables.Physical(s.prefix, tables.IdempotencyKeys)
	for _, tc := range []struct {
		name   string
		held   map[string]bool
		claim  bool
		rounds int
	}{
		{"its bucket held", map[string]bool{stockTable: true}, false, 2},
		{"its bucket held, with a claim", map[string]bool{stockTable: true}, true, 2},
		{"its bucket and its claim held", map[string]bool{stockTable: true, claimTable: true}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rounds [][]string
			db := holding{DB: s.db, stock: stockTable, held: tc.held, mu: &sync.Mutex{}, rounds: &rounds}
			var claim *store.Claim[orders.Order]
			if tc.claim {
				claim = &store.Claim[orders.Order]{Key: "k-" + tc.name, RequestHash: "h", Keep: func(orders.Order) (types.AttributeValue, error) {
					return &types.AttributeValueMemberS{Value: "kept"}, nil
				}}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
			defer cancel()
			_, err := s.storeOn(db, 20).PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}, claim)
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != errcode.Unavailable {
				t.Fatalf("got %v, want Unavailable", err)
			}
			if len(rounds) != tc.rounds {
				t.Fatalf("%d rounds before the first wait (%v), want %d", len(rounds), rounds, tc.rounds)
			}
			if len(rounds) == 2 && rounds[0][0] == rounds[1][0] {
				t.Errorf("the round at once drew the held bucket again: %v", rounds)
			}
		})
	}
}

// throttled cancels every transaction as DynamoDB does a write to a
// partition past its throughput: each action's reason ThrottlingError.
type throttled struct{ store.DB }

func (throttled) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	for i := range reasons {
		reasons[i] = types.CancellationReason{Code: aws.String("ThrottlingError"), Message: aws.String("Throughput exceeds the current capacity for one or more global secondary indexes.")}
	}
	return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
}

// TestThrottledSoldOutOrderIsAConflict: a sold-out product's bucket stays
// throttled by its buyers' refused writes, so an order can run out of
// retries without its condition ever being evaluated. The answer is 409
// naming the product when a consistent read finds it short (it was a 503),
// and still 503 when the product holds the quantity.
func TestThrottledSoldOutOrderIsAConflict(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	st := store.New(throttled{s.db}, store.Config{Tables: store.TablesWithPrefix(s.prefix), MaxAttempts: 3})
	for _, tc := range []struct {
		stock int64
		want  errcode.Code
	}{{1, errcode.Conflict}, {5, errcode.Unavailable}} {
		p, err := s.st.CreateProduct(ctx, products.New{Name: "Drop", Category: "drops", PriceCents: ptr[int64](100), Stock: ptr(tc.stock), StockBuckets: ptr(2)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 2}}}, nil)
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != tc.want {
			t.Fatalf("stock %d: got %v, want code %v", tc.stock, err, tc.want)
		}
		if tc.want == errcode.Conflict && (len(e.Products) != 1 || e.Products[0] != p.ProductID) {
			t.Errorf("stock %d: got products %v, want [%s]", tc.stock, e.Products, p.ProductID)
		}
	}
}

// TestStockMovingIntoItsBucketIsNotCountedTwice: a product written before
// stock buckets holds its 5 units on its catalog item; its next change
// moves them into bucket 0. An eventually consistent read of the catalog
// item from before the move with bucket 0 from after it would show 10.
func TestStockMovingIntoItsBucketIsNotCountedTwice(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	s.catalogStocked("moving", 5)
	before := s.raw(tables.Products, productKey("moving"))
	name := "Mug, blue"
	if _, err := s.st.PatchProduct(ctx, "moving", products.Patch{Name: &name}, nil); err != nil {
		t.Fatal(err)
	}
	if b := s.raw(tables.ProductStock, map[string]types.AttributeValue{"bucketId": &types.AttributeValueMemberS{Value: "moving#0"}}); b == nil {
		t.Fatal("the change did not move the stock into bucket 0")
	}
	st := store.New(&replicas.Behind{DB: s.db, Items: map[string]map[string]map[string]types.AttributeValue{tables.Physical(s.prefix, tables.Products): {"moving": before}}}, store.Config{Tables: store.TablesWithPrefix(s.prefix)})
	got, err := st.GetProduct(ctx, "moving")
	if err != nil {
		t.Fatal(err)
	}
	if got.Stock != 5 {
		t.Fatalf("stock: got %d, want 5 (the product never held more)", got.Stock)
	}
	// The category list, whose query of the catalog may lag the same way.
	list := store.New(staleQuery{DB: s.db, table: tables.Physical(s.prefix, tables.Products), old: before}, store.Config{Tables: store.TablesWithPrefix(s.prefix)})
	settle()
	wantListed(t, list, "kitchen", 5)
}

// wantListed fails t unless category lists one product, with stock units.
func wantListed(t *testing.T, st *store.Store, category string, stock int64) {
	t.Helper()
	page, err := st.ListProductsByCategory(context.Background(), category, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].Stock != stock {
		t.Fatalf("list of %s: %+v, want one product with stock %d (it never held more)", category, page.Items, stock)
	}
}

// staleQuery answers queries of table with old in place of the item of
// the same productId: an index replica behind a write of it.
type staleQuery struct {
	store.DB
	table string
	old   map[string]types.AttributeValue
}

func (d staleQuery) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := d.DB.Query(ctx, in, opts...)
	if err != nil || aws.ToString(in.TableName) != d.table {
		return out, err
	}
	id := d.old["productId"].(*types.AttributeValueMemberS).Value
	for i, it := range out.Items {
		if v, ok := it["productId"].(*types.AttributeValueMemberS); ok && v.Value == id {
			out.Items[i] = d.old
		}
	}
	return out, nil
}

// unseenUsers answers eventually consistent reads of the users table as if
// the user were not there yet (a registration an eventually consistent read
// may lag), and records the tables each transaction writes.
type unseenUsers struct {
	store.DB
	users  string
	tables *[][]string
}

func (d unseenUsers) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := d.DB.BatchGetItem(ctx, in, opts...)
	if err != nil || aws.ToBool(in.RequestItems[d.users].ConsistentRead) {
		return out, err
	}
	delete(out.Responses, d.users)
	return out, nil
}

func (d unseenUsers) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	var names []string
	for _, a := range in.TransactItems {
		switch {
		case a.Put != nil:
			names = append(names, aws.ToString(a.Put.TableName))
		case a.Update != nil:
			names = append(names, aws.ToString(a.Update.TableName))
		case a.ConditionCheck != nil:
			names = append(names, aws.ToString(a.ConditionCheck.TableName))
		case a.Delete != nil:
			names = append(names, aws.ToString(a.Delete.TableName))
		}
	}
	*d.tables = append(*d.tables, names)
	return d.DB.TransactWriteItems(ctx, in, opts...)
}

// TestOrderReadsTheUserNotChecksIt: the order's registration check is a
// read of the user's key with the catalog items, not a ConditionCheck in
// its transaction (which met the counters' writes to the user item): an
// unregistered user gets NotFound and nothing is written; a user whom an
// eventually consistent read does not see yet is read again consistently
// and orders; no order transaction touches the users table.
func TestOrderReadsTheUserNotChecksIt(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p := s.product("Cup", 5, 1)
	var txs [][]string
	usersTable := tables.Physical(s.prefix, tables.Users)
	st := s.storeOn(unseenUsers{DB: s.db, users: usersTable, tables: &txs}, 0)
	one := orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}

	_, err := st.PlaceOrder(ctx, "nobody", one, nil)
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != errcode.NotFound {
		t.Fatalf("an unregistered user's order: got %v, want NotFound", err)
	}
	if len(txs) != 0 {
		t.Errorf("an unregistered user's order wrote %d transactions", len(txs))
	}
	if got := s.stock(p.ProductID); got != 5 {
		t.Errorf("stock after the refused order: %d, want 5", got)
	}

	if _, err := st.PlaceOrder(ctx, "u1", one, nil); err != nil {
		t.Fatalf("a registered user unseen by an eventually consistent read: %v", err)
	}
	settle()
	if got := s.stock(p.ProductID); got != 4 {
		t.Errorf("stock after the order: %d, want 4", got)
	}
	if len(txs) != 1 {
		t.Fatalf("transactions: %d, want 1", len(txs))
	}
	for _, name := range txs[0] {
		if name == usersTable {
			t.Errorf("the order's transaction writes or checks the users table: %v", txs[0])
		}
	}
}

// conflictOnce cancels the first transaction with TransactionConflict at
// its first action, as DynamoDB does while another transaction holds the
// item, and counts the reads.
type conflictOnce struct {
	store.DB
	tx, reads *int
}

func (d conflictOnce) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	*d.reads++
	return d.DB.BatchGetItem(ctx, in, opts...)
}

func (d conflictOnce) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if *d.tx++; *d.tx == 1 {
		reasons := make([]types.CancellationReason, len(in.TransactItems))
		for i := range reasons {
			reasons[i] = types.CancellationReason{Code: aws.String("None")}
		}
		reasons[0].Code = aws.String("TransactionConflict")
		return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
	}
	return d.DB.TransactWriteItems(ctx, in, opts...)
}

// TestContendedOrderCommitsWithoutReadingAgain: a round cancelled by
// contention commits its read again (a change since the read fails a
// decrement's condition and makes the round after read): the contended
// orders' calls were half reads.
func TestContendedOrderCommitsWithoutReadingAgain(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p := s.product("Bowl", 3, 1)
	var tx, reads int
	st := s.storeOn(conflictOnce{DB: s.db, tx: &tx, reads: &reads}, 0)
	if _, err := st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}, nil); err != nil {
		t.Fatal(err)
	}
	settle()
	if tx != 2 || reads != 1 {
		t.Errorf("got %d transactions and %d reads, want 2 and 1 (the contended round's read committed again)", tx, reads)
	}
	if got := s.stock(p.ProductID); got != 2 {
		t.Errorf("stock: got %d, want 2", got)
	}
}

// TestRefusalReadsTheBucketsAsTheyAreNow: an order whose retries all meet
// throttling is refused from a consistent read. Its rounds commit their
// first read again, which may be seconds old: after a respread of 100 units
// from 1 bucket to 32, a read from before says 1 bucket, holding 3 or 4
// units now. The refusal reads the catalog item again and counts all 32:
// the product holds the 50 ordered, so the answer is busy, not 409.
func TestRefusalReadsTheBucketsAsTheyAreNow(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p, db := s.respreadBehindAStaleRead()
	st := s.storeOn(throttled{db}, 3)
	_, err := st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 50}}}, nil)
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != errcode.Unavailable {
		t.Fatalf("got %v, want Unavailable (the product holds 100)", err)
	}
}

// product creates a product of units over buckets through the test's store.
func (s *shapes) product(name string, units int64, buckets int) products.Product {
	s.t.Helper()
	p, err := s.st.CreateProduct(context.Background(), products.New{Name: name, Category: "kitchen", PriceCents: ptr[int64](100), Stock: ptr(units), StockBuckets: ptr(buckets)})
	if err != nil {
		s.t.Fatal(err)
	}
	settle() // shoppers meet a product once its page shows it
	return p
}

// storeOn returns a store on db (a wrapper of the test's client) over the
// test's tables; maxAttempts 0 is the store's default.
func (s *shapes) storeOn(db store.DB, maxAttempts int) *store.Store {
	return store.New(db, store.Config{Tables: store.TablesWithPrefix(s.prefix), MaxAttempts: maxAttempts})
}

// respreadBehindAStaleRead spreads a product's 100 units from 1 bucket over
// 32 and returns it with a client whose eventually consistent reads of the
// catalog still show it as it was before: 1 bucket, now holding 3 or 4.
func (s *shapes) respreadBehindAStaleRead() (products.Product, store.DB) {
	s.t.Helper()
	p := s.product("Lamp", 100, 1)
	before := s.raw(tables.Products, productKey(p.ProductID))
	n := 32
	if _, err := s.st.PatchProduct(context.Background(), p.ProductID, products.Patch{StockBuckets: &n}, nil); err != nil {
		s.t.Fatal(err)
	}
	return p, &replicas.Behind{DB: s.db, Items: map[string]map[string]map[string]types.AttributeValue{tables.Physical(s.prefix, tables.Products): {p.ProductID: before}}}
}

// unseen answers eventually consistent batch reads of table as a replica
// that has not yet seen its items does: without them.
type unseen struct {
	store.DB
	table string
}

func (d unseen) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	req, ok := in.RequestItems[d.table]
	if !ok || aws.ToBool(req.ConsistentRead) {
		return d.DB.BatchGetItem(ctx, in, opts...)
	}
	rest := map[string]types.KeysAndAttributes{}
	for table, ka := range in.RequestItems {
		if table != d.table {
			rest[table] = ka
		}
	}
	if len(rest) == 0 {
		return &dynamodb.BatchGetItemOutput{}, nil
	}
	return d.DB.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: rest}, opts...)
}

// TestNewProductIsNotShownOutOfStock: a product just created, read by a
// replica that has its catalog item but not yet its bucket, must not be
// shown with stock 0 under the version of its real page (its ETag would
// keep caches on "out of stock" with 304s): the page reads both again,
// strongly consistent.
func TestNewProductIsNotShownOutOfStock(t *testing.T) {
	s := newShapes(t)
	p := s.product("Kettle", 10, 1)
	st := store.New(unseen{DB: s.db, table: tables.Physical(s.prefix, tables.ProductStock)}, store.Config{Tables: store.TablesWithPrefix(s.prefix), CatalogCacheTTL: -1})
	got, err := st.GetProduct(context.Background(), p.ProductID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stock != 10 || got.Version != p.Version {
		t.Fatalf("page of a product whose bucket a replica has not seen: stock %d at version %d, want 10 at %d", got.Stock, got.Version, p.Version)
	}
}

// shortPages answers every query of the open-orders index with at most two
// items and the key to go on, as DynamoDB does when a page reaches 1 MB
// (fifteen orders of 50 lines each, say) before its Limit.
type shortPages struct{ store.DB }

func (d shortPages) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if aws.ToString(in.IndexName) == tables.OrdersOpenByStatus && aws.ToInt32(in.Limit) > 2 {
		cut := *in
		cut.Limit = aws.Int32(2)
		in = &cut
	}
	return d.DB.Query(ctx, in, opts...)
}

// TestOpenOrdersStayOldestFirstWhenAShardPageIsCut: the open orders list
// merges its eight shards oldest first. A shard whose page stopped short
// (1 MB) has older orders than the other shards' later ones: the page must
// end where that shard's items run out, not go on with the others' and
// leave the shard's older orders to a later page.
func TestOpenOrdersStayOldestFirstWhenAShardPageIsCut(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p := s.product("Pen", 1000, 1)
	var placed []string
	for range 24 {
		o, err := s.order(p.ProductID, 1)
		if err != nil {
			t.Fatal(err)
		}
		placed = append(placed, o.OrderID)
	}
	settle() // the index shows them
	st := s.storeOn(shortPages{s.db}, 0)
	var seen []string
	var after *store.Position
	for page := 0; ; page++ {
		if page > 50 {
			t.Fatalf("no end after 50 pages: %v", seen)
		}
		got, err := st.ListOpenOrders(ctx, orders.Placed, 10, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range got.Items {
			seen = append(seen, o.OrderID)
		}
		if got.Next == nil {
			break
		}
		after = got.Next
	}
	if !slices.IsSorted(seen) {
		t.Errorf("orders out of order across pages: %v", seen)
	}
	slices.Sort(placed)
	if !slices.Equal(seen, placed) {
		t.Errorf("got %d orders %v, want each of the %d placed once", len(seen), seen, len(placed))
	}
}

// TestReadAgainIsNotAContendedRound: an order for a product a replica has
// not seen yet reads again, strongly consistent; that second read is not a
// round lost to contention. With two attempts, one round for the read
// again and one conflict must still place the order (it was a 503).
func TestReadAgainIsNotAContendedRound(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p := s.product("Cup", 3, 1)
	var tx, reads int
	db := conflictOnce{DB: unseen{DB: s.db, table: tables.Physical(s.prefix, tables.Products)}, tx: &tx, reads: &reads}
	st := s.storeOn(db, 2)
	if _, err := st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}, nil); err != nil {
		t.Fatalf("order after a read again and one conflict, with 2 attempts: %v", err)
	}
	if tx != 2 || reads != 2 {
		t.Errorf("got %d transactions and %d reads, want 2 and 2 (the read again, then the contended round committed again)", tx, reads)
	}
}

// readFailsAfterCommit fails every read of table once a transaction has
// committed, as a throttled partition or a request out of time does.
type readFailsAfterCommit struct {
	store.DB
	table     string
	committed *bool
}

func (d readFailsAfterCommit) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := d.DB.TransactWriteItems(ctx, in, opts...)
	if err == nil {
		*d.committed = true
	}
	return out, err
}

func (d readFailsAfterCommit) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if *d.committed && aws.ToString(in.TableName) == d.table {
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("throttled")}
	}
	return d.DB.GetItem(ctx, in, opts...)
}

// TestCancelThatCommittedAnswersTheCancelledOrder: once the cancel's
// transaction commits, the answer is the order as it left it, not an error
// from a read after it (a retry would then meet CANCELLED, a 409, for a
// cancel that happened). The answer is the order as stored.
func TestCancelThatCommittedAnswersTheCancelledOrder(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p := s.product("Mug", 10, 1)
	o, err := s.st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 2}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	committed := false
	st := s.storeOn(readFailsAfterCommit{DB: s.db, table: tables.Physical(s.prefix, tables.Orders), committed: &committed}, 0)
	got, err := st.CancelOrder(ctx, "u1", o.OrderID)
	if err != nil {
		t.Fatalf("cancel: %v, want the cancelled order", err)
	}
	stored, err := s.st.GetOrder(ctx, "u1", o.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, stored) {
		t.Errorf("cancel answered\n%+v\nthe order stored is\n%+v", got, stored)
	}
	if stored.Status != orders.Cancelled || stored.Version != o.Version+1 || stored.ExpiresAt == 0 {
		t.Errorf("stored: status %s version %d expiresAt %d; want CANCELLED, %d, an expiry", stored.Status, stored.Version, stored.ExpiresAt, o.Version+1)
	}
}

// shortBesideARespread: a product of two buckets [8,0] respread to [5,4]
// by a PATCH of stock 9, and a client whose consistent reads of the buckets
// take bucket 1 from before it: 5 + 0, for a product that never held less
// than 8.
func (s *shapes) shortBesideARespread() (products.Product, store.DB) {
	s.t.Helper()
	ctx := context.Background()
	p := s.product("Jug", 8, 2)
	stockTable := tables.Physical(s.prefix, tables.ProductStock)
	s.setBucket(p.ProductID, 0, 8)
	s.setBucket(p.ProductID, 1, 0)
	key := p.ProductID + "#1"
	old := map[string]map[string]types.AttributeValue{key: s.raw(tables.ProductStock, map[string]types.AttributeValue{"bucketId": &types.AttributeValueMemberS{Value: key}})}
	nine := int64(9)
	if _, err := s.st.PatchProduct(ctx, p.ProductID, products.Patch{Stock: &nine}, nil); err != nil {
		s.t.Fatal(err)
	}
	settle()
	return p, interleaved{DB: s.db, table: stockTable, old: old, consistent: true}
}

// TestShortOnlyAsOfOneInstant: an order of 6 finds its drawn bucket short
// and reads every bucket; that read straddles a respread and counts 5. The
// product held 8, then 9: the order is placed, not refused (it was a 409).
func TestShortOnlyAsOfOneInstant(t *testing.T) {
	s := newShapes(t)
	p, db := s.shortBesideARespread()
	o, err := s.storeOn(db, 0).PlaceOrder(context.Background(), "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 6}}}, nil)
	if err != nil {
		t.Fatalf("order of 6 from a product holding 9: %v", err)
	}
	got, err := s.st.GetProduct(context.Background(), p.ProductID)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Lines) != 1 || o.Lines[0].Quantity != 6 || got.Stock != 3 {
		t.Errorf("order %+v, stock after %d; want 6 placed, 3 left", o.Lines, got.Stock)
	}
}

// TestRefusalShortOnlyAsOfOneInstant: the order runs out of retries
// (throttled), and the read that decides between 409 and 503 straddles a
// respread. The product holds 9, so the answer is busy, not short.
func TestRefusalShortOnlyAsOfOneInstant(t *testing.T) {
	s := newShapes(t)
	p, db := s.shortBesideARespread()
	_, err := s.storeOn(throttled{db}, 3).PlaceOrder(context.Background(), "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 6}}}, nil)
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != errcode.Unavailable {
		t.Fatalf("got %v, want Unavailable (the product holds 9)", err)
	}
}

// setBucket sets bucket i of a product to units, as sales and restocks
// leave it, without moving its version.
func (s *shapes) setBucket(productID string, i, units int) {
	s.t.Helper()
	if _, err := s.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(tables.Physical(s.prefix, tables.ProductStock)),
		Key:                       map[string]types.AttributeValue{"bucketId": &types.AttributeValueMemberS{Value: productID + "#" + strconv.Itoa(i)}},
		UpdateExpression:          aws.String("SET #u = :u"),
		ExpressionAttributeNames:  map[string]string{"#u": "units"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": &types.AttributeValueMemberN{Value: strconv.Itoa(units)}},
	}); err != nil {
		s.t.Fatal(err)
	}
}

// TestPageBesideARespreadIsReadAsOfOneInstant: 100 units in one bucket
// respread over 32; a page whose eventually consistent read still finds
// the catalog item of one bucket, with bucket 0 as the respread left it (3
// or 4 units), showed 3 or 4 for a product holding 100, under the version
// of the page before the respread. Bucket 0 says how many buckets wrote
// it, and the page is read again as of one instant.
func TestPageBesideARespreadIsReadAsOfOneInstant(t *testing.T) {
	s := newShapes(t)
	p, db := s.respreadBehindAStaleRead()
	settle() // bucket 0 reads as the respread left it; the catalog item, stale
	got, err := s.storeOn(db, 0).GetProduct(context.Background(), p.ProductID)
	if err != nil {
		t.Fatal(err)
	}
	now, err := s.st.GetProduct(context.Background(), p.ProductID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stock != 100 || got.StockBuckets != 32 || got.Version != now.Version {
		t.Errorf("page: stock %d over %d buckets at version %d; want 100 over 32 at %d", got.Stock, got.StockBuckets, got.Version, now.Version)
	}
}

// TestListBesideARespreadIsReadAsOfOneInstant: the category list reads the
// buckets of its products in one eventually consistent BatchGetItem, each
// item on its own. Buckets [5,0] respread to [3,2], read as bucket 0 from
// before and bucket 1 from after, would list 7 units for a product that
// never held more than 5; and a catalog item of 1 bucket listed beside a
// bucket 0 respread to 4 buckets would list a quarter of its stock.
func TestListBesideARespreadIsReadAsOfOneInstant(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	stockTable := tables.Physical(s.prefix, tables.ProductStock)
	for _, tc := range []struct {
		name          string
		buckets, stay int     // before the respread, after it
		units         []int64 // the buckets before the respread
		patch         products.Patch
		want          int64
	}{
		{"same number of buckets", 2, 2, []int64{5, 0}, products.Patch{Stock: ptr[int64](5)}, 5},
		{"1 bucket to 4", 1, 4, []int64{100}, products.Patch{StockBuckets: ptr(4)}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			category := fmt.Sprintf("straddle-%d-%d", tc.buckets, tc.stay)
			var total int64
			for _, u := range tc.units {
				total += u
			}
			p, err := s.st.CreateProduct(ctx, products.New{Name: "Vase", Category: category, PriceCents: ptr[int64](100), Stock: &total, StockBuckets: ptr(tc.buckets)})
			if err != nil {
				t.Fatal(err)
			}
			for i, u := range tc.units {
				s.setBucket(p.ProductID, i, int(u))
			}
			old := map[string]map[string]types.AttributeValue{}
			key := p.ProductID + "#0"
			old[key] = s.raw(tables.ProductStock, map[string]types.AttributeValue{"bucketId": &types.AttributeValueMemberS{Value: key}})
			if _, err := s.st.PatchProduct(ctx, p.ProductID, tc.patch, nil); err != nil {
				t.Fatal(err)
			}
			settle() // the respread is what any read sees now, but bucket 0's old units
			st := store.New(interleaved{DB: s.db, table: stockTable, old: old}, store.Config{Tables: store.TablesWithPrefix(s.prefix)})
			page, err := st.ListProductsByCategory(ctx, category, 10, nil)
			if err != nil {
				t.Fatal(err)
			}
			now, err := s.st.GetProduct(ctx, p.ProductID)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Items) != 1 || page.Items[0].Stock != tc.want || page.Items[0].Version != now.Version {
				t.Fatalf("list: %+v; want one product of stock %d at version %d", page.Items, tc.want, now.Version)
			}
		})
	}
}

// held cancels every transactional read of the stock table as DynamoDB
// does one that meets a write transaction holding one of its items: during
// a flash sale of a product of several buckets, orders hold its buckets
// nearly all the time, and all of them at once are seldom free.
type held struct {
	store.DB
	table string
}

func (d held) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	conflict := false
	for i, it := range in.TransactItems {
		reasons[i] = types.CancellationReason{Code: aws.String("None")}
		if it.Get != nil && aws.ToString(it.Get.TableName) == d.table {
			reasons[i] = types.CancellationReason{Code: aws.String("TransactionConflict"), Message: aws.String("Transaction is ongoing for the item")}
			conflict = true
		}
	}
	if !conflict {
		return d.DB.TransactGetItems(ctx, in, opts...)
	}
	return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
}

// TestPageOfSeveralBucketsDuringASale: a product page of several buckets
// read them in one TransactGetItems, which AWS cancels while an order's
// transaction holds any of them. In an 8-bucket flash sale through the
// local stack (BenchmarkFlashSalePage) a page took 1.8-3.8 s, and 4
// readers got 6 pages in the whole sale. The page reads its buckets with a
// consistent BatchGetItem, which no transaction cancels, and only a read
// that straddles a respread (the one write that moves units between
// buckets) is read again as of one instant.
func TestPageOfSeveralBucketsDuringASale(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p := s.product("Drop", 10, 4)
	st := s.storeOn(held{DB: s.db, table: tables.Physical(s.prefix, tables.ProductStock)}, 3)
	got, err := st.GetProduct(ctx, p.ProductID)
	if err != nil {
		t.Fatalf("a page while orders hold its buckets: %v", err)
	}
	if got.Stock != 10 || got.Version != p.Version {
		t.Fatalf("got stock %d at version %d, want 10 at %d", got.Stock, got.Version, p.Version)
	}
}
