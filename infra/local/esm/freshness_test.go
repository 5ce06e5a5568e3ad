package esm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/infra/local/esm"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/wiring"
)

// meteredDB adds up the writes of the counters' committed transactions: the
// write units DynamoDB Local reports, and the items written, which AWS bills
// at 2 write units each in a transaction (items up to 1 KB, as counter items
// and markers are).
type meteredDB struct {
	db      *dynamodb.Client
	mu      sync.Mutex
	wcu     float64
	txs     int
	actions int
}

func (m *meteredDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.TransactWriteItems(ctx, in, opts...)
	if err == nil {
		m.mu.Lock()
		m.txs++
		m.actions += len(in.TransactItems)
		for _, c := range out.ConsumedCapacity {
			if c.CapacityUnits != nil {
				m.wcu += *c.CapacityUnits
			}
		}
		m.mu.Unlock()
	}
	return out, err
}

func (m *meteredDB) totals() (wcu float64, txs, actions int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wcu, m.txs, m.actions
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkFreshness measures, on the running stack polled as `make run`
// polls (250 ms), how long an order takes to show in its user's orderCount
// (one stream hop: orders → counters) and in its product's unitsSold in the
// search index (two hops: orders → counters → products → indexer), p50 and
// p99, idle and under an order load, for batching windows and
// parallelization factors of the two mappings; and what the counters write
// per record (write units of committed transactions) and how full batches are.
//
//	go test -run '^$' -bench Freshness -benchtime 30x -timeout 30m ./infra/local/esm/
func BenchmarkFreshness(b *testing.B) {
	configs := []struct {
		name             string
		counters, search time.Duration // batching windows of orders-counters and products-indexer
		factor           int
	}{
		{"windows=1s,1s/factor=1", time.Second, time.Second, 1},
		{"windows=0s,0s/factor=1", 0, 0, 1},
		{"windows=0s,0s/factor=4", 0, 0, 4},
		{"windows=1s,1s/factor=4", time.Second, time.Second, 4},
	}
	for _, c := range configs {
		for _, loaded := range []bool{false, true} {
			name := c.name + "/idle"
			if loaded {
				name = c.name + "/loaded"
			}
			b.Run(name, func(b *testing.B) { freshness(b, c.counters, c.search, c.factor, loaded) })
		}
	}
}

func freshness(b *testing.B, countersWindow, searchWindow time.Duration, factor int, loaded bool) {
	sys, prefix := startSystem(b)
	a := api{b, sys.APIURL}
	tables, err := envcontract.Of(wiring.Counters).ReadTables(func(k string) string { return sys.Env[k] })
	if err != nil {
		b.Fatal(err)
	}
	meter := &meteredDB{db: sys.DynamoDB()}
	counters := &concurrency{fn: counting.New(counting.Deps{DB: meter, Tables: tables})}
	indexer := &concurrency{fn: sys.Functions[wiring.StreamIndexer]}
	ms := mappingsOf(b, func(m *wiring.Mapping) {
		m.ParallelizationFactor = factor
		m.BatchingWindow = searchWindow
		if m.Name == "orders-counters" {
			m.BatchingWindow = countersWindow
		}
	}, "orders-counters", "products-indexer")
	startPoller(b, sys, prefix, ms, map[string]esm.Invoker{wiring.Counters: counters, wiring.StreamIndexer: indexer}, 0)

	probe := a.product("Probe", 100)
	a.user("probe")
	// The load: four clients placing two-line orders back to back over
	// ten products, each as a user of its own.
	var loadProducts []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var loadOrders atomic.Int64
	if loaded {
		for i := range 10 {
			loadProducts = append(loadProducts, a.product(fmt.Sprintf("Load %d", i), 250))
		}
		for c := range 4 {
			u := fmt.Sprintf("load%d", c)
			a.user(u)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					items := []map[string]any{{"productId": loadProducts[(c+n)%10], "quantity": 1}, {"productId": loadProducts[(c+n+3)%10], "quantity": 2}}
					if code := a.call("POST", "/users/"+u+"/orders", u, map[string]any{"items": items}, nil); code == 201 {
						loadOrders.Add(1)
					}
				}
			}()
		}
		time.Sleep(2 * time.Second) // the pipeline reaches its pace
	}
	docURL := sys.Env["SEARCH_URL"] + "/products/_doc/" + probe
	unitsInSearch := func() int {
		resp, err := http.Get(docURL)
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var doc struct {
			Source struct {
				UnitsSold int `json:"unitsSold"`
			} `json:"_source"`
		}
		if json.NewDecoder(resp.Body).Decode(&doc) != nil {
			return -1
		}
		return doc.Source.UnitsSold
	}
	var toCounter, toSearch []time.Duration
	wcu0, txs0, actions0 := meter.totals()
	records0, batches0 := counters.totals()
	idxRecords0, idxBatches0 := indexer.totals()
	loadStart, ordersAtStart := time.Now(), loadOrders.Load()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Orders land at any moment of the poll cycle.
		time.Sleep(time.Duration(rand.Int64N(int64(250 * time.Millisecond))))
		start := time.Now()
		a.must(201, "POST", "/users/probe/orders", "probe", map[string]any{"items": []map[string]any{{"productId": probe, "quantity": 1}}}, nil)
		counted, indexed := false, false
		deadline := start.Add(30 * time.Second)
		for !(counted && indexed) && time.Now().Before(deadline) {
			if !counted {
				var u user
				a.must(200, "GET", "/users/probe", "probe", nil, &u)
				if u.OrderCount >= i+1 {
					counted = true
					toCounter = append(toCounter, time.Since(start))
				}
			}
			if !indexed && unitsInSearch() >= i+1 {
				indexed = true
				toSearch = append(toSearch, time.Since(start))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !counted || !indexed {
			counters.mu.Lock()
			b.Logf("counters: %d batches, %d failed records, %d errors, %d in flight", len(counters.batchSizes), counters.failedRecords, counters.errors, counters.now.Load())
			counters.mu.Unlock()
			b.Fatalf("order %d not visible after 30 s (counted %v, indexed %v)", i, counted, indexed)
		}
	}
	b.StopTimer()
	elapsed := time.Since(loadStart)
	close(stop)
	wg.Wait()
	wcu, txs, actions := meter.totals()
	records, batches := counters.totals()
	records, batches = records-records0, batches-batches0
	idxRecords, idxBatches := indexer.totals()
	idxRecords, idxBatches = idxRecords-idxRecords0, idxBatches-idxBatches0
	b.ReportMetric(float64(percentile(toCounter, 0.5).Milliseconds()), "counter-p50-ms")
	b.ReportMetric(float64(percentile(toCounter, 0.99).Milliseconds()), "counter-p99-ms")
	b.ReportMetric(float64(percentile(toSearch, 0.5).Milliseconds()), "search-p50-ms")
	b.ReportMetric(float64(percentile(toSearch, 0.99).Milliseconds()), "search-p99-ms")
	if records > 0 {
		b.ReportMetric(2*float64(actions-actions0)/float64(records), "wcu/record")
		b.ReportMetric((wcu-wcu0)/float64(records), "ddblocal-wcu/record")
		b.ReportMetric(float64(txs-txs0)/float64(records), "tx/record")
		b.ReportMetric(float64(records)/float64(batches), "records/batch")
	}
	if idxBatches > 0 {
		b.ReportMetric(float64(idxRecords)/float64(idxBatches), "indexer-records/batch")
		b.ReportMetric(float64(idxRecords)/float64(max(records, 1)), "indexer-records/counter-record")
	}
	b.ReportMetric(float64(counters.most.Load()), "max-concurrent")
	counters.mu.Lock()
	b.ReportMetric(float64(counters.failedRecords+counters.errors), "counter-failures")
	counters.mu.Unlock()
	if loaded {
		b.ReportMetric(float64(loadOrders.Load()-ordersAtStart)/elapsed.Seconds(), "load-orders/s")
	}
}
