package esm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/esm"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/shared/wiring"
)

// The running stack with mappings of the test's choosing: the whole system
// (API, functions) with no mapping of its own, and a poller of ours.

func startSystem(tb testing.TB) (*system.System, string) {
	tb.Helper()
	prefix := stacktest.OwnPrefix(tb)
	sys, err := system.Start(context.Background(), system.Config{
		Stack:       endpoints.Config{DynamoDBUpstream: stacktest.Stack(tb).Upstream(), TTLSweepInterval: -1},
		TablePrefix: prefix,
		NoMappings:  true,
	})
	if err != nil {
		tb.Fatalf("start system: %v", err)
	}
	tb.Cleanup(func() { sys.Close() })
	return sys, prefix
}

// mappingsOf returns the wiring's mappings of the named ones, changed by edit.
func mappingsOf(tb testing.TB, edit func(*wiring.Mapping), names ...string) []wiring.Mapping {
	tb.Helper()
	var out []wiring.Mapping
	for _, m := range wiring.Mappings() {
		for _, n := range names {
			if m.Name == n {
				edit(&m)
				out = append(out, m)
			}
		}
	}
	if len(out) != len(names) {
		tb.Fatalf("mappings %v: found %d in the wiring", names, len(out))
	}
	return out
}

func startPoller(tb testing.TB, sys *system.System, prefix string, ms []wiring.Mapping, fns map[string]esm.Invoker, interval time.Duration) *esm.Poller {
	tb.Helper()
	return startPartitioned(tb, sys, prefix, ms, fns, interval, 1)
}

// startPartitioned starts a poller that reads each stream as partitions
// shards (esm.Config.Partitions).
func startPartitioned(tb testing.TB, sys *system.System, prefix string, ms []wiring.Mapping, fns map[string]esm.Invoker, interval time.Duration, partitions int) *esm.Poller {
	tb.Helper()
	var logger *slog.Logger
	if os.Getenv("STACK_DEBUG") != "" {
		logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := esm.Start(context.Background(), esm.Config{DynamoDB: sys.DynamoDB(), Streams: timedStreams{sys.Streams(), tb}, TablePrefix: prefix,
		Mappings: ms, Functions: fns, PollInterval: interval, Partitions: partitions, Logger: logger})
	if err != nil {
		tb.Fatalf("start poller: %v", err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// timedStreams logs stream calls slower than a second.
type timedStreams struct {
	s  esm.StreamReader
	tb testing.TB
}

func (t timedStreams) slow(op string, start time.Time, err error) {
	if d := time.Since(start); d > time.Second {
		t.tb.Logf("%s took %v (err %v)", op, d, err)
	}
}

func (t timedStreams) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	start := time.Now()
	out, err := t.s.DescribeStream(ctx, in, o...)
	t.slow("DescribeStream", start, err)
	return out, err
}

func (t timedStreams) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	start := time.Now()
	out, err := t.s.GetShardIterator(ctx, in, o...)
	t.slow("GetShardIterator", start, err)
	return out, err
}

func (t timedStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	start := time.Now()
	out, err := t.s.GetRecords(ctx, in, o...)
	t.slow("GetRecords", start, err)
	return out, err
}

// api calls the system's API as sub (admin when sub is "admin").
type api struct {
	tb   testing.TB
	base string
}

func (a api) call(method, path, sub string, body, out any) int {
	a.tb.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if sub != "" {
		tok, err := apigw.Token([]byte(system.DefaultJWTSecret), sub, sub == "admin", time.Hour)
		if err != nil {
			a.tb.Fatalf("token: %v", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			a.tb.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

func (a api) must(status int, method, path, sub string, body, out any) {
	a.tb.Helper()
	var raw json.RawMessage
	if got := a.call(method, path, sub, body, &raw); got != status {
		a.tb.Fatalf("%s %s: got %d %s, want %d", method, path, got, raw, status)
	}
	if out != nil {
		json.Unmarshal(raw, out)
	}
}

type product struct {
	ProductID string `json:"productId"`
	UnitsSold int    `json:"unitsSold"`
	Version   int    `json:"version"`
}

type user struct {
	OrderCount         int   `json:"orderCount"`
	LifetimeSpendCents int64 `json:"lifetimeSpendCents"`
}

func (a api) product(name string, price int) string {
	var p product
	a.must(201, "POST", "/products", "admin", map[string]any{"name": name, "description": "A " + name, "category": "drill",
		"priceCents": price, "stock": 100000}, &p)
	return p.ProductID
}

func (a api) user(sub string) {
	a.must(201, "POST", "/users", sub, map[string]any{"name": sub}, nil)
}

// concurrency wraps a function and keeps the most invocations it saw at once.
type concurrency struct {
	fn            esm.Invoker
	now, most     atomic.Int32
	mu            sync.Mutex
	batchSizes    []int
	failedRecords int // reported in partial batch responses
	errors        int
}

func (c *concurrency) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	c.mu.Lock()
	c.batchSizes = append(c.batchSizes, len(ev.Records))
	c.mu.Unlock()
	resp, err := c.fn.Handle(ctx, ev)
	c.mu.Lock()
	c.failedRecords += len(resp.BatchItemFailures)
	if err != nil {
		c.errors++
	}
	c.mu.Unlock()
	return resp, err
}

// totals returns the records and batches the function was given.
func (c *concurrency) totals() (records, batches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.batchSizes {
		records += n
	}
	return records, len(c.batchSizes)
}

// TestParallelOrdersDrillIsExact: the orders stream's counters mapping with
// four batches at once, as ParallelizationFactor 4 on one shard and as the
// four shards of a new table's four partitions. Orders of four users over
// three products are placed and some cancelled; their records reach the
// counters in up to four concurrent batches, the same product's counter
// item (and, with ParallelizationFactor, the same user's) from several at
// once, and every counter ends exact.
func TestParallelOrdersDrillIsExact(t *testing.T) {
	for _, c := range []struct{ partitions, factor int }{{1, 4}, {4, 1}} {
		t.Run(fmt.Sprintf("%d partitions, factor %d", c.partitions, c.factor), func(t *testing.T) {
			parallelOrdersDrill(t, c.partitions, c.factor)
		})
	}
}

func parallelOrdersDrill(t *testing.T, partitions, factor int) {
	sys, prefix := startSystem(t)
	a := api{t, sys.APIURL}
	prices := []int{300, 700, 1100}
	var products []string
	for i, price := range prices {
		products = append(products, a.product(fmt.Sprintf("Drill %d", i), price))
	}
	users := []string{"d1", "d2", "d3", "d4"}
	for _, u := range users {
		a.user(u)
	}
	type placed struct {
		user, id string
		total    int64
		qty      []int
	}
	var mu sync.Mutex
	var orders []placed
	var wg sync.WaitGroup
	for ui, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				qty := []int{1 + (ui+i)%3, 0, 1 + i%2}
				qty[1] = 1 + (ui*i)%2
				var items []map[string]any
				var total int64
				for pi, q := range qty {
					items = append(items, map[string]any{"productId": products[pi], "quantity": q})
					total += int64(q * prices[pi])
				}
				var o struct {
					OrderID string `json:"orderId"`
				}
				a.must(201, "POST", "/users/"+u+"/orders", u, map[string]any{"items": items}, &o)
				mu.Lock()
				orders = append(orders, placed{u, o.OrderID, total, qty})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	// The records wait in the stream; the mapping starts on all of them at
	// once, so its four lanes fill together.
	counters := &concurrency{fn: sys.Functions[wiring.Counters]}
	ms := mappingsOf(t, func(m *wiring.Mapping) {
		m.ParallelizationFactor, m.BatchSize, m.BatchingWindow = factor, 2, 0
	}, "orders-counters")
	p := startPartitioned(t, sys, prefix, ms, map[string]esm.Invoker{wiring.Counters: counters}, 50*time.Millisecond, partitions)
	// One order of each user is cancelled while the rest is processed.
	cancelled, done := map[string]bool{}, map[string]bool{}
	for _, o := range orders {
		if !done[o.user] {
			done[o.user] = true
			a.must(200, "POST", "/users/"+o.user+"/orders/"+o.id+"/cancel", o.user, nil, nil)
			cancelled[o.id] = true
		}
	}
	wantUser := map[string]user{}
	wantUnits := make([]int, len(products))
	for _, o := range orders {
		w := wantUser[o.user]
		w.OrderCount++
		if !cancelled[o.id] {
			w.LifetimeSpendCents += o.total
			for pi, q := range o.qty {
				wantUnits[pi] += q
			}
		}
		wantUser[o.user] = w
	}
	check := func() string {
		for _, u := range users {
			var got user
			a.must(200, "GET", "/users/"+u, u, nil, &got)
			if got != wantUser[u] {
				return fmt.Sprintf("user %s: got %+v, want %+v", u, got, wantUser[u])
			}
		}
		for pi, id := range products {
			var got product
			a.must(200, "GET", "/products/"+id, "", nil, &got)
			if got.UnitsSold != wantUnits[pi] {
				return fmt.Sprintf("product %d: got %d units sold, want %d", pi, got.UnitsSold, wantUnits[pi])
			}
		}
		return ""
	}
	deadline := time.Now().Add(60 * time.Second)
	for msg := check(); msg != ""; msg = check() {
		if time.Now().After(deadline) {
			t.Fatalf("counters: %s", msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if msg := check(); msg != "" {
		t.Errorf("after settling: %s", msg)
	}
	if f := p.Failures("orders-counters"); len(f) != 0 {
		t.Errorf("failures: got %+v, want none", f)
	}
	if most := counters.most.Load(); most < 2 || most > 4 {
		t.Errorf("concurrent counters batches: got %d, want 2..4 (%d partitions, ParallelizationFactor %d)", most, partitions, factor)
	}
}
