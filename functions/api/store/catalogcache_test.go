package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/functions/api/store/replicas"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/users"
)

// reads counts the reads a store makes of the products table.
type reads struct {
	store.DB
	table   string
	catalog atomic.Int64
}

func (r *reads) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if aws.ToString(in.TableName) == r.table {
		r.catalog.Add(1)
	}
	return r.DB.GetItem(ctx, in, opts...)
}

func (r *reads) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if _, ok := in.RequestItems[r.table]; ok {
		r.catalog.Add(1)
	}
	return r.DB.BatchGetItem(ctx, in, opts...)
}

// TestProductPageReusesTheCatalogItem: within the cache's TTL a page of a
// one-bucket product reads only its bucket while the bucket is as it was;
// a bucket that moved (a sale, a stock change, a rename elsewhere) is joined
// with a fresh catalog item; this instance's own writes and the TTL's end
// send the page back to the catalog item. A cached page is always a state
// the product had: another instance's description shows, with its version,
// within the TTL.
func TestProductPageReusesTheCatalogItem(t *testing.T) {
	ctx := context.Background()
	prefix := stacktest.Tables(t)
	db := stacktest.DynamoDB(t)
	ttl := 400 * time.Millisecond
	counted := &reads{DB: db, table: tables.Physical(prefix, tables.Products)}
	// Every page reads its bucket here: the repeat window has a test of its own.
	here := store.New(counted, store.Config{Tables: store.TablesWithPrefix(prefix), CatalogCacheTTL: ttl, PageRepeat: -1})
	there := store.New(db, store.Config{Tables: store.TablesWithPrefix(prefix), CatalogCacheTTL: -1})
	p, err := here.CreateProduct(ctx, products.New{Name: "Kettle", Description: "Boils", Category: "kitchen", PriceCents: ptr[int64](500), Stock: ptr[int64](10)})
	if err != nil {
		t.Fatal(err)
	}
	settle()
	var last products.Product
	page := func(what string, catalogReads int64) products.Product {
		t.Helper()
		before := counted.catalog.Load()
		got, err := here.GetProduct(ctx, p.ProductID)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n := counted.catalog.Load() - before; n != catalogReads {
			t.Errorf("%s: %d reads of the catalog, want %d", what, n, catalogReads)
		}
		last = got
		return got
	}
	first := page("first page", 1)
	if again := page("second page", 0); again.Version != first.Version || again.Stock != 10 || again.Name != "Kettle" {
		t.Errorf("cached page: got %+v, want the first page's", again)
	}

	// A stock change elsewhere moves the bucket: the page reads the catalog
	// again and shows both at once, then is cached again.
	if _, err := there.PatchProduct(ctx, p.ProductID, products.Patch{StockDelta: ptr[int64](-3)}, nil); err != nil {
		t.Fatal(err)
	}
	settle()
	if got := page("page after a stock change elsewhere", 1); got.Stock != 7 || got.Version <= first.Version {
		t.Errorf("after a stock change: stock %d version %d, want 7 and past %d", got.Stock, got.Version, first.Version)
	}
	page("page after that", 0)

	// A rename elsewhere changes the bucket's copy of the name.
	if _, err := there.PatchProduct(ctx, p.ProductID, products.Patch{Name: ptr("Teapot")}, nil); err != nil {
		t.Fatal(err)
	}
	settle()
	if got := page("page after a rename elsewhere", 1); got.Name != "Teapot" {
		t.Errorf("after a rename elsewhere: name %q, want Teapot", got.Name)
	}

	// A sale elsewhere moves the bucket's version past 0.
	if _, err := there.CreateUser(ctx, "buyer", users.New{Email: "buyer@example.com", Name: "Buyer"}); err != nil {
		t.Fatal(err)
	}
	if _, err := there.PlaceOrder(ctx, "buyer", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}, nil); err != nil {
		t.Fatal(err)
	}
	settle()
	page("page after a sale elsewhere", 1)

	// This instance's own write is seen by its next page.
	if _, err := here.PatchProduct(ctx, p.ProductID, products.Patch{Description: ptr("Brews")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := page("page after its own PATCH", 1); got.Description != "Brews" {
		t.Errorf("after its own PATCH: description %q, want Brews", got.Description)
	}
	// and kept: the product has sold (its bucket's version is past 0), and
	// the instance's record of its own write is the catalog item's version.
	page("page after that", 0)

	// A description elsewhere leaves the bucket as it was: the page stays
	// the state before it, version included, until the TTL ends.
	before := last
	if _, err := there.PatchProduct(ctx, p.ProductID, products.Patch{Description: ptr("Steeps")}, nil); err != nil {
		t.Fatal(err)
	}
	settle()
	if got := page("page within the TTL", 0); got.Description != before.Description || got.Version != before.Version {
		t.Errorf("within the TTL: %q at version %d, want the state before, %q at %d", got.Description, got.Version, before.Description, before.Version)
	}
	time.Sleep(ttl)
	if got := page("page after the TTL", 1); got.Description != "Steeps" || got.Version <= before.Version {
		t.Errorf("after the TTL: %q at version %d, want Steeps past %d", got.Description, got.Version, before.Version)
	}

	// Deleted elsewhere: the bucket is gone, so the page is a 404 at once.
	if err := there.DeleteProduct(ctx, p.ProductID, nil); err != nil {
		t.Fatal(err)
	}
	settle()
	if _, err := here.GetProduct(ctx, p.ProductID); err == nil {
		t.Error("a product deleted elsewhere is still served")
	}
}

// allReads counts every read a store makes, of any table.
type allReads struct {
	store.DB
	n atomic.Int64
}

func (r *allReads) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.n.Add(1)
	return r.DB.GetItem(ctx, in, opts...)
}

func (r *allReads) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	r.n.Add(1)
	return r.DB.BatchGetItem(ctx, in, opts...)
}

func (r *allReads) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	r.n.Add(1)
	return r.DB.TransactGetItems(ctx, in, opts...)
}

// TestProductPageRepeatedWithinItsWindow: once a read found a page's
// bucket as cached, the page is answered again with no read at all for the
// repeat window; a sale on another instance shows on the first page after
// it, and one on this instance on its very next page. The same for a
// product of several buckets, whose page is repeated whole.
func TestProductPageRepeatedWithinItsWindow(t *testing.T) {
	t.Run("one bucket", func(t *testing.T) { testPageRepeated(t, 1) })
	t.Run("four buckets", func(t *testing.T) { testPageRepeated(t, 4) })
}

func testPageRepeated(t *testing.T, buckets int) {
	ctx := context.Background()
	prefix := stacktest.Tables(t)
	db := stacktest.DynamoDB(t)
	repeat := time.Second
	counted := &allReads{DB: db}
	here := store.New(counted, store.Config{Tables: store.TablesWithPrefix(prefix), CatalogCacheTTL: time.Minute, PageRepeat: repeat})
	there := store.New(db, store.Config{Tables: store.TablesWithPrefix(prefix), CatalogCacheTTL: -1})
	p, err := here.CreateProduct(ctx, products.New{Name: "Kettle", Description: "Boils", Category: "kitchen", PriceCents: ptr[int64](500), Stock: ptr[int64](10), StockBuckets: ptr(buckets)})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"near", "far"} {
		if _, err := there.CreateUser(ctx, u, users.New{Email: u + "@example.com", Name: u}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(store.OwnReads) // past this instance's strongly consistent reads of its own product
	page := func(what string, reads, stock int64) {
		t.Helper()
		before := counted.n.Load()
		got, err := here.GetProduct(ctx, p.ProductID)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n := counted.n.Load() - before; n != reads || got.Stock != stock {
			t.Errorf("%s: %d reads, stock %d; want %d reads, stock %d", what, n, got.Stock, reads, stock)
		}
	}
	// A full read: one request for one bucket (the pair), two for several
	// (the pair, then every bucket as of one instant).
	full := int64(1)
	if buckets > 1 {
		full = 2
	}
	page("first page", full, 10)
	page("page within the window", 0, 10)

	sale := func(st *store.Store, user string) {
		t.Helper()
		if _, err := st.PlaceOrder(ctx, user, orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 1}}}, nil); err != nil {
			t.Fatal(err)
		}
		settle()
	}
	// Another instance sells: this one repeats its page until the window
	// ends, then reads the bucket, finds it moved, and reads both items.
	start := time.Now()
	sale(there, "far")
	if time.Since(start) < repeat/2 {
		page("page after a sale elsewhere, within the window", 0, 10)
	} else {
		t.Logf("the sale took %v: the page within the window is not checked", time.Since(start))
	}
	// One bucket: a read of the bucket finds it moved, then the full read.
	check := int64(1)
	if buckets > 1 {
		check = 0
	}
	time.Sleep(repeat)
	page("page after the window", check+full, 9)
	page("page within the next window", 0, 9)

	// This instance sells: its next page reads.
	sale(here, "near")
	page("page after its own sale", check+full, 8)
	page("page within the window after it", 0, 8)

	// This instance's own write shows at once.
	if _, err := here.PatchProduct(ctx, p.ProductID, products.Patch{Description: ptr("Brews")}, nil); err != nil {
		t.Fatal(err)
	}
	before := counted.n.Load()
	if got, err := here.GetProduct(ctx, p.ProductID); err != nil || got.Description != "Brews" {
		t.Errorf("page after its own PATCH: %q, %v; want Brews", got.Description, err)
	}
	if counted.n.Load() == before {
		t.Error("page after its own PATCH: repeated with no read")
	}
	if buckets > 1 {
		return
	}
	// One bucket: a read that finds the bucket as cached opens a new window.
	time.Sleep(store.OwnReads)
	page("page past its own reads", full, 8)
	time.Sleep(repeat)
	page("page after a quiet window", 1, 8)
	page("page within the window it opened", 0, 8)
}

// switchable is a DB whose eventually consistent catalog reads can be made
// to answer as a replica behind a write does (replicas.Behind).
type switchable struct {
	store.DB
	behind atomic.Pointer[replicas.Behind]
}

func (s *switchable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if b := s.behind.Load(); b != nil {
		return b.GetItem(ctx, in, opts...)
	}
	return s.DB.GetItem(ctx, in, opts...)
}

func (s *switchable) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if b := s.behind.Load(); b != nil {
		return b.BatchGetItem(ctx, in, opts...)
	}
	return s.DB.BatchGetItem(ctx, in, opts...)
}

// TestOwnWriteIsNotUndoneByAReplicaBehind: after this instance's PATCH, a
// page read from a replica that has not seen it yet may show the product as
// it was (an eventually consistent read), but is not kept: the next page
// reads the catalog item again instead of repeating the old one for the TTL.
func TestOwnWriteIsNotUndoneByAReplicaBehind(t *testing.T) {
	ctx := context.Background()
	prefix := stacktest.Tables(t)
	db := stacktest.DynamoDB(t)
	catalog := tables.Physical(prefix, tables.Products)
	sw := &switchable{DB: db}
	counted := &reads{DB: sw, table: catalog}
	st := store.New(counted, store.Config{Tables: store.TablesWithPrefix(prefix), CatalogCacheTTL: time.Minute})
	p, err := st.CreateProduct(ctx, products.New{Name: "Kettle", Description: "Boils", Category: "kitchen", PriceCents: ptr[int64](500), Stock: ptr[int64](10)})
	if err != nil {
		t.Fatal(err)
	}
	settle()
	old, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(catalog), Key: map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: p.ProductID}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PatchProduct(ctx, p.ProductID, products.Patch{Description: ptr("Brews")}, nil); err != nil {
		t.Fatal(err)
	}
	// Past the time this instance reads its own write strongly consistent:
	// a copy may still be behind (AWS gives the lag no bound).
	time.Sleep(store.OwnReads + 50*time.Millisecond)
	sw.behind.Store(&replicas.Behind{DB: db, Items: map[string]map[string]map[string]types.AttributeValue{catalog: {p.ProductID: old.Item}}})
	if got, err := st.GetProduct(ctx, p.ProductID); err != nil || got.Description != "Boils" {
		t.Fatalf("page from the replica behind: %q, %v; want the old description (the test's premise)", got.Description, err)
	}
	sw.behind.Store(nil)
	before := counted.catalog.Load()
	got, err := st.GetProduct(ctx, p.ProductID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Description != "Brews" || counted.catalog.Load()-before != 1 {
		t.Errorf("next page: %q after %d catalog reads, want Brews read again, not the replica's page kept", got.Description, counted.catalog.Load()-before)
	}
}

// writeInsideRead is a DB that lets a test place a write inside a page's read:
// while armed, a BatchGetItem of the catalog reads, then waits for proceed
// before it answers; a TransactWriteItems commits and then answers an error,
// as a write whose answer was lost does.
type writeInsideRead struct {
	store.DB
	table    string
	armed    atomic.Bool
	once     sync.Once
	readDone chan struct{}
	proceed  chan struct{}
}

var errAnswerLost = errors.New("connection reset after the request was sent")

func (d *writeInsideRead) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := d.DB.BatchGetItem(ctx, in, opts...)
	if _, ok := in.RequestItems[d.table]; ok && d.armed.Load() {
		d.once.Do(func() { close(d.readDone) })
		<-d.proceed
	}
	return out, err
}

func (d *writeInsideRead) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := d.DB.TransactWriteItems(ctx, in, opts...)
	if err == nil && d.armed.Load() {
		return nil, errAnswerLost
	}
	return out, err
}

// TestPageReadBeforeOwnWriteIsNotKept: a page whose read began before this
// instance wrote the catalog item is answered as read but not kept, even
// when the write's answer was lost (so the instance never learned the
// version it wrote): the next page reads the catalog item again.
func TestPageReadBeforeOwnWriteIsNotKept(t *testing.T) {
	ctx := context.Background()
	prefix := stacktest.Tables(t)
	catalog := tables.Physical(prefix, tables.Products)
	db := &writeInsideRead{DB: stacktest.DynamoDB(t), table: catalog, readDone: make(chan struct{}), proceed: make(chan struct{})}
	var release sync.Once
	proceed := func() { release.Do(func() { close(db.proceed) }) }
	t.Cleanup(proceed) // a failed premise leaves no read waiting
	counted := &reads{DB: db, table: catalog}
	st := store.New(counted, store.Config{Tables: store.TablesWithPrefix(prefix), CatalogCacheTTL: time.Minute})
	p, err := st.CreateProduct(ctx, products.New{Name: "Kettle", Description: "Boils", Category: "kitchen", PriceCents: ptr[int64](500), Stock: ptr[int64](10)})
	if err != nil {
		t.Fatal(err)
	}
	settle()
	db.armed.Store(true)
	type page struct {
		p   products.Product
		err error
	}
	read := make(chan page, 1)
	go func() {
		got, err := st.GetProduct(ctx, p.ProductID)
		read <- page{got, err}
	}()
	<-db.readDone
	if _, err := st.PatchProduct(ctx, p.ProductID, products.Patch{Description: ptr("Brews")}, nil); !errors.Is(err, errAnswerLost) {
		t.Fatalf("patch: %v, want the lost answer (the test's premise)", err)
	}
	settle()
	proceed()
	first := <-read
	db.armed.Store(false)
	if first.err != nil || first.p.Description != "Boils" {
		t.Fatalf("page read before the write: %q, %v; want the description it read, Boils", first.p.Description, first.err)
	}
	before := counted.catalog.Load()
	got, err := st.GetProduct(ctx, p.ProductID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Description != "Brews" || counted.catalog.Load()-before != 1 {
		t.Errorf("next page: %q after %d catalog reads; want Brews, read again, not the page read before the write kept", got.Description, counted.catalog.Load()-before)
	}
}

// TestOwnNewProductIsFoundAtOnce: an admin's page of a product it just
// created, on the same instance, finds it, although an eventually
// consistent read may not yet (the local stack lags such reads 20 ms).
func TestOwnNewProductIsFoundAtOnce(t *testing.T) {
	ctx := context.Background()
	prefix := stacktest.Tables(t)
	here := store.New(stacktest.DynamoDB(t), store.Config{Tables: store.TablesWithPrefix(prefix)})
	for i := range 5 {
		p, err := here.CreateProduct(ctx, products.New{Name: "Kettle", Category: "kitchen", PriceCents: ptr[int64](500), Stock: ptr[int64](10)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := here.GetProduct(ctx, p.ProductID)
		if err != nil || got.Stock != 10 || got.Version != p.Version {
			t.Fatalf("page %d right after its creation: %+v, %v; want stock 10 at version %d", i, got, err, p.Version)
		}
	}
}
