package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/stock"
	"github.com/shopstream/shopstream/shared/tables"
)

// takesTwice sends every take of the stock table twice, as a client does
// that sends a write again when its answer was lost, and answers with the
// second try's outcome.
type takesTwice struct {
	store.DB
	stock string
	sent  *int
}

func (d takesTwice) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if aws.ToString(in.TableName) == d.stock && strings.Contains(aws.ToString(in.UpdateExpression), "SET") {
		*d.sent++
		if _, err := d.DB.UpdateItem(ctx, in, opts...); err != nil {
			return nil, err
		}
	}
	return d.DB.UpdateItem(ctx, in, opts...)
}

// TestTakeSentTwiceTakesOnce: a take is conditional on its hold being
// absent, so a take that had applied and is sent again fails its condition,
// finds its hold, and counts as taken: one unit sold, not two.
func TestTakeSentTwiceTakesOnce(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p := s.product("Kettle", 5, 1)
	var sent int
	st := s.storeOn(takesTwice{DB: s.db, stock: tables.Physical(s.prefix, tables.ProductStock), sent: &sent}, 0)
	if _, err := st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 2}}}, nil); err != nil {
		t.Fatal(err)
	}
	if sent != 1 {
		t.Fatalf("takes sent twice: %d, want 1", sent)
	}
	if got := s.stock(p.ProductID); got != 3 {
		t.Errorf("stock: got %d, want 3 (2 taken once)", got)
	}
	if h := s.holds(p.ProductID, 0); len(h) != 0 {
		t.Errorf("holds left after the order: %v", h)
	}
}

// orderLost fails the puts of the orders table as a call whose answer is
// lost: after the put applied (applied) or before it.
type orderLost struct {
	store.DB
	orders  string
	applied bool
	failing *bool
}

func (d orderLost) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if aws.ToString(in.TableName) != d.orders || !*d.failing {
		return d.DB.PutItem(ctx, in, opts...)
	}
	if d.applied {
		if _, err := d.DB.PutItem(ctx, in, opts...); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("read tcp 127.0.0.1:8000: connection reset by peer")
}

// TestStoppedOrderIsSettled: an order whose put's answer was lost is
// answered Unavailable and leaves its hold, since whether it was written is
// not known. Once the hold is stale it is settled from the order table,
// once: the order not written, its units go back; written, only the hold
// goes. A later order on the same bucket settles a stale hold it finds.
func TestStoppedOrderIsSettled(t *testing.T) {
	for _, applied := range []bool{false, true} {
		t.Run(map[bool]string{false: "order not written", true: "order written"}[applied], func(t *testing.T) {
			s := newShapes(t)
			ctx := context.Background()
			p := s.product("Teapot", 10, 1)
			now := time.Now()
			clock := func() time.Time { return now }
			failing := true
			db := orderLost{DB: s.db, orders: tables.Physical(s.prefix, tables.Orders), applied: applied, failing: &failing}
			st := store.New(db, store.Config{Tables: store.TablesWithPrefix(s.prefix), Now: func() time.Time { return clock() }})
			one := orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 3}}}
			if _, err := st.PlaceOrder(ctx, "u1", one, nil); errcode.Of(err) != errcode.Unavailable {
				t.Fatalf("an order whose put's answer was lost: got %v, want Unavailable", err)
			}
			if got, h := s.stock(p.ProductID), s.holds(p.ProductID, 0); got != 7 || len(h) != 1 {
				t.Fatalf("after the lost answer: stock %d and holds %v, want 7 and one hold", got, h)
			}
			settled, err := st.SettleStaleHolds(ctx, p.ProductID)
			if err != nil || settled != (store.Settled{}) {
				t.Fatalf("settling a fresh hold: %+v, %v; want nothing settled", settled, err)
			}

			now = now.Add(stock.StaleAfter)
			failing = false
			want := store.Settled{Returned: 1, Units: 3}
			wantStock := int64(10)
			if applied {
				want, wantStock = store.Settled{Released: 1}, 7
			}
			if settled, err = st.SettleStaleHolds(ctx, p.ProductID); err != nil || settled != want {
				t.Fatalf("settling the stale hold: %+v, %v; want %+v", settled, err, want)
			}
			if got, h := s.stock(p.ProductID), s.holds(p.ProductID, 0); got != wantStock || len(h) != 0 {
				t.Errorf("after settling: stock %d and holds %v, want %d and none", got, h, wantStock)
			}
			if settled, err = st.SettleStaleHolds(ctx, p.ProductID); err != nil || settled != (store.Settled{}) {
				t.Errorf("settling again: %+v, %v; want nothing (once)", settled, err)
			}

			// The same stop again, settled by the next order on the bucket.
			failing = true
			if _, err := st.PlaceOrder(ctx, "u1", one, nil); errcode.Of(err) != errcode.Unavailable {
				t.Fatalf("the second lost answer: got %v", err)
			}
			now = now.Add(stock.StaleAfter)
			failing = false
			if _, err := st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}, nil); err != nil {
				t.Fatal(err)
			}
			wantStock -= 1
			if applied {
				wantStock -= 3
			}
			if got, h := s.stock(p.ProductID), s.holds(p.ProductID, 0); got != wantStock || len(h) != 0 {
				t.Errorf("after the next order: stock %d and holds %v, want %d and none", got, h, wantStock)
			}
		})
	}
}

// putBusyOnce refuses the first put of the orders table as throttled.
type putBusyOnce struct {
	store.DB
	orders string
	done   *bool
}

func (d putBusyOnce) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if aws.ToString(in.TableName) == d.orders && !*d.done {
		*d.done = true
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("throughput exceeded")}
	}
	return d.DB.PutItem(ctx, in, opts...)
}

// TestOrderNotWrittenGivesItsUnitsBack: an order refused after its takes
// gives their units back (and removes its holds) before it tries again:
// the stock is taken once, by the order that was written.
func TestOrderNotWrittenGivesItsUnitsBack(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p := s.product("Jug", 8, 2)
	var done bool
	st := s.storeOn(putBusyOnce{DB: s.db, orders: tables.Physical(s.prefix, tables.Orders), done: &done}, 0)
	if _, err := st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 3}}}, nil); err != nil {
		t.Fatal(err)
	}
	if !done {
		t.Fatal("the order's put was never refused")
	}
	if got := s.stock(p.ProductID); got != 5 {
		t.Errorf("stock: got %d, want 5", got)
	}
	for i := range 2 {
		if h := s.holds(p.ProductID, i); len(h) != 0 {
			t.Errorf("bucket %d holds %v after the order", i, h)
		}
	}
}

// TestRespreadKeepsHolds: a change of the number of buckets carries the
// holds over (a dropped bucket's to bucket 0), where an order not written
// finds them to give its units back; a new absolute stock drops them: it
// counts the units as they are.
func TestRespreadKeepsHolds(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p := s.product("Vase", 4, 1)
	now := time.Now()
	failing := true
	db := orderLost{DB: s.db, orders: tables.Physical(s.prefix, tables.Orders), failing: &failing}
	st := store.New(db, store.Config{Tables: store.TablesWithPrefix(s.prefix), Now: func() time.Time { return now }})
	if _, err := st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}, nil); errcode.Of(err) != errcode.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
	four, one := 4, 1
	for _, n := range []*int{&four, &one} {
		if _, err := s.st.PatchProduct(ctx, p.ProductID, products.Patch{StockBuckets: n}, nil); err != nil {
			t.Fatal(err)
		}
		if h := s.holds(p.ProductID, 0); len(h) != 1 {
			t.Fatalf("bucket 0 after the respread to %d buckets holds %v, want the hold", *n, h)
		}
	}
	now = now.Add(stock.StaleAfter)
	if settled, err := st.SettleStaleHolds(ctx, p.ProductID); err != nil || settled.Returned != 1 {
		t.Fatalf("settling the carried hold: %+v, %v", settled, err)
	}
	if got := s.stock(p.ProductID); got != 4 {
		t.Errorf("stock after the hold's units went back: %d, want 4", got)
	}

	now = now.Add(-stock.StaleAfter)
	if _, err := st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}, nil); errcode.Of(err) != errcode.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
	ten := int64(10)
	if _, err := s.st.PatchProduct(ctx, p.ProductID, products.Patch{Stock: &ten}, nil); err != nil {
		t.Fatal(err)
	}
	if h := s.holds(p.ProductID, 0); len(h) != 0 {
		t.Errorf("holds after a new absolute stock: %v, want none", h)
	}
	now = now.Add(stock.StaleAfter)
	if settled, err := st.SettleStaleHolds(ctx, p.ProductID); err != nil || settled != (store.Settled{}) {
		t.Errorf("settling after the absolute stock: %+v, %v; want nothing", settled, err)
	}
	if got := s.stock(p.ProductID); got != 10 {
		t.Errorf("stock: %d, want the 10 set", got)
	}
}

// holds is the holds of bucket i of product id, read consistently.
func (s *shapes) holds(id string, i int) []string {
	s.t.Helper()
	item := s.raw(tables.ProductStock, map[string]types.AttributeValue{"bucketId": &types.AttributeValueMemberS{Value: id + "#" + string(rune('0'+i))}})
	if ss, ok := item["holds"].(*types.AttributeValueMemberSS); ok {
		return ss.Value
	}
	return nil
}

// releaseThrottled refuses the releases of holds (the writes that only
// remove a hold) as a throttled partition does once the client's retries
// ran out.
type releaseThrottled struct{ store.DB }

func (d releaseThrottled) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if strings.HasPrefix(aws.ToString(in.UpdateExpression), "DELETE") {
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("throughput exceeded")}
	}
	return d.DB.UpdateItem(ctx, in, opts...)
}

// TestSoldOutIsAConflictWhileAReleaseLags: the last unit's order is
// written but its hold's release is throttled, so the hold stays a while.
// The next buyer's order finds the product short only by a hold whose order
// is written: 409 at once, not a wait for a unit that will not come back.
// A hold whose order is not written yet still makes it wait (and, when
// nothing gives the unit back before its retries run out, 503).
func TestSoldOutIsAConflictWhileAReleaseLags(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	p := s.product("Last", 1, 1)
	st := s.storeOn(releaseThrottled{s.db}, 3)
	one := orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}
	if _, err := st.PlaceOrder(ctx, "u1", one, nil); err != nil {
		t.Fatal(err)
	}
	if h := s.holds(p.ProductID, 0); len(h) != 1 {
		t.Fatalf("holds after the throttled release: %v, want the order's", h)
	}
	_, err := st.PlaceOrder(ctx, "u1", one, nil)
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != errcode.Conflict || len(e.Products) != 1 {
		t.Fatalf("the next order: got %v, want a conflict naming the product", err)
	}

	q := s.product("Pending", 1, 1)
	failing := true
	lost := store.New(orderLost{DB: s.db, orders: tables.Physical(s.prefix, tables.Orders), failing: &failing}, store.Config{Tables: store.TablesWithPrefix(s.prefix), MaxAttempts: 3})
	if _, err := lost.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: q.ProductID, Quantity: 1}}}, nil); errcode.Of(err) != errcode.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
	if _, err := st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: q.ProductID, Quantity: 1}}}, nil); errcode.Of(err) != errcode.Unavailable {
		t.Errorf("an order short only of a unit an order not written holds: got %v, want Unavailable (it may come back)", err)
	}
}
