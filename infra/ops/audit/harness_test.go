package audit_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/infra/ops/audit"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/reviews"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/users"
	"github.com/shopstream/shopstream/shared/wiring"
)

// testLogger shows the system's logs when STACK_DEBUG is set.
func testLogger() *slog.Logger {
	if os.Getenv("STACK_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// settle is the audit's settle time in these tests: the local mappings poll
// every 100 ms and batch for at most 400 ms.
const settle = 2 * time.Second

// fixture is a whole system of the test's own (tables, streams, the three
// processors, TTL sweeps every 500 ms, closed orders expire after 1 s), a
// store writing to it as the API does, and a model of what the counters must
// be, kept by the test from the writes that succeeded.
type fixture struct {
	t         *testing.T
	sys       *system.System
	prefix    string
	retention time.Duration
	st        *store.Store
	model     *model
	// reviewMu keeps the model's read of the old rating and the write of
	// the new one together.
	reviewMu sync.Mutex
}

func newFixture(t *testing.T) *fixture { return newFixtureRetention(t, time.Second) }

// newFixtureRetention keeps closed orders for retention before TTL archives them.
func newFixtureRetention(t *testing.T, retention time.Duration) *fixture {
	t.Helper()
	return newFixtureMappings(t, retention, nil)
}

// newFixtureMappings runs only the mappings keep keeps (nil: all of them).
func newFixtureMappings(t *testing.T, retention time.Duration, keep func(wiring.Mapping) bool) *fixture {
	t.Helper()
	return newFixtureLimits(t, retention, keep, ddbfront.Limits{})
}

// newFixtureLimits is newFixtureMappings with the DynamoDB front's limits
// given.
func newFixtureLimits(t *testing.T, retention time.Duration, keep func(wiring.Mapping) bool, limits ddbfront.Limits) *fixture {
	t.Helper()
	var ms []wiring.Mapping
	if keep != nil {
		for _, m := range wiring.Mappings() {
			if keep(m) {
				ms = append(ms, m)
			}
		}
	}
	prefix := stacktest.OwnPrefix(t)
	sys, err := system.Start(context.Background(), system.Config{
		Stack: endpoints.Config{
			DynamoDBUpstream: stacktest.Stack(t).Upstream(),
			TTLSweepInterval: 500 * time.Millisecond,
			SweepTables:      func(name string) bool { return strings.HasPrefix(name, prefix) },
			Limits:           limits,
		},
		TablePrefix:  prefix,
		Env:          map[string]string{"ORDER_RETENTION": retention.String()},
		PollInterval: 100 * time.Millisecond,
		Mappings:     ms,
		Logger:       testLogger(),
	})
	if err != nil {
		t.Fatalf("start system: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Close(); err != nil {
			t.Errorf("close system: %v", err)
		}
	})
	return &fixture{
		t: t, sys: sys, prefix: prefix, retention: retention,
		st:    store.New(sys.DynamoDB(), store.Config{Tables: store.TablesWithPrefix(prefix), OrderRetention: retention}),
		model: &model{counts: map[audit.Item]map[string]int64{}},
	}
}

func (f *fixture) tables() tables.Names { return tables.WithPrefix(f.prefix) }

func (f *fixture) auditor(cfg audit.Config) *audit.Auditor {
	if cfg.DB == nil {
		cfg.DB = f.sys.DynamoDB()
	}
	if cfg.S3 == nil {
		cfg.S3 = f.sys.S3()
	}
	cfg.Tables = f.tables()
	if cfg.Bucket == "" {
		cfg.Bucket = envcontract.LocalArchiveBucket
	}
	if cfg.Settle == 0 {
		cfg.Settle = settle
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = time.Minute
	}
	return audit.New(cfg)
}

// idle waits until the processors have applied every record written so far.
func (f *fixture) idle() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.sys.Poller.Idle(ctx); err != nil {
		f.t.Fatal(err)
	}
}

// model is the counters as the test's own successful writes say they must be.
type model struct {
	mu     sync.Mutex
	counts map[audit.Item]map[string]int64
}

func (m *model) add(it audit.Item, counter string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.counts[it]
	if c == nil {
		c = map[string]int64{}
		m.counts[it] = c
	}
	c[counter] += n
}

func (m *model) get(it audit.Item, counter string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[it][counter]
}

func user(id string) audit.Item    { return audit.Item{Kind: audit.User, ID: id} }
func product(id string) audit.Item { return audit.Item{Kind: audit.Product, ID: id} }

func (f *fixture) createUser(id string) {
	f.t.Helper()
	if _, err := f.st.CreateUser(context.Background(), id, users.New{Email: id + "@example.com", Name: "User " + id}); err != nil {
		f.t.Fatalf("create user %s: %v", id, err)
	}
	f.model.add(user(id), "orderCount", 0)
}

func (f *fixture) createProduct(name string, priceCents int64) string {
	f.t.Helper()
	stock := int64(1_000_000)
	p, err := f.st.CreateProduct(context.Background(), products.New{Name: name, Description: "A " + name, Category: "kitchen", PriceCents: &priceCents, Stock: &stock})
	if err != nil {
		f.t.Fatalf("create product %s: %v", name, err)
	}
	f.model.add(product(p.ProductID), "unitsSold", 0)
	return p.ProductID
}

// order places an order of userID for qty[i] units of pids[i].
func (f *fixture) order(userID string, pids []string, qty []int) (orders.Order, error) {
	var items []orders.Item
	for i, p := range pids {
		items = append(items, orders.Item{ProductID: p, Quantity: qty[i]})
	}
	o, err := f.st.PlaceOrder(context.Background(), userID, orders.Request{Items: items}, nil)
	if err != nil {
		return o, err
	}
	f.model.add(user(userID), "orderCount", 1)
	f.model.add(user(userID), "lifetimeSpendCents", o.TotalCents)
	for _, l := range o.Lines {
		f.model.add(product(l.ProductID), "unitsSold", int64(l.Quantity))
	}
	return o, nil
}

func (f *fixture) mustOrder(userID string, pids []string, qty []int) orders.Order {
	f.t.Helper()
	o, err := f.order(userID, pids, qty)
	if err != nil {
		f.t.Fatalf("place order: %v", err)
	}
	return o
}

func (f *fixture) cancel(o orders.Order) error {
	if _, err := f.st.CancelOrder(context.Background(), o.UserID, o.OrderID); err != nil {
		return err
	}
	f.model.add(user(o.UserID), "lifetimeSpendCents", -o.TotalCents)
	for _, l := range o.Lines {
		f.model.add(product(l.ProductID), "unitsSold", -int64(l.Quantity))
	}
	return nil
}

// deliver ships and delivers o: it expires a second later and TTL moves it
// to the archive.
func (f *fixture) deliver(o orders.Order) {
	f.t.Helper()
	for _, to := range []orders.Status{orders.Shipped, orders.Delivered} {
		if _, err := f.st.MoveOrder(context.Background(), o.UserID, o.OrderID, to, nil); err != nil {
			f.t.Fatalf("move order %s to %s: %v", o.OrderID, to, err)
		}
	}
}

// review writes userID's review of productID, keeping the model.
func (f *fixture) review(productID, userID string, rating int) error {
	f.reviewMu.Lock()
	defer f.reviewMu.Unlock()
	old, err := f.reviewRating(productID, userID)
	if err != nil {
		return err
	}
	if _, _, err := f.st.PutReview(context.Background(), productID, userID, reviews.Input{Rating: &rating, Title: "Review", Body: "Body"}); err != nil {
		return err
	}
	if old == 0 {
		f.model.add(user(userID), "reviewCount", 1)
		f.model.add(product(productID), "reviewCount", 1)
	}
	f.model.add(product(productID), "ratingTotal", int64(rating-old))
	return nil
}

func (f *fixture) deleteReview(productID, userID string) {
	f.t.Helper()
	f.reviewMu.Lock()
	defer f.reviewMu.Unlock()
	old, err := f.reviewRating(productID, userID)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.st.DeleteReview(context.Background(), productID, userID); err != nil {
		f.t.Fatalf("delete review: %v", err)
	}
	f.model.add(user(userID), "reviewCount", -1)
	f.model.add(product(productID), "reviewCount", -1)
	f.model.add(product(productID), "ratingTotal", -int64(old))
}

// reviewRating is the rating of userID's review of productID, 0 when none.
func (f *fixture) reviewRating(productID, userID string) (int, error) {
	out, err := f.sys.DynamoDB().GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(f.tables().Reviews), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"productId": &types.AttributeValueMemberS{Value: productID},
			"userId":    &types.AttributeValueMemberS{Value: userID},
		},
	})
	if err != nil || out.Item == nil {
		return 0, err
	}
	n, ok := out.Item["rating"].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("review %s/%s without rating", productID, userID)
	}
	var r int
	_, err = fmt.Sscan(n.Value, &r)
	return r, err
}

// stored reads the counters of it as the table holds them, with its version.
func (f *fixture) stored(it audit.Item) (map[string]int64, int64) {
	f.t.Helper()
	table, key := f.tables().Users, "userId"
	if it.Kind == audit.Product {
		table, key = f.tables().Products, "productId"
	}
	out, err := f.sys.DynamoDB().GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{key: &types.AttributeValueMemberS{Value: it.ID}},
	})
	if err != nil || out.Item == nil {
		f.t.Fatalf("read %s: %v (item %v)", it, err, out.Item)
	}
	counts := map[string]int64{}
	var version int64
	for _, c := range append([]string{"version"}, audit.Counters[it.Kind]...) {
		if n, ok := out.Item[c].(*types.AttributeValueMemberN); ok {
			var v int64
			fmt.Sscan(n.Value, &v)
			if c == "version" {
				version = v
			} else {
				counts[c] = v
			}
		}
	}
	return counts, version
}

// checkExact fails unless every counter item of the model holds exactly the
// model's counters.
func (f *fixture) checkExact() {
	f.t.Helper()
	f.model.mu.Lock()
	items := make([]audit.Item, 0, len(f.model.counts))
	for it := range f.model.counts {
		items = append(items, it)
	}
	f.model.mu.Unlock()
	for _, it := range items {
		got, _ := f.stored(it)
		for _, c := range audit.Counters[it.Kind] {
			if want := f.model.get(it, c); got[c] != want {
				f.t.Errorf("%s %s: got %d, want %d", it, c, got[c], want)
			}
		}
	}
}

// tamper adds n to a counter behind the processors' back, as a lost or
// doubled batch would, without touching the version.
func (f *fixture) tamper(it audit.Item, counter string, n int64) {
	f.t.Helper()
	table, key := f.tables().Users, "userId"
	if it.Kind == audit.Product {
		table, key = f.tables().Products, "productId"
	}
	e, err := expression.NewBuilder().WithUpdate(expression.Add(expression.Name(counter), expression.Value(n))).Build()
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.sys.DynamoDB().UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{key: &types.AttributeValueMemberS{Value: it.ID}},
		UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}); err != nil {
		f.t.Fatalf("tamper %s: %v", it, err)
	}
}

// workload writes users, products, orders (placed, cancelled, delivered and
// archived by TTL) and reviews (written, replaced, deleted), waits until the
// delivered orders are in the archive and the processors are idle, and
// returns the user and product ids.
func (f *fixture) workload() (us, ps []string) {
	f.t.Helper()
	for i := range 4 {
		id := fmt.Sprintf("u%d", i)
		f.createUser(id)
		us = append(us, id)
	}
	for i := range 4 {
		ps = append(ps, f.createProduct(fmt.Sprintf("Kettle %d", i), int64(100*(i+1))))
	}
	// 13 orders: 4 stay open; 4 delivered and 5 cancelled close, expire and
	// go to the archive.
	var closed []orders.Order
	for i := range 12 {
		o := f.mustOrder(us[i%4], []string{ps[i%4], ps[(i+1)%4]}, []int{1 + i%3, 2})
		switch i % 3 {
		case 1:
			if err := f.cancel(o); err != nil {
				f.t.Fatalf("cancel: %v", err)
			}
			closed = append(closed, o)
		case 2:
			f.deliver(o)
			closed = append(closed, o)
		}
	}
	o := f.mustOrder(us[0], []string{ps[3]}, []int{5})
	if err := f.cancel(o); err != nil {
		f.t.Fatalf("cancel: %v", err)
	}
	closed = append(closed, o)
	for i, p := range ps {
		for j, u := range us {
			if (i+j)%2 == 0 {
				if err := f.review(p, u, 1+(i+j)%5); err != nil {
					f.t.Fatalf("review: %v", err)
				}
			}
		}
	}
	if err := f.review(ps[0], us[0], 5); err != nil { // replaced
		f.t.Fatalf("review: %v", err)
	}
	f.deleteReview(ps[1], us[1])
	if f.retention < time.Minute {
		f.waitArchived(closed)
	}
	f.idle()
	return us, ps
}

// waitArchived waits until TTL removed the orders from the table and the
// processors have settled.
func (f *fixture) waitArchived(os []orders.Order) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, o := range os {
		for {
			_, err := f.st.GetOrder(context.Background(), o.UserID, o.OrderID)
			if errcode.Of(err) == errcode.NotFound {
				break
			}
			if time.Now().After(deadline) {
				f.t.Fatalf("order %s still in the table (err %v)", o.OrderID, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
