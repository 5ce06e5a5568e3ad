package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/migrations"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/users"
)

type fixture struct {
	t      *testing.T
	db     *dynamodb.Client
	prefix string
	names  map[string]string
	st     *store.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	prefix := stacktest.Tables(t)
	f := &fixture{t: t, db: stacktest.DynamoDB(t), prefix: prefix, names: map[string]string{}}
	for _, tb := range tables.All() {
		f.names[tb.Name] = tables.Physical(prefix, tb.Name)
	}
	f.st = store.New(f.db, store.Config{Tables: store.TablesWithPrefix(prefix)})
	return f
}

// legacy writes n products as release 0.1.0 wrote them (stock on the
// catalog item; every seventh with stockBuckets 3 and no bucket, as a
// catalog item of 0.2.0 that never met a change), units i%17 each, and
// returns their ids.
func (f *fixture) legacy(n int) []string {
	f.t.Helper()
	var ids []string
	var items []map[string]any
	for i := range n {
		id := fmt.Sprintf("p%04d", i)
		ids = append(ids, id)
		it := map[string]any{
			"productId": id, "name": "Item " + id, "description": "", "category": "kitchen",
			"priceCents": 500 + i, "stock": i % 17, "createdAt": "2026-11-23T10:00:00.000Z", "updatedAt": "2026-11-23T10:00:00.000Z", "version": 1 + i%3,
		}
		if i%7 == 0 {
			it["stockBuckets"] = 3
		}
		items = append(items, it)
	}
	stacktest.Load(f.t, f.db, f.names[tables.Products], items)
	return ids
}

// views reads the products as a client sees them.
func (f *fixture) views(ids []string) map[string]products.Product {
	f.t.Helper()
	out := map[string]products.Product{}
	for _, id := range ids {
		p, err := f.st.GetProduct(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		p.Shape, p.CatalogStock = 0, nil // stored, not seen
		out[id] = p
	}
	return out
}

func (f *fixture) withStock() int {
	f.t.Helper()
	out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{
		TableName: aws.String(f.names[tables.Products]), FilterExpression: aws.String("attribute_exists(stock)"), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return int(out.Count)
}

func (f *fixture) config() migrations.Config {
	return migrations.Config{DB: f.db, Tables: f.names, PageSize: 40}
}

// TestCatalogStockIntoBuckets: a dry run changes nothing; a run killed after
// its second page continues where it stopped; every product reads the same
// before and after (stock, version, everything a client sees); a third run
// does nothing.
func TestCatalogStockIntoBuckets(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ids := f.legacy(250)
	created, err := f.st.CreateProduct(ctx, products.New{Name: "New", Category: "kitchen", PriceCents: ptr[int64](100), Stock: ptr[int64](5)})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, created.ProductID)
	before := f.views(ids)

	pending, err := migrations.Pending(ctx, f.db, f.names)
	if err != nil || !reflect.DeepEqual(pending, []string{"0001-catalog-stock-into-buckets"}) {
		t.Fatalf("pending: got %v, %v; want the catalog stock migration", pending, err)
	}

	cfg := f.config()
	cfg.DryRun = true
	var planned atomic.Int64
	cfg.Planned = func(string, string) { planned.Add(1) }
	rep, err := migrations.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed() != 250 || planned.Load() != 250 || f.withStock() != 250 {
		t.Fatalf("dry run: would change %d, listed %d, left %d with catalog stock; want 250, 250, 250", rep.Changed(), planned.Load(), f.withStock())
	}

	killed, kill := context.WithCancel(ctx)
	cfg = f.config()
	pages := 0
	cfg.Progress = func(migrations.Progress) {
		if pages++; pages == 2 {
			kill()
		}
	}
	if _, err := migrations.Run(killed, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("killed run: got %v, want context.Canceled", err)
	}
	first := 250 - f.withStock()
	if first == 0 || first == 250 {
		t.Fatalf("the killed run changed %d products; want some, not all", first)
	}

	rep, err = migrations.Run(ctx, f.config())
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Migrations[0]
	if !m.Done || int(m.Changed) != 250 || int(m.ChangedThisRun) != 250-first || m.Left != 0 {
		t.Fatalf("second run: %+v; want done, 250 changed in all, %d by this run", m, 250-first)
	}
	if n := f.withStock(); n != 0 {
		t.Fatalf("%d catalog items still hold stock", n)
	}
	if after := f.views(ids); !reflect.DeepEqual(after, before) {
		for _, id := range ids {
			if !reflect.DeepEqual(after[id], before[id]) {
				t.Errorf("product %s: before %+v, after %+v", id, before[id], after[id])
			}
		}
		t.FailNow()
	}

	rep, err = migrations.Run(ctx, f.config())
	if err != nil || !rep.Migrations[0].AlreadyDone || rep.Changed() != 0 {
		t.Fatalf("third run: %+v, %v; want done by an earlier run", rep, err)
	}
	if pending, err := migrations.Pending(ctx, f.db, f.names); err != nil || len(pending) != 0 {
		t.Fatalf("pending after the run: %v, %v", pending, err)
	}
}

// TestMigrationBesideSales: orders sell the products while the migration
// moves their stock: every unit is sold at most once and none is lost.
func TestMigrationBesideSales(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ids := f.legacy(60)
	if _, err := f.st.CreateUser(ctx, "u1", users.New{Email: "u1@example.com", Name: "U1"}); err != nil {
		t.Fatal(err)
	}
	total := func() int64 {
		var n int64
		for _, p := range f.views(ids) {
			n += p.Stock
		}
		return n
	}
	start := total()
	var sold int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := w; ; i += 4 {
				select {
				case <-done:
					return
				default:
				}
				_, err := f.st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: ids[i%len(ids)], Quantity: 2}}}, nil)
				var e *errcode.Error
				switch {
				case err == nil:
					mu.Lock()
					sold += 2
					mu.Unlock()
				case errors.As(err, &e) && e.Code == errcode.Conflict:
				default:
					t.Errorf("order: %v", err)
					return
				}
			}
		})
	}
	cfg := f.config()
	cfg.PageSize = 5
	rep, err := migrations.Run(ctx, cfg)
	close(done)
	wg.Wait()
	if err != nil || !rep.Migrations[0].Done || rep.Left() != 0 {
		t.Fatalf("run beside sales: %+v, %v", rep, err)
	}
	if left := total(); sold+left != start || sold == 0 {
		t.Fatalf("sold %d and %d left of %d", sold, left, start)
	}
	if n := f.withStock(); n != 0 {
		t.Fatalf("%d catalog items still hold stock", n)
	}
}

// TestRateCapsTheScan: with the clock held still, a run capped at 50 items
// a second over 200 items waits a second after each of its first three
// pages of 50.
func TestRateCapsTheScan(t *testing.T) {
	f := newFixture(t)
	f.legacy(200)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var waits []time.Duration
	cfg := f.config()
	cfg.Rate, cfg.PageSize = 50, 50
	cfg.Now = func() time.Time { return now }
	cfg.Sleep = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		now = now.Add(d)
		return nil
	}
	if _, err := migrations.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{time.Second, time.Second, time.Second, time.Second}
	if !reflect.DeepEqual(waits, want) {
		t.Fatalf("waits: got %v, want %v", waits, want)
	}
}

// TestProgressIsRecorded: the progress item names the migration's release
// and its own shape, and counts every item (a catalog item holding stock 0
// is moved too: the attribute goes); a second run recording progress of the
// same migration at once is refused.
func TestProgressIsRecorded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.legacy(30)
	key := map[string]types.AttributeValue{"migration": &types.AttributeValueMemberS{Value: "0001-catalog-stock-into-buckets"}}
	cfg := f.config()
	cfg.PageSize = 10
	first := true
	cfg.Progress = func(migrations.Progress) {
		if !first {
			return
		}
		first = false
		// Another run's page, recorded in between.
		if _, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(f.names[tables.Migrations]), Key: key,
			UpdateExpression: aws.String("ADD scanned :n"), ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: "10"}},
		}); err != nil {
			t.Error(err)
		}
	}
	if _, err := migrations.Run(ctx, cfg); !errors.Is(err, migrations.ErrConcurrentRun) {
		t.Fatalf("run beside another: got %v, want ErrConcurrentRun", err)
	}
	if _, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.names[tables.Migrations]), Key: key}); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Run(ctx, f.config()); err != nil {
		t.Fatal(err)
	}
	out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.names[tables.Migrations]), ConsistentRead: aws.Bool(true), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Scanned, Changed int64
		Done             bool
		Release          string
		Shape            int
	}
	if err := attributevalue.UnmarshalMap(out.Item, &st); err != nil {
		t.Fatal(err)
	}
	// 20 of the 30 were moved by the refused run: its first page, and its
	// second, whose progress was refused.
	if st.Scanned != 30 || st.Changed != 10 || !st.Done || st.Release != "0.3.0" || st.Shape != 1 {
		t.Fatalf("progress item: got %+v, want 30 scanned, 10 changed, done, release 0.3.0, shape 1", st)
	}
	if n := f.withStock(); n != 0 {
		t.Fatalf("%d catalog items still hold stock", n)
	}
}

// contended cancels every transaction that writes product id, as AWS does
// one that meets another on its items, however often it is tried.
type contended struct {
	migrations.DB
	id string
}

func (c contended) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, a := range in.TransactItems {
		var key map[string]types.AttributeValue
		switch {
		case a.Update != nil:
			key = a.Update.Key
		case a.Put != nil:
			key = a.Put.Item
		case a.ConditionCheck != nil:
			key = a.ConditionCheck.Key
		}
		if v, ok := key["productId"].(*types.AttributeValueMemberS); ok && v.Value == c.id {
			reasons := make([]types.CancellationReason, len(in.TransactItems))
			for i := range reasons {
				reasons[i].Code = aws.String("TransactionConflict")
			}
			return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
		}
	}
	return c.DB.TransactWriteItems(ctx, in, opts...)
}

// TestItemGivenUpIsNotForgottenByAResumedRun: a run gives up on an item that
// keeps meeting contention on its second page and is killed on its fourth;
// the run that resumes after it reaches the table's end with nothing left of
// its own, but must not record the migration done: the item still holds its
// stock on the catalog item. The next run takes it and records it done.
func TestItemGivenUpIsNotForgottenByAResumedRun(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.legacy(10)
	killed, kill := context.WithCancel(ctx)
	defer kill()
	cfg := f.config()
	cfg.PageSize, cfg.MaxAttempts = 2, 2
	cfg.Sleep = func(context.Context, time.Duration) error { return nil }
	// The scan's order is the table's hash order: contend the item on the
	// second page, whichever it is.
	var second []string
	pages := 0
	cfg.DB = &pageWatch{DB: f.db, page: func(items []map[string]types.AttributeValue) {
		if pages++; pages == 2 {
			for _, it := range items {
				second = append(second, it["productId"].(*types.AttributeValueMemberS).Value)
			}
		}
	}}
	// A dry run finds the pages' order.
	dry := cfg
	dry.DryRun = true
	if _, err := migrations.Run(ctx, dry); err != nil {
		t.Fatal(err)
	}
	if len(second) == 0 {
		t.Fatal("no second page")
	}
	cfg.DB = contended{DB: f.db, id: second[0]}
	pages = 0
	cfg.Progress = func(migrations.Progress) {
		if pages++; pages == 4 {
			kill()
		}
	}
	if _, err := migrations.Run(killed, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("killed run: got %v, want context.Canceled", err)
	}
	cfg.DB, cfg.Progress = f.db, nil
	rep, err := migrations.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m := rep.Migrations[0]; m.Left != 1 || f.withStock() != 1 {
		t.Fatalf("resumed run: %+v with %d catalog items holding stock; want the earlier run's item left", m, f.withStock())
	}
	if pending, err := migrations.Pending(ctx, f.db, f.names); err != nil || len(pending) != 1 {
		t.Fatalf("pending after the resumed run: %v, %v; want the migration, not recorded done", pending, err)
	}
	rep, err = migrations.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m := rep.Migrations[0]; !m.Done || m.AlreadyDone || f.withStock() != 0 {
		t.Fatalf("next run: %+v with %d catalog items holding stock; want it done now, by this run, none left", m, f.withStock())
	}
	if pending, err := migrations.Pending(ctx, f.db, f.names); err != nil || len(pending) != 0 {
		t.Fatalf("pending after all: %v, %v", pending, err)
	}
}

// pageWatch shows each scanned page to page.
type pageWatch struct {
	migrations.DB
	page func([]map[string]types.AttributeValue)
}

func (w *pageWatch) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := w.DB.Scan(ctx, in, opts...)
	if err == nil {
		w.page(out.Items)
	}
	return out, err
}

func ptr[T any](v T) *T { return &v }
